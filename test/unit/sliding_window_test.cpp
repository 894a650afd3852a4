/*
 * test/unit/sliding_window_test.cpp
 *
 * The sliding-window counter (src/core/sliding_window.hpp): the estimate
 * previous * (1 - (t - s) / W) + current, decisions, the waits each call
 * reports (exact to the microsecond), refunds, and how inexact it is: never
 * more than N in one aligned window, up to 2N - 1 in an arbitrary span of
 * W, and a denial before N when the previous window's grants were early.
 */
#include "test_helpers.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "sliding_window.hpp"

using ratelimit::core::SlidingRoom;

namespace {

constexpr std::int64_t kSecond = 1000000;
constexpr std::int64_t kW = 10 * kSecond;
/* A window start: 80000 windows of 10 s after the epoch. */
constexpr std::int64_t kT0 = INT64_C(800000) * kSecond;

Limit
Sliding(double n, std::int64_t window_us, std::int64_t phase_us = 0)
{
	Limit limit{0.0, n};
	limit.window_us = window_us;
	limit.phase_us = phase_us;
	limit.sliding = true;
	return limit;
}

Request
Take(double cost)
{
	return Request::Plain(cost);
}

/* Takes `cost` and returns the decision; `b` is what is stored after it. */
Decision
TakeAt(Bucket &b, const Limit &limit, double cost, std::int64_t at)
{
	Decision d = Decide(b, limit, Take(cost), at);
	if (d.write)
		b = d.next;
	return d;
}

/* The whole microseconds in `seconds`, as FullAtMicros rounds them. */
std::int64_t
Micros(double seconds)
{
	return static_cast<std::int64_t>(std::llround(seconds * kSecond));
}

TEST(SlidingWindow, GrantsUpToNInAWindowAndDenialsWriteNothing)
{
	const Limit limit = Sliding(10, kW);
	Bucket b = FullBucket(limit, kT0);
	for (int i = 0; i < 10; i++) {
		Decision d = TakeAt(b, limit, 1, kT0 + i * kSecond / 2);
		ASSERT_TRUE(d.allowed) << i;
		EXPECT_TRUE(d.write);
		EXPECT_EQ(d.remaining, 9 - i);
		EXPECT_EQ(d.retry_after, 0.0);
	}
	const Bucket stored = b;
	Decision d = Decide(b, limit, Take(1), kT0 + 5 * kSecond);
	EXPECT_FALSE(d.allowed);
	EXPECT_FALSE(d.write);
	EXPECT_EQ(d.remaining, 0.0);
	/* Next window: previous 10 at weight 1 - x / 10 s; one more fits at x = 1 s. */
	EXPECT_EQ(d.retry_after, 6.0);
	EXPECT_EQ(b.tokens, stored.tokens);
	EXPECT_EQ(b.stamp_us, stored.stamp_us);
	/* The estimate falls to 0 two boundaries after the window of the takes. */
	EXPECT_EQ(d.reset_after, 15.0);
	EXPECT_EQ(d.refill_after, 6.0);
}

TEST(SlidingWindow, TheEstimateWeighsThePreviousWindowByWhatIsLeftOfThisOne)
{
	const Limit limit = Sliding(10, kW);
	Bucket b = FullBucket(limit, kT0);
	TakeAt(b, limit, 8, kT0 + kSecond);      /* previous window: 8 */
	TakeAt(b, limit, 1, kT0 + kW + kSecond); /* current: 1 */
	EXPECT_EQ(b.previous, 8.0);
	EXPECT_EQ(b.tokens, 9.0);
	/* At 2.5 s into the window: 8 * 0.75 + 1 = 7, room 3. */
	EXPECT_DOUBLE_EQ(SlidingRoom(b, limit, kT0 + kW + 2500000), 3.0);
	Decision d = Decide(b, limit, Take(3), kT0 + kW + 2500000);
	EXPECT_TRUE(d.allowed);
	EXPECT_DOUBLE_EQ(d.remaining, 0.0);
	d = Decide(b, limit, Take(4), kT0 + kW + 2500000);
	EXPECT_FALSE(d.allowed);
	/* Room 4 when 8 * (1 - x / 10) = 5: x = 3.75 s. */
	EXPECT_DOUBLE_EQ(d.retry_after, 1.25);
	/* A window skipped forgets both. */
	EXPECT_EQ(SlidingRoom(b, limit, kT0 + 3 * kW), 10.0);
}

TEST(SlidingWindow, WindowsAlignOnThePhase)
{
	/* Windows start at 3 s past each multiple of 10 s. */
	const Limit limit = Sliding(4, kW, 3 * kSecond);
	Bucket b = FullBucket(limit, kT0);
	TakeAt(b, limit, 4, kT0 + 2 * kSecond); /* window [T0 - 7 s, T0 + 3 s) */
	Decision d = Decide(b, limit, Take(1), kT0 + 2 * kSecond);
	ASSERT_FALSE(d.allowed);
	/* At T0 + 3 s + x: 4 (1 - x / 10) + 1 <= 4 at x = 2.5 s. */
	EXPECT_DOUBLE_EQ(d.retry_after, 3.5);
	EXPECT_DOUBLE_EQ(d.reset_after, 11.0);
}

TEST(SlidingWindow, RefundLowersCurrentNotBelowZero)
{
	const Limit limit = Sliding(10, kW);
	Bucket b = FullBucket(limit, kT0);
	TakeAt(b, limit, 6, kT0 + kSecond);
	TakeAt(b, limit, 2, kT0 + kW + kSecond);
	Decision r = Refund(b, limit, 5, kT0 + kW + 2 * kSecond);
	EXPECT_TRUE(r.write);
	EXPECT_EQ(r.refunded, 2.0); /* only the current window's 2 */
	EXPECT_EQ(r.next.tokens, 10.0);
	EXPECT_EQ(r.next.previous, 6.0); /* previous stays */
	EXPECT_DOUBLE_EQ(r.remaining, 10.0 - 6.0 * 0.8);
	Decision again = Refund(r.next, limit, 1, kT0 + kW + 2 * kSecond);
	EXPECT_FALSE(again.write);
	EXPECT_EQ(again.refunded, 0.0);
}

TEST(SlidingWindow, ValidateRefusesReservationAndCostsAboveN)
{
	const Limit limit = Sliding(10, kW);
	EXPECT_EQ(Validate(limit, Take(10)), Status::kOk);
	EXPECT_EQ(Validate(limit, Take(10.5)), Status::kCostExceedsBurst);
	EXPECT_EQ(Validate(limit, Request::Within(1, 5)), Status::kReserveUnsupported);
	EXPECT_EQ(Validate(limit, Request::Within(1, 0)), Status::kOk);
	EXPECT_EQ(Validate(limit, Take(-1)), Status::kCostInvalid);
	Limit no_window = limit;
	no_window.window_us = 0;
	EXPECT_EQ(Validate(no_window, Take(1)), Status::kRateInvalid);
}

TEST(SlidingWindow, FullWhenTheEstimateIsZero)
{
	const Limit limit = Sliding(10, kW);
	Bucket b = FullBucket(limit, kT0);
	EXPECT_TRUE(IsFull(b, limit, kT0));
	Decision d = TakeAt(b, limit, 1, kT0 + 9 * kSecond);
	EXPECT_EQ(d.reset_after, 11.0);
	EXPECT_EQ(FullAtMicros(d, kT0 + 9 * kSecond), kT0 + 2 * kW);
	EXPECT_FALSE(IsFull(b, limit, kT0 + 2 * kW - 1));
	EXPECT_TRUE(IsFull(b, limit, kT0 + 2 * kW));
	/* A clock behind the stamp keeps it: not full. */
	EXPECT_FALSE(IsFull(b, limit, kT0));
}

TEST(SlidingWindow, AClockThatStepsBackKeepsTheStamp)
{
	const Limit limit = Sliding(2, kW);
	Bucket b = FullBucket(limit, kT0);
	TakeAt(b, limit, 2, kT0 + kW + kSecond);
	Decision d = Decide(b, limit, Take(1), kT0);
	EXPECT_FALSE(d.allowed);
	EXPECT_FALSE(d.write);
	EXPECT_EQ(Refill(b, limit, kT0).stamp_us, kT0 + kW + kSecond);
	/* Waits count from now: 1 s behind, then 5 s into the next window. */
	EXPECT_DOUBLE_EQ(d.retry_after, 25.0);
}

/* A clock that steps back into the window before the stamp's counts that
 * window's grants (previous) in full: the calls it grants count as the
 * stamp's window's (current), and the window they are decided in holds
 * previous already.  Stepped back within the stamp's window, previous
 * weighs what it weighs then, not less. */
TEST(SlidingWindow, AClockThatStepsBackGrantsNoMoreThanNInTheWindowItStepsInto)
{
	const Limit limit = Sliding(5, kW);
	Bucket b = FullBucket(limit, kT0);
	ASSERT_TRUE(TakeAt(b, limit, 5, kT0 + kSecond).allowed);
	/* 9 s into the next window: 5 * 0.1 + 1 <= 5. */
	ASSERT_TRUE(TakeAt(b, limit, 1, kT0 + kW + 9 * kSecond).allowed);
	/* Back in the first window, which holds 5 already. */
	Decision d = TakeAt(b, limit, 1, kT0 + 5 * kSecond);
	EXPECT_FALSE(d.allowed);
	EXPECT_DOUBLE_EQ(d.remaining, -1.0);
	/* Granted once 5 * w + 1 + 1 <= 5: from 4 s into the second window
	 * on. */
	EXPECT_DOUBLE_EQ(d.retry_after, 7.0 + 2.0);
	/* Back 2 s into the second window: 5 * 0.8 + 1 + 1 > 5. */
	EXPECT_FALSE(TakeAt(b, limit, 1, kT0 + kW + 2 * kSecond).allowed);
	EXPECT_TRUE(TakeAt(b, limit, 1, kT0 + kW + 4 * kSecond).allowed);
	/* The first window granted 5, the second 2. */
	EXPECT_DOUBLE_EQ(SlidingRoom(b, limit, kT0 + kW + 9 * kSecond), 5 - 0.5 - 2.0);
}

/* Whether a call of `cost` at `at` on `b` is granted. */
bool
Grants(const Bucket &b, const Limit &limit, double cost, std::int64_t at)
{
	return Decide(b, limit, Take(cost), at).allowed;
}

TEST(SlidingWindow, WaitsAreExactToTheMicrosecond)
{
	std::mt19937_64 rng(20261126);
	for (int round = 0; round < 300; round++) {
		const double n = 1 + static_cast<double>(rng() % 20);
		const std::int64_t w = 1 + static_cast<std::int64_t>(rng() % (3 * kW));
		const Limit limit = Sliding(n, w, static_cast<std::int64_t>(rng() % w));
		Bucket b = FullBucket(limit, kT0);
		std::int64_t t = kT0;
		for (int i = 0; i < 30; i++) {
			t += static_cast<std::int64_t>(rng() % (w / 3 + 1));
			const double cost = static_cast<double>(rng() % (static_cast<int>(n) + 1));
			const Decision d = TakeAt(b, limit, cost, t);
			const std::int64_t retry = Micros(d.retry_after);
			if (!d.allowed) {
				ASSERT_GE(retry, 1);
				EXPECT_TRUE(Grants(b, limit, cost, t + retry)) << round << " " << i;
				EXPECT_FALSE(Grants(b, limit, cost, t + retry - 1)) << round << " " << i;
			} else {
				EXPECT_EQ(retry, 0);
			}
			const std::int64_t reset = Micros(d.reset_after);
			EXPECT_EQ(SlidingRoom(b, limit, t + reset), n);
			if (reset > 0) {
				EXPECT_LT(SlidingRoom(b, limit, t + reset - 1), n);
				EXPECT_LE(reset, 2 * w);
			}
			EXPECT_DOUBLE_EQ(d.remaining, SlidingRoom(b, limit, t));
			const double level = NextWholeToken(d.remaining, n);
			const std::int64_t refill = Micros(d.refill_after);
			EXPECT_GE(SlidingRoom(b, limit, t + refill), level);
			if (refill > 0) {
				EXPECT_LT(SlidingRoom(b, limit, t + refill - 1), level);
			}
		}
	}
}

/* Rounds of 400 takes of whole and half units (sums are exact) under
 * limits of 1 to 12 in 10 s, the clock moved before each by `step` (from
 * the instant before and the latest one yet); fails when the grants
 * decided in one aligned window add up to more than N. */
template <typename Step>
void
ExpectNoMoreThanNInOneAlignedWindow(std::uint64_t seed, int rounds, Step step)
{
	std::mt19937_64 rng(seed);
	for (int round = 0; round < rounds; round++) {
		const double n = 1 + static_cast<double>(rng() % 12);
		const Limit limit = Sliding(n, kW);
		Bucket b = FullBucket(limit, kT0);
		std::map<std::int64_t, double> granted; /* by window */
		std::int64_t t = kT0;
		std::int64_t latest = t;
		for (int i = 0; i < 400; i++) {
			t = step(rng, t, latest);
			latest = std::max(latest, t);
			const double cost = static_cast<double>(rng() % 7) / 2.0;
			if (cost > n)
				continue;
			if (TakeAt(b, limit, cost, t).allowed)
				granted[t / kW] += cost;
		}
		for (const auto &[window, sum] : granted)
			ASSERT_LE(sum, n) << "round " << round << " window " << window;
	}
}

TEST(SlidingWindow, NeverMoreThanNInOneAlignedWindow)
{
	ExpectNoMoreThanNInOneAlignedWindow(42, 200,
	                                    [](std::mt19937_64 &rng, std::int64_t t, std::int64_t) {
		                                    return t + static_cast<std::int64_t>(rng() % (kW / 4));
	                                    });
}

/* The same with a clock that steps back now and then, never further than
 * a window behind the latest instant it read (further back, the window it
 * steps into may hold grants the key no longer counts). */
TEST(SlidingWindow, NeverMoreThanNInOneAlignedWindowWhenTheClockStepsBack)
{
	ExpectNoMoreThanNInOneAlignedWindow(
	    7, 300, [](std::mt19937_64 &rng, std::int64_t t, std::int64_t latest) {
		    if (rng() % 8 == 0)
			    t -= static_cast<std::int64_t>(rng() % (kW + 1));
		    else
			    t += static_cast<std::int64_t>(rng() % (kW / 4));
		    return std::max(t, latest - kW);
	    });
}

/* Grants of 1 in [from, to) taken every `step` µs, on `b`. */
int
GrantEvery(Bucket &b, const Limit &limit, std::int64_t from, std::int64_t to, std::int64_t step,
           std::int64_t *first_grant = nullptr)
{
	int grants = 0;
	for (std::int64_t t = from; t < to; t += step)
		if (TakeAt(b, limit, 1, t).allowed) {
			if (grants++ == 0 && first_grant)
				*first_grant = t;
		}
	return grants;
}

TEST(SlidingWindow, UpToTwoNMinusOneInAnArbitrarySpanOfW)
{
	const Limit limit = Sliding(10, kW);
	Bucket b = FullBucket(limit, kT0);
	/* The last microsecond of a window: 10 granted. */
	for (int i = 0; i < 10; i++)
		ASSERT_TRUE(TakeAt(b, limit, 1, kT0 + kW - 1).allowed);
	ASSERT_FALSE(TakeAt(b, limit, 1, kT0 + kW - 1).allowed);
	/* Then one a millisecond through the next window, up to one µs
	 * before W has passed since the first 10. */
	const int next = GrantEvery(b, limit, kT0 + kW, kT0 + 2 * kW - 1, 1000);
	EXPECT_EQ(next, 9);
	EXPECT_EQ(10 + next, 19); /* in [T0 + W - 1 µs, T0 + 2W - 1 µs): 2N - 1 */
}

TEST(SlidingWindow, MayDenyBeforeNWhenThePreviousWindowWasEarly)
{
	const Limit limit = Sliding(10, kW);
	Bucket b = FullBucket(limit, kT0);
	for (int i = 0; i < 10; i++)
		ASSERT_TRUE(TakeAt(b, limit, 1, kT0).allowed);
	/* Halfway through the next window nothing was taken in the last 10 s
	 * (since T0 + 5 s), yet the estimate is 10 * 0.5 = 5: only 5 more. */
	const int later = GrantEvery(b, limit, kT0 + kW + kW / 2, kT0 + kW + kW / 2 + 1, 1);
	EXPECT_EQ(later, 1);
	int more = 0;
	while (TakeAt(b, limit, 1, kT0 + kW + kW / 2).allowed)
		more++;
	EXPECT_EQ(1 + more, 5);
}

} /* namespace */

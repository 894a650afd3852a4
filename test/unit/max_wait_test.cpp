/*
 * test/unit/max_wait_test.cpp
 *
 * Reservation within a time the caller accepts (Request::max_wait) and
 * refill_after.  DebtCap on hand-computed cases; then properties over random
 * limits (continuous, floor rates, fixed windows), balances and clocks
 * (stamps behind and ahead of the clock): a reserved grant's work may start
 * within max_wait; "wait retry_after, then retry" is granted; over any run,
 * granted cost stays within burst + refill + the debt cap; waiting
 * refill_after the whole tokens grow (or the bucket is full), a microsecond
 * sooner they do not, and for fixed windows it is a window boundary.  The
 * same for keys split over shards.
 */
#include "shards.hpp"
#include "test_helpers.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include <gtest/gtest.h>

namespace {

using ratelimit::core::kMaxShards;
using ratelimit::core::PlanShards;
using ratelimit::core::ShardOutcome;
using ratelimit::core::ShardPlan;
using ratelimit::core::ShareOfRequest;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr std::int64_t kSecond = ratelimit::core::kMicrosPerSecond;
constexpr std::int64_t kNow = INT64_C(13333333) * 60 * kSecond;
/* Waits beyond this many µs are not checked to the microsecond. */
constexpr double kCheckableMicros = 1e15;

/* A reservation of `cost` within `max_wait` seconds, at most `max_reserved`
 * tokens of debt (NaN: no token cap). */
Request
Within(double cost, double max_wait, double max_reserved = kNaN)
{
	Request r{cost, true, !std::isnan(max_reserved), std::isnan(max_reserved) ? 0.0 : max_reserved};
	r.max_wait = max_wait;
	return r;
}

std::int64_t
Micros(double seconds)
{
	return std::llround(seconds * kSecond);
}

/* ------------------------------------------------------------ DebtCap */

TEST(DebtCap, MatchesHandComputedCases)
{
	Limit continuous{2, 10};
	Limit floor{0.001, 10};
	floor.floor_rate = 4;
	Limit windows{1, 100};
	windows.window_us = 60 * kSecond;
	struct Case {
		const char *what;
		Limit limit;
		Request request;
		double cap;
	} cases[] = {
	    {"no reservation", continuous, Request::Plain(5), 0},
	    {"no time cap, no token cap", continuous, Within(5, kInf), kInf},
	    {"no time cap, token cap", continuous, Within(5, kInf, 7), 7},
	    {"10 s at 2/s, less 16 us", continuous, Within(5, 10), 2 * (10 - 16e-6)},
	    {"token cap below time cap", continuous, Within(5, 10, 3), 3},
	    {"shorter than the slack", continuous, Within(5, 10e-6), 0},
	    {"floor rate repays below zero", floor, Within(5, 2), 4 * (2 - 16e-6)},
	    {"one minute window, 59 s", windows, Within(5, 59), 0},
	    {"one minute window, 60 s", windows, Within(5, 60), 60},
	    {"one minute window, 150 s", windows, Within(5, 150), 120},
	    {"no refill, no time cap", Limit{0, 10}, Within(5, kInf, 4), 4},
	    {"no refill, a time cap", Limit{0, 10}, Within(5, 30), 0},
	};
	for (const Case &c : cases)
		EXPECT_DOUBLE_EQ(DebtCap(c.limit, c.request), c.cap) << c.what;
}

TEST(DebtCap, ValidateUsesIt)
{
	EXPECT_EQ(Validate(Limit{2, 10}, Within(29.9, 10)), Status::kOk);
	EXPECT_EQ(Validate(Limit{2, 10}, Within(30, 10)), Status::kCostExceedsDebtCap);
	EXPECT_EQ(Validate(Limit{2, 10}, Within(13, 10, 3)), Status::kOk);
	EXPECT_EQ(Validate(Limit{2, 10}, Within(13.5, 10, 3)), Status::kCostExceedsDebtCap);
	EXPECT_EQ(Validate(Limit{2, 10}, Within(1e300, kInf)), Status::kOk);
	EXPECT_EQ(Validate(Limit{2, 10}, Within(1, -1)), Status::kMaxWaitInvalid);
	EXPECT_EQ(Validate(Limit{2, 10}, Within(1, kNaN)), Status::kMaxWaitInvalid);
	Request plain = Request::Plain(1);
	plain.max_wait = -kInf;
	EXPECT_EQ(Validate(Limit{2, 10}, plain), Status::kMaxWaitInvalid);
}

/* 1 token a second, burst 10, empty: 5 tokens within 5 s are granted with
 * a wait of exactly 5 s; within 4.99 s they are denied until a debt of what
 * refills in 4.99 s less 16 us suffices. */
TEST(DebtCap, GrantsWithinMaxWaitDeniesBeyond)
{
	const Limit limit{1, 10};
	const Bucket empty{0, kNow};
	const Decision granted = Decide(empty, limit, Within(4.9, 5), kNow);
	EXPECT_TRUE(granted.allowed);
	EXPECT_EQ(granted.retry_after, 4.9);
	const Decision denied = Decide(empty, limit, Within(5, 4.99), kNow);
	EXPECT_FALSE(denied.allowed);
	EXPECT_EQ(denied.retry_after, 0.010016);
	EXPECT_TRUE(Decide(empty, limit, Within(5, 4.99), kNow + Micros(0.010016)).allowed);
	EXPECT_FALSE(Decide(empty, limit, Within(5, 4.99), kNow + Micros(0.010015)).allowed);
}

/* ------------------------------------------------------------ properties */

double
LogUniform(std::mt19937_64 &rng, double lo, double hi)
{
	std::uniform_real_distribution<double> u(std::log(lo), std::log(hi));
	return std::exp(u(rng));
}

struct Call {
	Limit limit;
	Request request;
	Bucket stored;
	std::int64_t now_us;
};

/* A random limit of any kind, balance, clock and reservation. */
Call
RandomCall(std::mt19937_64 &rng)
{
	std::uniform_real_distribution<double> unit(0.0, 1.0);
	Call c{};
	c.limit.rate = LogUniform(rng, 1e-3, 1e4);
	c.limit.burst = LogUniform(rng, 1e-2, 1e5);
	const double kind = unit(rng);
	if (kind < 0.3) {
		c.limit.window_us = static_cast<std::int64_t>(LogUniform(rng, 1, 1e9));
		c.limit.phase_us =
		    static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(c.limit.window_us));
	} else if (kind < 0.5) {
		c.limit.floor_rate = LogUniform(rng, 1e-3, 1e4);
	}
	const double max_wait = unit(rng) < 0.05 ? kInf : LogUniform(rng, 1e-6, 1e5);
	const double max_reserved = unit(rng) < 0.5 ? kNaN : unit(rng) * 2 * c.limit.burst;
	c.request = Within(0, max_wait, max_reserved);
	const double cap = DebtCap(c.limit, c.request);
	c.request.cost =
	    unit(rng) * (c.limit.burst + (cap < 10 * c.limit.burst ? cap : 10 * c.limit.burst));
	c.stored.tokens = (2 * unit(rng) - 1) * c.limit.burst;
	c.now_us = kNow + static_cast<std::int64_t>(rng() % (1000 * kSecond));
	const double clock = unit(rng);
	if (clock < 0.1) /* the clock stepped back */
		c.stored.stamp_us = c.now_us + static_cast<std::int64_t>(rng() % (10 * kSecond)) + 1;
	else
		c.stored.stamp_us = c.now_us - static_cast<std::int64_t>(rng() % (100 * kSecond));
	return c;
}

constexpr int kSweepCalls = 40000;

TEST(MaxWaitProperty, ReservedWorkStartsWithinMaxWait)
{
	std::mt19937_64 rng(31);
	int reserved = 0;
	for (int i = 0; i < kSweepCalls; i++) {
		const Call c = RandomCall(rng);
		ASSERT_EQ(Validate(c.limit, c.request), Status::kOk);
		const Decision d = Decide(c.stored, c.limit, c.request, c.now_us);
		ASSERT_EQ(d.allowed, Admitted(c.stored, c.limit, c.request, c.now_us));
		if (!d.allowed || !(d.remaining < 0.0))
			continue;
		reserved++;
		ASSERT_LE(d.retry_after, c.request.max_wait)
		    << "rate=" << c.limit.rate << " window_us=" << c.limit.window_us
		    << " floor=" << c.limit.floor_rate << " remaining=" << d.remaining;
		if (d.retry_after * kSecond < kCheckableMicros) {
			ASSERT_GE(Refill(d.next, c.limit, c.now_us + Micros(d.retry_after)).tokens, 0.0);
		}
	}
	EXPECT_GT(reserved, kSweepCalls / 10);
}

TEST(MaxWaitProperty, DenialRetriedAfterRetryAfterIsGranted)
{
	std::mt19937_64 rng(37);
	int denied = 0;
	for (int i = 0; i < kSweepCalls; i++) {
		const Call c = RandomCall(rng);
		const Decision d = Decide(c.stored, c.limit, c.request, c.now_us);
		if (d.allowed || !(d.retry_after * kSecond < kCheckableMicros))
			continue;
		denied++;
		const std::int64_t wait = Micros(d.retry_after);
		ASSERT_TRUE(Decide(c.stored, c.limit, c.request, c.now_us + wait).allowed)
		    << "retry_after=" << d.retry_after;
		if (c.stored.stamp_us <= c.now_us) { /* exact unless the clock stepped back */
			ASSERT_FALSE(Decide(c.stored, c.limit, c.request, c.now_us + wait - 1).allowed)
			    << "retry_after=" << d.retry_after;
		}
	}
	EXPECT_GT(denied, kSweepCalls / 20);
}

/* Calls every few ms reserving within max_wait: what is granted by any
 * instant t never exceeds burst + refill until t + the debt cap. */
TEST(MaxWaitProperty, AdmissionBoundHoldsWithReservation)
{
	std::mt19937_64 rng(41);
	for (int run = 0; run < 40; run++) {
		Limit limit{LogUniform(rng, 0.1, 1000), LogUniform(rng, 1, 1000)};
		if (run % 3 == 1) {
			limit.window_us = static_cast<std::int64_t>(LogUniform(rng, 1e3, 1e7));
			limit.phase_us =
			    static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(limit.window_us));
		}
		const Request request = Within(limit.burst / 3, LogUniform(rng, 0.01, 10));
		const double cap = DebtCap(limit, request);
		Bucket b = FullBucket(limit, kNow);
		double granted = 0;
		std::int64_t now = kNow;
		for (int i = 0; i < 20000; i++) {
			now += static_cast<std::int64_t>(rng() % 5000);
			const Decision d = Decide(b, limit, request, now);
			if (d.allowed) {
				granted += request.cost;
				b = d.next;
				ASSERT_LE(d.retry_after, request.max_wait);
			}
			const double seconds = static_cast<double>(now - kNow) / kSecond;
			double refill = limit.rate * seconds;
			if (limit.window_us > 0) /* whole windows begun since kNow */
				refill =
				    limit.rate * (static_cast<double>(limit.window_us) / kSecond) *
				    std::ceil(
				        static_cast<double>(now - kNow) / static_cast<double>(limit.window_us) + 1);
			ASSERT_LE(granted, limit.burst + refill + cap + 1e-6 * granted) << "run " << run;
		}
	}
}

TEST(RefillAfterProperty, WholeTokensGrowExactlyThen)
{
	std::mt19937_64 rng(43);
	int checked = 0;
	for (int i = 0; i < kSweepCalls; i++) {
		const Call c = RandomCall(rng);
		const Decision d =
		    Decide(c.stored, c.limit, i % 2 ? c.request : Request::Plain(0), c.now_us);
		const Bucket &after = d.allowed || d.write ? d.next : c.stored;
		if (d.remaining >= c.limit.burst) {
			ASSERT_EQ(d.refill_after, 0.0);
			continue;
		}
		ASSERT_GT(d.refill_after, 0.0);
		if (!(d.refill_after * kSecond < kCheckableMicros) || c.stored.stamp_us > c.now_us)
			continue;
		checked++;
		const std::int64_t wait = Micros(d.refill_after);
		ASSERT_EQ(static_cast<double>(wait) / kSecond, d.refill_after) << "whole microseconds";
		const double whole = std::floor(std::max(d.remaining, 0.0));
		const double then = Refill(after, c.limit, c.now_us + wait).tokens;
		ASSERT_TRUE(std::floor(std::max(then, 0.0)) > whole || then >= c.limit.burst)
		    << "remaining=" << d.remaining << " then=" << then;
		const double sooner = Refill(after, c.limit, c.now_us + wait - 1).tokens;
		ASSERT_FALSE(std::floor(std::max(sooner, 0.0)) > whole || sooner >= c.limit.burst)
		    << "remaining=" << d.remaining << " sooner=" << sooner;
		if (c.limit.window_us > 0) {
			ASSERT_EQ((c.now_us + wait - c.limit.phase_us) % c.limit.window_us, 0) << "a boundary";
		}
	}
	EXPECT_GT(checked, kSweepCalls / 4);
}

TEST(RefillAfter, MatchesHandComputedCases)
{
	const Limit limit{2, 10};
	EXPECT_EQ(Decide(Bucket{10, kNow}, limit, Request::Plain(0), kNow).refill_after, 0.0);
	EXPECT_EQ(Decide(Bucket{3.5, kNow}, limit, Request::Plain(0), kNow).refill_after, 0.25);
	EXPECT_EQ(Decide(Bucket{-3, kNow}, limit, Request::Plain(0), kNow).refill_after, 2.0);
	EXPECT_EQ(Decide(Bucket{9.5, kNow}, limit, Request::Plain(0), kNow).refill_after, 0.25);
	EXPECT_EQ(Decide(Bucket{0, kNow}, Limit{0, 10}, Request::Plain(0), kNow).refill_after, kInf);
	/* A fixed window of a minute adding 5 at a time: the next boundary even
	 * when the bucket fills in several. */
	Limit windows{5.0 / 60, 20};
	windows.window_us = 60 * kSecond;
	EXPECT_EQ(
	    Decide(Bucket{2, kNow + 15 * kSecond}, windows, Request::Plain(0), kNow + 15 * kSecond)
	        .refill_after,
	    45.0);
	/* Refund reports it too. */
	EXPECT_EQ(Refund(Bucket{0, kNow}, limit, 1.5, kNow).refill_after, 0.25);
	EXPECT_EQ(NextWholeToken(2.5, 10), 3.0);
	EXPECT_EQ(NextWholeToken(-2.5, 10), 1.0);
	EXPECT_EQ(NextWholeToken(9.5, 9.7), 9.7);
}

/* ------------------------------------------------------------ shards */

TEST(ShardReservation, ReservesOnTheRichestWithinItsShare)
{
	/* 2 shards of 1/s, burst 5 each: 3 and 1 tokens.  A cost of 6 is not
	 * served from tokens (4 together); reserved on the richest (3), its debt
	 * 3 is repaid in 3 s. */
	const Limit shard{1, 5};
	const Bucket seen[2] = {{1, kNow}, {3, kNow}};
	const Request whole = Within(6, 5, 8);
	const Request share = ShareOfRequest(whole, 2);
	EXPECT_EQ(share.max_reserved, 4);
	const ShardPlan plan = PlanShards(seen, 2, shard, share, kNow);
	EXPECT_EQ(plan.kind, ShardPlan::kReserve);
	EXPECT_EQ(plan.richest, 1);
	EXPECT_EQ(plan.cost[1], 6);
	EXPECT_EQ(plan.after[1].tokens, -3);
	EXPECT_EQ(plan.wait, 3.0);
	/* Within 2 s: denied; retried after retry_after it is granted, a
	 * microsecond sooner not. */
	const Request hurried = ShareOfRequest(Within(6, 2, 8), 2);
	EXPECT_EQ(PlanShards(seen, 2, shard, hurried, kNow).kind, ShardPlan::kDeny);
	const Decision d = ShardOutcome(false, seen, 2, shard, hurried, kNow);
	const std::int64_t wait = Micros(d.retry_after);
	EXPECT_NE(PlanShards(seen, 2, shard, hurried, kNow + wait).kind, ShardPlan::kDeny);
	EXPECT_EQ(PlanShards(seen, 2, shard, hurried, kNow + wait - 1).kind, ShardPlan::kDeny);
}

/* A random key of 2 to 7 shards, with fixed windows when `windows`; its
 * shards' states into states[0 .. count - 1]; returns count. */
int
RandomShards(std::mt19937_64 &rng, bool windows, Limit *shard, Bucket *states)
{
	const int count = 2 + static_cast<int>(rng() % 6);
	*shard = Limit{static_cast<double>(rng() % 1000 + 1) / 1000.0,
	               static_cast<double>(rng() % 1000 + 1) / 100.0};
	if (windows) {
		shard->window_us = static_cast<std::int64_t>(rng() % (10 * kSecond) + 1);
		shard->phase_us =
		    static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(shard->window_us));
	}
	for (int s = 0; s < count; s++)
		states[s] = Bucket{std::fmod(static_cast<double>(rng() % 100000) / 1000.0, shard->burst),
		                   kNow - static_cast<std::int64_t>(rng() % (5 * kSecond))};
	return count;
}

TEST(ShardReservationProperty, RetryAfterIsExactAndWaitsWithinMaxWait)
{
	std::mt19937_64 rng(47);
	int denied = 0;
	int reserved = 0;
	for (int i = 0; i < 3000; i++) {
		Limit shard;
		Bucket seen[kMaxShards];
		const int count = RandomShards(rng, i % 3 == 0, &shard, seen);
		const Request request = Within(static_cast<double>(rng() % 3000) / 100.0,
		                               static_cast<double>(rng() % 20000) / 1000.0,
		                               static_cast<double>(rng() % 2000) / 100.0);
		const ShardPlan plan = PlanShards(seen, count, shard, request, kNow);
		if (plan.kind == ShardPlan::kReserve) {
			reserved++;
			ASSERT_LE(plan.wait, request.max_wait);
			continue;
		}
		if (plan.kind != ShardPlan::kDeny)
			continue;
		const Decision d = ShardOutcome(false, seen, count, shard, request, kNow);
		if (!std::isfinite(d.retry_after))
			continue;
		denied++;
		const std::int64_t wait = Micros(d.retry_after);
		ASSERT_NE(PlanShards(seen, count, shard, request, kNow + wait).kind, ShardPlan::kDeny);
		ASSERT_EQ(PlanShards(seen, count, shard, request, kNow + wait - 1).kind, ShardPlan::kDeny);
	}
	EXPECT_GT(denied, 100);
	EXPECT_GT(reserved, 50);
}

TEST(ShardRefillAfterProperty, TheShardsTogetherGainAWholeToken)
{
	std::mt19937_64 rng(53);
	int checked = 0;
	for (int i = 0; i < 2000; i++) {
		Limit shard;
		Bucket after[kMaxShards];
		const int count = RandomShards(rng, i % 2 == 0, &shard, after);
		const Decision d = ShardOutcome(true, after, count, shard, Request::Plain(0), kNow);
		auto held = [&](std::int64_t at) {
			double sum = 0;
			for (int s = 0; s < count; s++)
				sum += Refill(after[s], shard, at).tokens;
			return sum;
		};
		double full = 0;
		for (int s = 0; s < count; s++)
			full += shard.burst;
		const double target = NextWholeToken(d.remaining, full);
		if (d.remaining >= target) {
			ASSERT_EQ(d.refill_after, 0.0);
			continue;
		}
		ASSERT_TRUE(std::isfinite(d.refill_after));
		checked++;
		const std::int64_t wait = Micros(d.refill_after);
		ASSERT_GE(held(kNow + wait), target);
		ASSERT_LT(held(kNow + wait - 1), target);
	}
	EXPECT_GT(checked, 1000);
}

} /* namespace */

/* Request::Within: 0 (or less) reserves nothing; a positive max_wait
 * reserves within it; +inf reserves without a time cap.  No token cap. */
TEST(MaxWait, WithinSetsReservationFromMaxWait)
{
	const Request none = Request::Within(3.0, 0.0);
	EXPECT_FALSE(none.reserve);
	EXPECT_EQ(none.cost, 3.0);
	EXPECT_EQ(DebtCap(Limit{1.0, 5.0}, none), 0.0);

	const Request timed = Request::Within(3.0, 2.5);
	EXPECT_TRUE(timed.reserve);
	EXPECT_FALSE(timed.debt_capped);
	EXPECT_EQ(timed.max_wait, 2.5);

	const Request untimed = Request::Within(3.0, kInf);
	EXPECT_TRUE(untimed.reserve);
	EXPECT_EQ(DebtCap(Limit{1.0, 5.0}, untimed), kInf);
}

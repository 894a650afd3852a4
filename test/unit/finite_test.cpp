/*
 * test/unit/finite_test.cpp
 *
 * Numbers at the edge of float8: no call may leave a non-finite balance (a
 * reservation whose debt would overflow is denied), a positive rate never
 * reports an infinite wait, and a refund says how much it really added.
 */
#include "test_helpers.hpp"

#include <cmath>
#include <cstdint>
#include <limits>

#include <gtest/gtest.h>

namespace {

constexpr std::int64_t kNow = INT64_C(800000000000000);
constexpr double kHuge = 1e308;

Request
Reserve(double cost)
{
	return Request{cost, true, false, 0.0};
}

TEST(Finite, ReservationThatWouldOverflowIsDenied)
{
	const Limit limit{1, 1};
	Decision first = Decide(Bucket{1, kNow}, limit, Reserve(kHuge), kNow);
	ASSERT_TRUE(first.allowed);
	ASSERT_TRUE(std::isfinite(first.next.tokens));
	/* A second huge reservation would take the balance to -Infinity. */
	Decision second = Decide(first.next, limit, Reserve(kHuge), kNow);
	EXPECT_FALSE(second.allowed);
	EXPECT_FALSE(second.write);
	EXPECT_EQ(second.next.tokens, first.next.tokens);
}

TEST(Finite, NoGrantEverStoresANonFiniteBalance)
{
	const Limit limit{1, kHuge};
	const double costs[] = {kHuge, std::numeric_limits<double>::max(), 1.0, 0.0};
	Bucket bucket{kHuge, kNow};
	for (int round = 0; round < 8; round++)
		for (double cost : costs) {
			Decision d = Decide(bucket, limit, Reserve(cost), kNow);
			ASSERT_TRUE(std::isfinite(d.next.tokens)) << "cost " << cost << " round " << round;
			ASSERT_TRUE(std::isfinite(d.remaining));
			if (d.write)
				bucket = d.next;
		}
}

TEST(Finite, PositiveRateWaitsAreFinite)
{
	/* A rate so slow that refilling the burst takes more seconds than
	 * float8 microseconds can count: the wait is long, not "never". */
	const Limit slow{1e-300, 1e300};
	Decision d = Decide(Bucket{1e300, kNow}, slow, Request{1e300, false, false, 0.0}, kNow);
	ASSERT_TRUE(d.allowed);
	EXPECT_TRUE(std::isfinite(d.reset_after));
	EXPECT_GT(d.reset_after, 1e300);
	Decision denied = Decide(d.next, slow, Request{1.0, false, false, 0.0}, kNow);
	ASSERT_FALSE(denied.allowed);
	EXPECT_TRUE(std::isfinite(denied.retry_after));
	EXPECT_GT(denied.retry_after, 0.0);

	/* Deep reserved debt at a positive rate: finite too. */
	Decision debt = Decide(Bucket{-kHuge, kNow}, Limit{1, 1}, Reserve(1.0), kNow);
	ASSERT_TRUE(debt.allowed);
	EXPECT_TRUE(std::isfinite(debt.retry_after));
	EXPECT_TRUE(std::isfinite(debt.reset_after));

	/* Fixed windows that add a sliver per window. */
	Limit windows{1e-300, 1e300};
	windows.window_us = 1000000;
	Decision w = Decide(Bucket{0, kNow}, windows, Request{1e300, false, false, 0.0}, kNow);
	ASSERT_FALSE(w.allowed);
	EXPECT_TRUE(std::isfinite(w.retry_after));
	EXPECT_TRUE(std::isfinite(w.reset_after));
}

TEST(Finite, ZeroRateStillNeverRefills)
{
	Decision d = Decide(Bucket{0, kNow}, Limit{0, 5}, Request{1.0, false, false, 0.0}, kNow);
	EXPECT_FALSE(d.allowed);
	EXPECT_TRUE(std::isinf(d.retry_after));
	EXPECT_TRUE(std::isinf(d.reset_after));
}

TEST(Finite, RefundReportsWhatItAdded)
{
	const Limit limit{0, 10};
	Decision fits = Refund(Bucket{2, kNow}, limit, 3, kNow);
	EXPECT_EQ(fits.refunded, 3.0);
	Decision capped = Refund(Bucket{8, kNow}, limit, 5, kNow);
	EXPECT_EQ(capped.remaining, 10.0);
	EXPECT_EQ(capped.refunded, 2.0);
	Decision full = Refund(Bucket{10, kNow}, limit, 5, kNow);
	EXPECT_EQ(full.refunded, 0.0);
}

} /* namespace */

namespace {

/* Fixed windows as long as int64 microseconds allow (a policy's `per` may
 * be up to about 292,271 years): boundaries far from now, timestamps far
 * from the phase, and no overflow on the way. */
TEST(Finite, WindowsAsLongAsInt64Allows)
{
	const std::int64_t window = INT64_C(9223000000000000000);
	Limit limit{1e6 / static_cast<double>(window), 5}; /* one token per window */
	limit.window_us = window;
	limit.phase_us = window - INT64_C(1000000); /* now - phase leaves int64 */
	/* 1970-01-01 00:16:40 UTC, in microseconds since 2000-01-01. */
	const std::int64_t now = INT64_C(-946684800000000) + INT64_C(1000000000);

	/* Boundaries lie at phase + k * window: the next one after now is
	 * phase - window, one second before 2000-01-01. */
	const std::int64_t boundary = limit.phase_us - window;
	ASSERT_EQ(boundary, INT64_C(-1000000));
	Decision d = Decide(Bucket{0, now}, limit, Request{1.0, false, false, 0.0}, now);
	ASSERT_FALSE(d.allowed);
	EXPECT_EQ(d.retry_after, static_cast<double>(boundary - now) / 1e6);
	EXPECT_GT(d.reset_after, 4 * 9.2e12); /* five windows: about 1.46 million years */

	/* Crossing that boundary adds the window's token; the next boundary,
	 * about 292,000 years later, still fits in int64. */
	using ratelimit::core::Refill;
	EXPECT_NEAR(Refill(Bucket{0, now}, limit, boundary - 1).tokens, 0.0, 1e-9);
	EXPECT_NEAR(Refill(Bucket{0, now}, limit, boundary).tokens, 1.0, 1e-9);
	EXPECT_NEAR(Refill(Bucket{0, now}, limit, boundary + window - 1).tokens, 1.0, 1e-9);
	EXPECT_NEAR(Refill(Bucket{0, now}, limit, INT64_MAX).tokens, 2.0, 1e-9);
}

} /* namespace */

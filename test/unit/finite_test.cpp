/*
 * test/unit/finite_test.cpp
 *
 * Numbers at the edge of float8: no call may leave a non-finite balance (a
 * reservation whose debt would overflow is denied), a positive rate never
 * reports an infinite wait, and a refund says how much it really added.
 */
#include "token_bucket.hpp"

#include <cmath>
#include <cstdint>
#include <limits>

#include <gtest/gtest.h>

namespace {

using ratelimit::core::Bucket;
using ratelimit::core::Decide;
using ratelimit::core::Decision;
using ratelimit::core::Limit;
using ratelimit::core::Refund;
using ratelimit::core::Request;

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

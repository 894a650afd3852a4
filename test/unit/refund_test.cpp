/*
 * test/unit/refund_test.cpp
 *
 * Refund(): tokens given back after refill, capped at burst, exactly; a
 * refund of what a take took restores the bucket; validation of the amount.
 */
#include "test_helpers.hpp"

#include <cmath>
#include <cstdint>
#include <limits>

#include <gtest/gtest.h>

namespace {

constexpr std::int64_t kNow = INT64_C(800000000000000);
constexpr std::int64_t kSecond = 1000000;

TEST(Refund, AddsAfterRefillAndCapsAtBurst)
{
	const Limit limit{2, 10};
	Decision d = Refund(Bucket{3, kNow - kSecond}, limit, 4, kNow);
	EXPECT_TRUE(d.allowed);
	EXPECT_TRUE(d.write);
	EXPECT_EQ(d.remaining, 9.0); /* 3 + 2 refilled + 4 */
	EXPECT_EQ(d.next.tokens, 9.0);
	EXPECT_EQ(d.next.stamp_us, kNow);
	EXPECT_EQ(d.retry_after, 0.0);
	EXPECT_EQ(d.reset_after, 0.5);

	Decision capped = Refund(Bucket{8, kNow}, limit, 100, kNow);
	EXPECT_EQ(capped.remaining, 10.0);
	EXPECT_EQ(capped.reset_after, 0.0);
}

TEST(Refund, RestoresWhatATookExactly)
{
	const Limit limit{0.37, 7};
	const Request take{2.25, false, false, 0};
	Bucket b{4.5, kNow};
	Decision taken = Decide(b, limit, take, kNow);
	ASSERT_TRUE(taken.allowed);
	Decision back = Refund(taken.next, limit, 2.25, kNow);
	EXPECT_EQ(back.remaining, 4.5);
}

TEST(Refund, PaysDownReservedDebt)
{
	const Limit limit{1, 5};
	Decision d = Refund(Bucket{-6, kNow}, limit, 2, kNow);
	EXPECT_EQ(d.remaining, -4.0);
	EXPECT_EQ(d.retry_after, 4.0); /* reserved work may start 2 s earlier */
	EXPECT_EQ(d.reset_after, 9.0);
}

TEST(Refund, NothingToWriteWhenFullOrZero)
{
	const Limit limit{1, 5};
	EXPECT_FALSE(Refund(Bucket{5, kNow}, limit, 3, kNow).write);
	EXPECT_FALSE(Refund(Bucket{2, kNow}, limit, 0, kNow).write);
	/* zero amount after time passed: refill is lazy, no write needed either,
	 * but storing the refilled state is harmless and exact */
	EXPECT_EQ(Refund(Bucket{2, kNow - kSecond}, limit, 0, kNow).remaining, 3.0);
}

TEST(Refund, ClockBackwardsKeepsTheStamp)
{
	const Limit limit{1, 10};
	Decision d = Refund(Bucket{0, kNow}, limit, 1, kNow - 5 * kSecond);
	EXPECT_EQ(d.remaining, 1.0);
	EXPECT_EQ(d.next.stamp_us, kNow);
	EXPECT_EQ(d.reset_after, 14.0); /* 5 s lag + 9 s refill */
}

TEST(Refund, ValidatesTheAmount)
{
	EXPECT_EQ(ValidateRefund(0), Status::kOk);
	EXPECT_EQ(ValidateRefund(1e300), Status::kOk);
	EXPECT_EQ(ValidateRefund(-1), Status::kCostInvalid);
	EXPECT_EQ(ValidateRefund(std::numeric_limits<double>::quiet_NaN()), Status::kCostInvalid);
	EXPECT_EQ(ValidateRefund(std::numeric_limits<double>::infinity()), Status::kCostInvalid);
}

} /* namespace */

/*
 * test/unit/operation_test.cpp
 *
 * Apply: each kind of call as the algebra answers it.  A take, check or
 * peek is Decide; a refund is Refund; recording a new key looks without
 * taking; a penalty decides again and stores only a denial that starts a
 * box, never a grant.
 */
#include "test_helpers.hpp"

#include <cstdint>

#include <gtest/gtest.h>

#include "operation.hpp"

namespace {

using ratelimit::core::Apply;
using ratelimit::core::Operation;

constexpr std::int64_t kNow = INT64_C(800000000000000);
constexpr std::int64_t kSecond = 1000000;

Limit
Boxed()
{
	Limit limit{1, 10};
	limit.penalty_us = 5 * kSecond;
	return limit;
}

void
ExpectSame(const Decision &a, const Decision &b)
{
	EXPECT_EQ(a.allowed, b.allowed);
	EXPECT_EQ(a.write, b.write);
	EXPECT_EQ(a.remaining, b.remaining);
	EXPECT_EQ(a.retry_after, b.retry_after);
	EXPECT_EQ(a.reset_after, b.reset_after);
	EXPECT_EQ(a.refunded, b.refunded);
	EXPECT_EQ(a.next.tokens, b.next.tokens);
	EXPECT_EQ(a.next.stamp_us, b.next.stamp_us);
	EXPECT_EQ(a.next.blocked_until_us, b.next.blocked_until_us);
}

TEST(Apply, TakesChecksAndPeeksDecide)
{
	const Bucket stored{3, kNow - 2 * kSecond};
	const Request request = Request::Plain(4);
	for (Operation::Kind kind : {Operation::kTake, Operation::kCheck, Operation::kPeek})
		ExpectSame(Apply(Operation{kind, request, 0.0}, stored, Boxed(), kNow),
		           Decide(stored, Boxed(), request, kNow));
}

TEST(Apply, RefundsRefund)
{
	const Bucket stored{3, kNow - 2 * kSecond};
	const Decision d =
	    Apply(Operation{Operation::kRefund, Request::Plain(0), 7}, stored, Boxed(), kNow);
	ExpectSame(d, Refund(stored, Boxed(), 7, kNow));
	EXPECT_EQ(d.refunded, 5.0); /* capped at the burst */
}

TEST(Apply, RecordingANewKeyOnlyLooks)
{
	const Bucket stored{3, kNow};
	const Decision d =
	    Apply(Operation{Operation::kRecordNew, Request::Plain(9), 0.0}, stored, Boxed(), kNow);
	EXPECT_TRUE(d.allowed);
	EXPECT_FALSE(d.write);
	EXPECT_EQ(d.remaining, 3.0);
}

TEST(Apply, APenaltyNeverGrants)
{
	/* A take the bucket could serve: denied, and nothing to store. */
	const Operation penalize{Operation::kPenalize, Request::Plain(2), 0.0};
	const Decision served = Apply(penalize, Bucket{3, kNow}, Boxed(), kNow);
	EXPECT_FALSE(served.allowed);
	EXPECT_FALSE(served.write);
	EXPECT_EQ(served.next.blocked_until_us, kNotBlocked);

	/* One it could not: the box starts, to be stored. */
	const Operation big{Operation::kPenalize, Request::Plain(5), 0.0};
	const Decision denied = Apply(big, Bucket{3, kNow}, Boxed(), kNow);
	EXPECT_FALSE(denied.allowed);
	EXPECT_TRUE(denied.write);
	EXPECT_EQ(denied.next.blocked_until_us, kNow + 5 * kSecond);
}

} /* namespace */

/*
 * test/unit/penalty_test.cpp
 *
 * The penalty box: a denied take starts it (and must be stored), every take
 * inside it is denied whatever the balance, with retry_after no earlier
 * than its end, refill goes on meanwhile, refunds leave it, and it never
 * admits more than the limit without it would: at most burst + rate * t,
 * and nothing inside a box.
 */
#include "test_helpers.hpp"

#include <cstdint>
#include <random>

#include <gtest/gtest.h>

namespace {

constexpr std::int64_t kNow = INT64_C(800000000000000);
constexpr std::int64_t kSecond = 1000000;

Limit
Boxed(double rate, double burst, std::int64_t penalty_us)
{
	Limit limit{rate, burst};
	limit.penalty_us = penalty_us;
	return limit;
}

TEST(Penalty, ADeniedTakeStartsTheBox)
{
	const Limit limit = Boxed(1, 2, 10 * kSecond);
	Decision denied = Decide(Bucket{0.5, kNow}, limit, Request::Plain(1), kNow);
	EXPECT_FALSE(denied.allowed);
	EXPECT_TRUE(denied.write);
	EXPECT_EQ(denied.next.blocked_until_us, kNow + 10 * kSecond);
	EXPECT_EQ(denied.next.tokens, 0.5);
	EXPECT_EQ(denied.retry_after, 10.0);

	/* Without a penalty a denial writes nothing. */
	Decision plain = Decide(Bucket{0.5, kNow}, Limit{1, 2}, Request::Plain(1), kNow);
	EXPECT_FALSE(plain.write);
	EXPECT_EQ(plain.next.blocked_until_us, kNotBlocked);
	EXPECT_EQ(plain.retry_after, 0.5);

	/* A look (cost 0) starts nothing. */
	Decision look = Decide(Bucket{-1, kNow}, Boxed(1, 2, 10 * kSecond), Request::Plain(0), kNow);
	EXPECT_FALSE(look.write);
}

TEST(Penalty, InsideTheBoxEveryTakeIsDenied)
{
	const Limit limit = Boxed(1, 2, 10 * kSecond);
	const Bucket boxed = Decide(Bucket{0.5, kNow}, limit, Request::Plain(1), kNow).next;

	/* Three seconds on the bucket is full again, and still denies. */
	Decision d = Decide(boxed, limit, Request::Plain(1), kNow + 3 * kSecond);
	EXPECT_FALSE(d.allowed);
	EXPECT_FALSE(d.write); /* the box is not extended */
	EXPECT_EQ(d.remaining, 2.0);
	EXPECT_EQ(d.retry_after, 7.0);
	EXPECT_EQ(d.next.blocked_until_us, kNow + 10 * kSecond);
	/* Reserving does not get around it. */
	EXPECT_FALSE(Decide(boxed, limit, Request::Within(1, 100), kNow + 3 * kSecond).allowed);
	/* A look answers. */
	EXPECT_TRUE(Decide(boxed, limit, Request::Plain(0), kNow + 3 * kSecond).allowed);

	/* At its end takes are granted again, from what refilled meanwhile. */
	Decision after = Decide(boxed, limit, Request::Plain(2), kNow + 10 * kSecond);
	EXPECT_TRUE(after.allowed);
	EXPECT_EQ(after.remaining, 0.0);
}

TEST(Penalty, WaitIsTheLaterOfTheBoxAndTheTokens)
{
	const Limit limit = Boxed(0.1, 5, 2 * kSecond);
	Decision d = Decide(Bucket{0, kNow}, limit, Request::Plain(1), kNow);
	EXPECT_FALSE(d.allowed);
	EXPECT_EQ(d.retry_after, 10.0); /* a token takes 10 s, longer than the box */
	EXPECT_TRUE(Decide(d.next, limit, Request::Plain(1), kNow + 10 * kSecond).allowed);
	EXPECT_FALSE(Decide(d.next, limit, Request::Plain(1), kNow + 10 * kSecond - 1).allowed);
}

TEST(Penalty, RefundLeavesTheBox)
{
	const Limit limit = Boxed(1, 4, 5 * kSecond);
	const Bucket boxed = Decide(Bucket{0, kNow}, limit, Request::Plain(1), kNow).next;
	EXPECT_EQ(boxed.blocked_until_us, kNow + 5 * kSecond);
	Decision refunded = Refund(boxed, limit, 1, kNow + kSecond);
	EXPECT_EQ(refunded.next.blocked_until_us, kNow + 5 * kSecond);
	EXPECT_FALSE(Decide(refunded.next, limit, Request::Plain(1), kNow + kSecond).allowed);
}

TEST(Penalty, ABoxedBucketIsNotForgettable)
{
	const Limit limit = Boxed(1, 2, 10 * kSecond);
	Decision denied = Decide(Bucket{1.5, kNow}, limit, Request::Plain(2), kNow);
	EXPECT_FALSE(IsFull(denied.next, limit, kNow + 5 * kSecond)); /* full, but boxed */
	EXPECT_TRUE(IsFull(denied.next, limit, kNow + 10 * kSecond));
	EXPECT_EQ(FullAtMicros(denied, kNow), kNow + 10 * kSecond);
}

/* Random takes against random limits with a penalty: never more than burst
 * + rate * t granted, nothing granted inside a box. */
TEST(Penalty, AdmissionBound)
{
	std::mt19937_64 random(20261122);
	for (int round = 0; round < 2000; round++) {
		std::uniform_real_distribution<double> rate(0.1, 20), burst(1, 20);
		const Limit limit =
		    Boxed(rate(random), burst(random),
		          std::uniform_int_distribution<std::int64_t>(1, 5 * kSecond)(random));
		Bucket bucket = FullBucket(limit, kNow);
		std::int64_t now = kNow;
		double granted = 0;
		for (int call = 0; call < 200; call++) {
			now += std::uniform_int_distribution<std::int64_t>(0, kSecond / 2)(random);
			const double cost = std::uniform_real_distribution<double>(0.1, limit.burst)(random);
			const bool inside = now < bucket.blocked_until_us;
			Decision d = Decide(bucket, limit, Request::Plain(cost), now);
			if (d.allowed) {
				ASSERT_FALSE(inside) << "round " << round << ": granted inside a penalty box";
				granted += cost;
			}
			if (d.write)
				bucket = d.next;
			const double bound = limit.burst + limit.rate * static_cast<double>(now - kNow) / 1e6;
			ASSERT_LE(granted, bound * (1 + 1e-12)) << "round " << round;
		}
	}
}

} /* namespace */

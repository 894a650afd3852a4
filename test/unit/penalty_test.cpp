/*
 * test/unit/penalty_test.cpp
 *
 * The penalty box: a denied take starts it (and must be stored), every take
 * inside it is denied whatever the balance, with retry_after the later of
 * its end and when the bucket could serve the call (exactly: not a
 * microsecond later), refill goes on meanwhile, refunds leave it, and it
 * never admits more than the limit without it would: at most
 * burst + rate * t, and nothing inside a box.
 */
#include "test_helpers.hpp"

#include <cmath>
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

/* A box on a fixed window: when the window already holds the tokens, the
 * wait is the rest of the box, not a window (100 an hour, a minute's box). */
TEST(Penalty, FixedWindowHoldingTheTokensWaitsForTheBoxOnly)
{
	constexpr std::int64_t kHour = 3600 * kSecond;
	Limit limit = Boxed(100.0 / 3600.0, 100, 60 * kSecond);
	limit.window_us = kHour;
	limit.phase_us = 0;
	const std::int64_t start = (kNow / kHour) * kHour + 10 * kSecond; /* 10 s into a window */
	const Bucket boxed = Decide(Bucket{5, start}, limit, Request::Plain(6), start).next;
	ASSERT_EQ(boxed.blocked_until_us, start + 60 * kSecond);

	Decision d = Decide(boxed, limit, Request::Plain(1), start + kSecond);
	EXPECT_FALSE(d.allowed);
	EXPECT_EQ(d.remaining, 5.0);
	EXPECT_EQ(d.retry_after, 59.0);
	EXPECT_TRUE(Decide(boxed, limit, Request::Plain(1), start + 60 * kSecond).allowed);
	EXPECT_FALSE(Decide(boxed, limit, Request::Plain(1), start + 60 * kSecond - 1).allowed);

	/* The same with reservation: the box ends first. */
	Request reserve = Request::Within(8, 2 * 3600.0);
	reserve.debt_capped = true;
	reserve.max_reserved = 100;
	Decision r = Decide(boxed, limit, reserve, start + kSecond);
	EXPECT_FALSE(r.allowed);
	EXPECT_EQ(r.retry_after, 59.0);
	EXPECT_TRUE(Decide(boxed, limit, reserve, start + 60 * kSecond).allowed);

	/* When the tokens come after the box, the boundary that brings them. */
	Decision later = Decide(boxed, limit, Request::Plain(6), start + kSecond);
	EXPECT_FALSE(later.allowed);
	EXPECT_EQ(later.retry_after, 3600.0 - 11.0);
}

/* Every denial's retry_after is exact: the same call is granted after that
 * many microseconds and denied one microsecond earlier, with or without a
 * box, fixed windows or continuous refill, plain or reserving. */
TEST(Penalty, RetryAfterIsExactWithABox)
{
	std::mt19937_64 random(20261201);
	for (int round = 0; round < 4000; round++) {
		std::uniform_real_distribution<double> rate(0.1, 20), burst(1, 20);
		Limit limit = Boxed(rate(random), burst(random),
		                    std::uniform_int_distribution<std::int64_t>(0, 30 * kSecond)(random));
		if (round % 2 == 0) {
			limit.window_us = std::uniform_int_distribution<std::int64_t>(1, 20 * kSecond)(random);
			limit.phase_us = std::uniform_int_distribution<std::int64_t>(0, kSecond)(random);
		}
		Bucket bucket = FullBucket(limit, kNow);
		std::int64_t now = kNow;
		for (int call = 0; call < 50; call++) {
			now += std::uniform_int_distribution<std::int64_t>(0, 2 * kSecond)(random);
			const double cost = std::uniform_real_distribution<double>(0.1, limit.burst)(random);
			Request request = Request::Plain(cost);
			if (call % 3 == 0) {
				request =
				    Request::Within(cost, std::uniform_real_distribution<double>(0, 30)(random));
				request.debt_capped = true;
				request.max_reserved = std::uniform_real_distribution<double>(0, 5)(random);
			}
			const Decision d = Decide(bucket, limit, request, now);
			if (d.write)
				bucket = d.next;
			if (d.allowed)
				continue;
			const std::int64_t wait = static_cast<std::int64_t>(std::llround(d.retry_after * 1e6));
			ASSERT_EQ(static_cast<double>(wait) / 1e6, d.retry_after) << "round " << round;
			ASSERT_TRUE(Decide(bucket, limit, request, now + wait).allowed)
			    << "round " << round << " call " << call << ": not granted after retry_after";
			ASSERT_FALSE(Decide(bucket, limit, request, now + wait - 1).allowed)
			    << "round " << round << " call " << call << ": retry_after " << d.retry_after
			    << " is longer than needed";
		}
	}
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

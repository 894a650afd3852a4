/*
 * test/unit/forget_test.cpp
 *
 * What cleanup relies on: IsFull() says exactly when a stored bucket can be
 * forgotten without changing any later answer (it then behaves as a new,
 * full one), and FullAtMicros() says from when on that holds for what a
 * decision stored.  Seeded random limits, balances and call sequences.
 */
#include "test_helpers.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include <gtest/gtest.h>

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr std::int64_t kNow = INT64_C(800000000000000);
constexpr std::int64_t kSecond = 1000000;

TEST(FullAt, IsWhenTheStoredBucketRefillsToBurst)
{
	const Limit limit{2, 10};
	const Request take = Request::Plain(3);
	Decision d = Decide(FullBucket(limit, kNow), limit, take, kNow);
	ASSERT_TRUE(d.allowed);
	EXPECT_EQ(FullAtMicros(d, kNow), kNow + 3 * kSecond / 2);
	EXPECT_FALSE(IsFull(d.next, limit, kNow + 3 * kSecond / 2 - 1));
	EXPECT_TRUE(IsFull(d.next, limit, kNow + 3 * kSecond / 2));

	/* A full bucket is full at once; one that never refills, never. */
	EXPECT_EQ(FullAtMicros(Decide(FullBucket(limit, kNow), limit, Request::Plain(0), kNow), kNow),
	          kNow);
	const Limit never{0, 10};
	Decision spent = Decide(FullBucket(never, kNow), never, take, kNow);
	EXPECT_EQ(spent.reset_after, kInf);
	EXPECT_EQ(FullAtMicros(spent, kNow), INT64_MAX);

	/* Beyond every timestamp: never. */
	const Limit slow{1e-12, 10};
	EXPECT_EQ(FullAtMicros(Decide(FullBucket(slow, kNow), slow, take, kNow), kNow), INT64_MAX);
}

TEST(IsFull, DebtAndAStampAheadAreNotFull)
{
	const Limit limit{1, 5};
	EXPECT_TRUE(IsFull(Bucket{5, kNow}, limit, kNow));
	EXPECT_TRUE(IsFull(Bucket{4, kNow - kSecond}, limit, kNow));
	EXPECT_FALSE(IsFull(Bucket{4, kNow - kSecond + 1}, limit, kNow));
	EXPECT_FALSE(IsFull(Bucket{-2, kNow - 6 * kSecond}, limit, kNow));
	EXPECT_TRUE(IsFull(Bucket{-2, kNow - 7 * kSecond}, limit, kNow));
	/* A clock that stepped back pauses refill: the stamp ahead is history a
	 * new bucket would not have. */
	EXPECT_FALSE(IsFull(Bucket{5, kNow + 1}, limit, kNow));
	/* A lowered burst caps at once. */
	EXPECT_TRUE(IsFull(Bucket{9, kNow}, limit, kNow));
}

/* A random limit: continuous, with a floor rate, or fixed windows. */
Limit
RandomLimit(std::mt19937_64 &random)
{
	std::uniform_int_distribution<int> kind(0, 2);
	std::uniform_real_distribution<double> rate(0.01, 50);
	std::uniform_real_distribution<double> burst(0.5, 100);
	Limit limit{rate(random), burst(random)};
	switch (kind(random)) {
	case 1:
		limit.floor_rate = limit.rate * 3;
		break;
	case 2:
		limit.window_us = std::uniform_int_distribution<std::int64_t>(1, 90 * kSecond)(random);
		limit.phase_us =
		    std::uniform_int_distribution<std::int64_t>(0, limit.window_us - 1)(random);
		break;
	default:
		break;
	}
	return limit;
}

/* Forgetting a bucket IsFull() accepts changes no answer of any later
 * sequence of calls; forgetting one it refuses changes some. */
TEST(IsFull, ExactlyWhenForgettingChangesNoAnswer)
{
	std::mt19937_64 random(20261122);
	int full = 0;
	int not_full = 0;
	for (int round = 0; round < 20000; round++) {
		const Limit limit = RandomLimit(random);
		std::uniform_real_distribution<double> tokens(-limit.burst, limit.burst);
		/* Ages from a microsecond to an hour, evenly over their logarithm. */
		std::uniform_real_distribution<double> log_age(0, std::log(3600.0 * kSecond));
		Bucket stored{tokens(random), kNow - static_cast<std::int64_t>(std::exp(log_age(random)))};
		if (round % 3 == 0)
			stored.tokens = limit.burst;
		const bool forgettable = IsFull(stored, limit, kNow);

		Bucket kept = stored;
		Bucket fresh = FullBucket(limit, kNow);
		std::int64_t now = kNow;
		bool same = true;
		for (int call = 0; call < 8 && same; call++) {
			std::uniform_real_distribution<double> cost(0, limit.burst);
			Request request = Request::Plain(call == 0 ? limit.burst : cost(random));
			if (call % 3 == 2)
				request = Request::Within(cost(random), 30);
			Decision a = Decide(kept, limit, request, now);
			Decision b = Decide(fresh, limit, request, now);
			same = a.allowed == b.allowed && a.remaining == b.remaining &&
			       a.retry_after == b.retry_after && a.reset_after == b.reset_after &&
			       a.refill_after == b.refill_after;
			if (a.write)
				kept = a.next;
			if (b.write)
				fresh = b.next;
			now += std::uniform_int_distribution<std::int64_t>(0, 5 * kSecond)(random);
		}
		if (forgettable) {
			full++;
			EXPECT_TRUE(same) << "round " << round
			                  << ": forgetting a full bucket changed an answer";
		} else {
			not_full++;
			EXPECT_FALSE(same) << "round " << round
			                   << ": a bucket that is not full answered as a new one";
		}
	}
	/* Both sides were exercised. */
	EXPECT_GT(full, 4000);
	EXPECT_GT(not_full, 4000);
}

} /* namespace */

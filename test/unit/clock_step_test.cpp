/*
 * test/unit/clock_step_test.cpp
 *
 * A clock that steps back pauses refill (no time is credited twice), but a
 * stamp further ahead of the clock than refilling the whole burst takes, as
 * a fixed clock set in the future leaves, must not freeze the bucket.
 */
#include "test_helpers.hpp"

#include <cstdint>

#include <gtest/gtest.h>

namespace {

constexpr std::int64_t kNow = INT64_C(800000000000000);
constexpr std::int64_t kSecond = 1000000;

const Request kOne{1.0, false, false, 0.0};

TEST(ClockStep, SmallStepBackPausesRefill)
{
	const Limit limit{1, 10}; /* full in 10 s */
	Bucket ahead{0, kNow + 2 * kSecond};
	EXPECT_EQ(Refill(ahead, limit, kNow).stamp_us, ahead.stamp_us);
	Decision d = Decide(ahead, limit, kOne, kNow);
	EXPECT_FALSE(d.allowed);
	EXPECT_EQ(d.retry_after, 3.0); /* 2 s to catch up, 1 s to refill */
}

TEST(ClockStep, StampFarInTheFutureRestartsAtTheClock)
{
	const Limit limit{1, 10};
	/* A fixed clock left the stamp 70 years ahead. */
	Bucket ahead{0, kNow + INT64_C(2204637667) * kSecond};
	Bucket now = Refill(ahead, limit, kNow);
	EXPECT_EQ(now.stamp_us, kNow);
	EXPECT_EQ(now.tokens, 0.0); /* nothing credited for the gap */
	Decision d = Decide(ahead, limit, kOne, kNow);
	EXPECT_FALSE(d.allowed);
	EXPECT_EQ(d.retry_after, 1.0);
	/* The denial stores the restarted stamp, and waiting retry_after on it is
	 * enough. */
	ASSERT_TRUE(d.write);
	EXPECT_EQ(d.next.stamp_us, kNow);
	EXPECT_FALSE(Decide(d.next, limit, kOne, kNow + kSecond - 1).allowed);
	EXPECT_TRUE(Decide(d.next, limit, kOne, kNow + kSecond).allowed);
	/* A small step back stores nothing on a denial. */
	EXPECT_FALSE(Decide(Bucket{0, kNow + 2 * kSecond}, limit, kOne, kNow).write);
}

TEST(ClockStep, TheLimitIsAnHourOrTheTimeToFillTheBurst)
{
	constexpr std::int64_t kHour = 3600 * kSecond;
	const Limit limit{1, 10}; /* full in 10 s: the hour counts */
	EXPECT_EQ(Refill(Bucket{0, kNow + kHour}, limit, kNow).stamp_us, kNow + kHour);
	EXPECT_EQ(Refill(Bucket{0, kNow + kHour + 1}, limit, kNow).stamp_us, kNow);
	const Limit slow{1, 7200}; /* full in two hours: those count */
	EXPECT_EQ(Refill(Bucket{0, kNow + 2 * kHour}, slow, kNow).stamp_us, kNow + 2 * kHour);
	EXPECT_EQ(Refill(Bucket{0, kNow + 2 * kHour + 1}, slow, kNow).stamp_us, kNow);
	/* A bucket that never refills keeps its stamp. */
	const Limit never{0, 1};
	EXPECT_EQ(Refill(Bucket{0, kNow + 1000 * kHour}, never, kNow).stamp_us, kNow + 1000 * kHour);
	/* Fixed windows: the whole windows refill takes, and one more. */
	Limit daily{1.0 / 86400, 3}; /* one token a day, in daily windows: full in 3 days */
	daily.window_us = 24 * kHour;
	EXPECT_EQ(Refill(Bucket{0, kNow + 96 * kHour}, daily, kNow).stamp_us, kNow + 96 * kHour);
	EXPECT_EQ(Refill(Bucket{0, kNow + 96 * kHour + 1}, daily, kNow).stamp_us, kNow);
}

} /* namespace */

/*
 * test/unit/fixed_window_test.cpp
 *
 * Fixed-window refill: tokens arrive only at window boundaries (phase + k *
 * window), a window's worth at a time, capped at burst so that unused tokens
 * roll over up to it; waits point exactly at the boundary that can serve.
 */
#include "test_helpers.hpp"

#include <cmath>
#include <cstdint>
#include <random>

#include <gtest/gtest.h>

namespace {

constexpr std::int64_t kSecond = 1000000;
constexpr std::int64_t kMinute = 60 * kSecond;
constexpr std::int64_t kEpoch = INT64_C(13333334) * kMinute; /* a minute boundary */

/* 10 tokens a minute, in whole-minute windows starting at `phase`. */
Limit
PerMinute(double burst, std::int64_t phase = 0)
{
	Limit limit{10.0 / 60.0, burst};
	limit.window_us = kMinute;
	limit.phase_us = phase;
	return limit;
}

Request
Take(double cost)
{
	return Request{cost, false, false, 0.0};
}

TEST(FixedWindow, TokensArriveOnlyAtBoundaries)
{
	const Limit limit = PerMinute(10);
	const Bucket empty{0, kEpoch + 30 * kSecond};
	EXPECT_EQ(Refill(empty, limit, kEpoch + kMinute - 1).tokens, 0.0);
	EXPECT_NEAR(Refill(empty, limit, kEpoch + kMinute).tokens, 10.0, 1e-9);
	EXPECT_NEAR(Refill(empty, limit, kEpoch + 2 * kMinute - 1).tokens, 10.0, 1e-9);
}

TEST(FixedWindow, UnusedTokensRollOverUpToBurst)
{
	const Limit limit = PerMinute(25);
	const Bucket empty{0, kEpoch};
	EXPECT_NEAR(Refill(empty, limit, kEpoch + 2 * kMinute).tokens, 20.0, 1e-9);
	EXPECT_EQ(Refill(empty, limit, kEpoch + 3 * kMinute).tokens, 25.0);
	EXPECT_EQ(Refill(empty, limit, kEpoch + 300 * kMinute).tokens, 25.0);
}

TEST(FixedWindow, WindowsStartAtThePhase)
{
	const Limit limit = PerMinute(10, 15 * kSecond);
	const Bucket empty{0, kEpoch};
	EXPECT_EQ(Refill(empty, limit, kEpoch + 15 * kSecond - 1).tokens, 0.0);
	EXPECT_NEAR(Refill(empty, limit, kEpoch + 15 * kSecond).tokens, 10.0, 1e-9);
}

TEST(FixedWindow, RetryAfterPointsAtTheServingBoundary)
{
	const Limit limit = PerMinute(20);
	const Bucket empty{0, kEpoch + 40 * kSecond};
	/* 15 tokens need two windows: the boundaries at +20 s and +80 s. */
	Decision d = Decide(empty, limit, Take(15), kEpoch + 40 * kSecond);
	EXPECT_FALSE(d.allowed);
	EXPECT_EQ(d.retry_after, 80.0);
	EXPECT_EQ(d.reset_after, 80.0);
	EXPECT_FALSE(Decide(empty, limit, Take(15), kEpoch + 120 * kSecond - 1).allowed);
	EXPECT_TRUE(Decide(empty, limit, Take(15), kEpoch + 120 * kSecond).allowed);
}

TEST(FixedWindow, ClockBackwardsWaitsFromTheStamp)
{
	const Limit limit = PerMinute(10);
	const Bucket empty{0, kEpoch + 30 * kSecond};
	Decision d = Decide(empty, limit, Take(1), kEpoch + 10 * kSecond);
	EXPECT_FALSE(d.allowed);
	EXPECT_EQ(d.retry_after, 50.0); /* the boundary at +60 s, seen from +10 s */
}

TEST(FixedWindow, WaitsAreExactAtRandom)
{
	std::mt19937_64 rng(21);
	int checked = 0;
	for (int i = 0; i < 40000; i++) {
		Limit limit{static_cast<double>(rng() % 1000 + 1) / 100.0,
		            static_cast<double>(rng() % 5000 + 1) / 10.0};
		limit.window_us = static_cast<std::int64_t>(rng() % (3600 * kSecond)) + 1;
		limit.phase_us = static_cast<std::int64_t>(rng() % limit.window_us);
		const std::int64_t now = kEpoch + static_cast<std::int64_t>(rng() % (86400 * kSecond));
		const Bucket stored{std::fmod(static_cast<double>(rng() % 100000) / 100.0, limit.burst),
		                    now - static_cast<std::int64_t>(rng() % limit.window_us)};
		const Request request =
		    Take(std::fmod(static_cast<double>(rng() % 100000) / 100.0, limit.burst));
		Decision d = Decide(stored, limit, request, now);
		ASSERT_FALSE(std::isnan(d.retry_after) || std::isnan(d.reset_after));
		if (d.allowed || !std::isfinite(d.retry_after))
			continue;
		checked++;
		std::int64_t wait = std::llround(d.retry_after * 1e6);
		ASSERT_TRUE(Decide(stored, limit, request, now + wait).allowed) << "i=" << i;
		ASSERT_FALSE(Decide(stored, limit, request, now + wait - 1).allowed) << "i=" << i;
		std::int64_t full = std::llround(d.reset_after * 1e6);
		ASSERT_EQ(Refill(stored, limit, now + full).tokens, limit.burst) << "i=" << i;
	}
	EXPECT_GT(checked, 10000);
}

/* Over a long run of takes, the tokens granted never exceed burst plus the
 * windows' worth that arrived, and under overload reach it. */
TEST(FixedWindow, AdmissionBound)
{
	const Limit limit = PerMinute(15, 7 * kSecond);
	std::mt19937_64 rng(5);
	Bucket b{limit.burst, kEpoch};
	std::int64_t now = kEpoch;
	double granted = 0;
	for (int i = 0; i < 1000000; i++) {
		now += static_cast<std::int64_t>(rng() % 20000);
		Decision d = Decide(b, limit, Take(1), now);
		if (d.allowed) {
			granted += 1;
			b = d.next;
		}
		std::int64_t windows = (now - 7 * kSecond) / kMinute - (kEpoch - 7 * kSecond) / kMinute;
		ASSERT_LE(granted, limit.burst + 10.0 * static_cast<double>(windows) + 1e-6);
	}
	std::int64_t windows = (now - 7 * kSecond) / kMinute - (kEpoch - 7 * kSecond) / kMinute;
	EXPECT_GE(granted, limit.burst + 10.0 * static_cast<double>(windows) - 1.0);
}

} /* namespace */

/*
 * test/unit/jitter_test.cpp
 *
 * Jittered(): deterministic per key, never shorter than the exact wait, at
 * most (1 + fraction) times it, whole microseconds, and spread across keys.
 */
#include "token_bucket.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <set>

#include <gtest/gtest.h>

namespace {

using ratelimit::core::Jittered;

TEST(Jitter, SameKeySameJitter)
{
	EXPECT_EQ(Jittered(2.5, 0.2, 12345), Jittered(2.5, 0.2, 12345));
}

TEST(Jitter, BoundsAndWholeMicroseconds)
{
	std::mt19937_64 rng(7);
	for (int i = 0; i < 100000; i++) {
		/* whole microseconds, as Decide() gives */
		double wait = static_cast<double>(rng() % 1000000000 + 1) / 1e6;
		double fraction = static_cast<double>(rng() % 1001) / 1000.0;
		double jittered = Jittered(wait, fraction, rng());
		ASSERT_GE(jittered, wait);
		ASSERT_LE(jittered, wait * (1.0 + fraction) + 1e-6);
		double micros = jittered * 1e6;
		ASSERT_NEAR(micros, std::round(micros), 1e-3);
	}
}

TEST(Jitter, SpreadsKeys)
{
	std::set<double> seen;
	for (std::uint64_t key = 0; key < 1000; key++)
		seen.insert(Jittered(10.0, 0.5, key * 0x9E3779B97F4A7C15ULL));
	EXPECT_GT(seen.size(), 900u);
	EXPECT_EQ(Jittered(10.0, 0.5, 0), 10.0);                    /* share 0 */
	EXPECT_NEAR(Jittered(10.0, 0.5, ~UINT64_C(0)), 15.0, 1e-6); /* share ~1 */
}

TEST(Jitter, LeavesZeroInfinityAndNoFractionAlone)
{
	const double inf = std::numeric_limits<double>::infinity();
	EXPECT_EQ(Jittered(0.0, 0.5, 99), 0.0);
	EXPECT_EQ(Jittered(inf, 0.5, 99), inf);
	EXPECT_EQ(Jittered(3.25, 0.0, 99), 3.25);
}

} /* namespace */

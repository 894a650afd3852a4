/*
 * test/unit/floor_rate_test.cpp
 *
 * The floor rate: below one second's worth of floor_rate the bucket refills
 * at max(rate, floor_rate), above it at rate; waits stay exact, and over a
 * long overloaded run a client still gets floor_rate tokens per second.
 */
#include "test_helpers.hpp"

#include <cmath>
#include <cstdint>
#include <random>

#include <gtest/gtest.h>

namespace {

constexpr std::int64_t kSecond = 1000000;
constexpr std::int64_t kNow = INT64_C(800000000) * kSecond;

/* 100 tokens of burst refilling at 100 an hour, with a floor of 2 a second. */
Limit
Slow(double floor_rate)
{
	Limit limit{100.0 / 3600.0, 100};
	limit.floor_rate = floor_rate;
	return limit;
}

TEST(FloorRate, FastBelowTheFloorLevelSlowAbove)
{
	const Limit limit = Slow(2);
	const Bucket empty{0, kNow};
	EXPECT_NEAR(Refill(empty, limit, kNow + kSecond / 2).tokens, 1.0, 1e-9);
	EXPECT_NEAR(Refill(empty, limit, kNow + kSecond).tokens, 2.0, 1e-9);
	/* past the floor level (2 tokens) only the slow rate applies */
	EXPECT_NEAR(Refill(empty, limit, kNow + 37 * kSecond).tokens, 2.0 + 36 * 100.0 / 3600.0, 1e-9);
	EXPECT_EQ(Refill(empty, limit, kNow + 10000 * kSecond).tokens, 100.0);
}

TEST(FloorRate, NoFloorIsThePlainBucket)
{
	const Limit plain{100.0 / 3600.0, 100};
	const Bucket empty{0, kNow};
	EXPECT_NEAR(Refill(empty, plain, kNow + kSecond).tokens, 100.0 / 3600.0, 1e-12);
}

TEST(FloorRate, ValidatesTheFloor)
{
	const Request take{1, false, false, 0};
	EXPECT_EQ(Validate(Slow(0), take), Status::kOk);
	EXPECT_EQ(Validate(Slow(-1), take), Status::kFloorRateInvalid);
	EXPECT_EQ(Validate(Slow(std::nan("")), take), Status::kFloorRateInvalid);
}

TEST(FloorRate, WaitsAreExactAtRandom)
{
	std::mt19937_64 rng(33);
	int checked = 0;
	for (int i = 0; i < 40000; i++) {
		Limit limit{static_cast<double>(rng() % 1000) / 1000.0,
		            static_cast<double>(rng() % 1000 + 1) / 10.0};
		limit.floor_rate = static_cast<double>(rng() % 5000) / 1000.0;
		const Bucket stored{std::fmod(static_cast<double>(rng() % 10000) / 100.0, limit.burst),
		                    kNow - static_cast<std::int64_t>(rng() % (5 * kSecond))};
		const Request request{std::fmod(static_cast<double>(rng() % 10000) / 100.0, limit.burst),
		                      false, false, 0};
		Decision d = Decide(stored, limit, request, kNow);
		if (d.allowed || !std::isfinite(d.retry_after))
			continue;
		checked++;
		std::int64_t wait = std::llround(d.retry_after * 1e6);
		ASSERT_TRUE(Decide(stored, limit, request, kNow + wait).allowed) << "i=" << i;
		ASSERT_FALSE(Decide(stored, limit, request, kNow + wait - 1).allowed) << "i=" << i;
	}
	EXPECT_GT(checked, 10000);
}

/* Hammered for an hour after the burst is gone, a client gets the floor
 * rate (2/s), not the slow rate (100/h). */
TEST(FloorRate, SustainsTheFloorUnderOverload)
{
	const Limit limit = Slow(2);
	Bucket b{limit.burst, kNow};
	std::int64_t now = kNow;
	double granted = 0;
	for (int i = 0; i < 360000; i++) {
		now += 10000; /* a call every 10 ms */
		Decision d = Decide(b, limit, Request{1, false, false, 0}, now);
		if (d.allowed) {
			granted += 1;
			b = d.next;
		}
	}
	/* 100 of burst, then about 2 per second over the hour */
	EXPECT_GE(granted, 100 + 2 * 3600 - 2);
	EXPECT_LE(granted, 100 + 2 * 3600 + 100 + 2);
}

} /* namespace */

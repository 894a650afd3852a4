/*
 * test/unit/token_bucket_test.cpp
 *
 * Example-based tests of the token-bucket core (src/core/token_bucket.*):
 * Validate() for every status and its order of checks, FullBucket(),
 * Refill() and Decide() on hand-computed cases, including backward clock
 * steps, reservations, rate 0 and int64 extremes.  Property checks live in
 * token_bucket_property_test.cpp.
 */
#include "test_helpers.hpp"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>

#include <gtest/gtest.h>

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr std::int64_t kSecond = ratelimit::core::kMicrosPerSecond;
constexpr std::int64_t kInt64Min = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();
/* An arbitrary "now": 2025 in microseconds since the PostgreSQL epoch. */
constexpr std::int64_t kNow = INT64_C(800000000000000);

Request
Take(double cost)
{
	return Request{cost, false, false, 0.0};
}

Request
Reserve(double cost)
{
	return Request{cost, true, false, 0.0};
}

Request
ReserveCapped(double cost, double max_reserved)
{
	return Request{cost, true, true, max_reserved};
}

/* ---------------------------------------------------------------- Validate */

struct ValidateCase {
	const char *what;
	Limit limit;
	Request request;
	Status expected;
};

const ValidateCase kValidateCases[] = {
    /* cost */
    {"cost NaN", {1, 10}, Take(kNaN), Status::kCostInvalid},
    {"cost +inf", {1, 10}, Take(kInf), Status::kCostInvalid},
    {"cost -inf", {1, 10}, Take(-kInf), Status::kCostInvalid},
    {"cost negative", {1, 10}, Take(-1), Status::kCostInvalid},
    {"cost tiny negative", {1, 10}, Take(-1e-300), Status::kCostInvalid},
    {"reserved cost NaN", {1, 10}, Reserve(kNaN), Status::kCostInvalid},
    {"reserved cost +inf", {1, 10}, Reserve(kInf), Status::kCostInvalid},
    {"capped cost negative", {1, 10}, ReserveCapped(-1, 5), Status::kCostInvalid},
    /* rate */
    {"rate NaN", {kNaN, 10}, Take(1), Status::kRateInvalid},
    {"rate +inf", {kInf, 10}, Take(1), Status::kRateInvalid},
    {"rate -inf", {-kInf, 10}, Take(1), Status::kRateInvalid},
    {"rate negative", {-1, 10}, Take(1), Status::kRateInvalid},
    /* burst */
    {"burst NaN", {1, kNaN}, Take(1), Status::kBurstInvalid},
    {"burst +inf", {1, kInf}, Take(1), Status::kBurstInvalid},
    {"burst -inf", {1, -kInf}, Take(1), Status::kBurstInvalid},
    {"burst zero", {1, 0}, Take(0), Status::kBurstInvalid},
    {"burst negative zero", {1, -0.0}, Take(0), Status::kBurstInvalid},
    {"burst negative", {1, -5}, Take(0), Status::kBurstInvalid},
    /* max_reserved, checked only when the debt is capped */
    {"max_reserved NaN", {1, 10}, ReserveCapped(1, kNaN), Status::kMaxReservedInvalid},
    {"max_reserved +inf", {1, 10}, ReserveCapped(1, kInf), Status::kMaxReservedInvalid},
    {"max_reserved -inf", {1, 10}, ReserveCapped(1, -kInf), Status::kMaxReservedInvalid},
    {"max_reserved negative", {1, 10}, ReserveCapped(1, -1), Status::kMaxReservedInvalid},
    {"max_reserved NaN but uncapped", {1, 10}, Request{1, true, false, kNaN}, Status::kOk},
    {"max_reserved -1 but uncapped", {1, 10}, Request{1, true, false, -1}, Status::kOk},
    {"max_reserved zero", {1, 10}, ReserveCapped(1, 0), Status::kOk},
    /* cost against burst */
    {"cost above burst", {1, 10}, Take(10.5), Status::kCostExceedsBurst},
    {"cost one ulp above burst",
     {1, 10},
     Take(std::nextafter(10.0, 11.0)),
     Status::kCostExceedsBurst},
    {"cost equals burst", {1, 10}, Take(10), Status::kOk},
    {"cost zero", {1, 10}, Take(0), Status::kOk},
    {"rate zero", {0, 10}, Take(1), Status::kOk},
    {"rate and cost zero", {0, 10}, Take(0), Status::kOk},
    {"tiny burst and cost", {1, 1e-300}, Take(1e-300), Status::kOk},
    /* cost against the debt cap */
    {"reserved cost above burst + cap",
     {1, 10},
     ReserveCapped(15.5, 5),
     Status::kCostExceedsDebtCap},
    {"reserved cost above burst, cap zero",
     {1, 10},
     ReserveCapped(10.5, 0),
     Status::kCostExceedsDebtCap},
    {"reserved cost equals burst + cap", {1, 10}, ReserveCapped(15, 5), Status::kOk},
    {"reserved cost above burst within cap", {1, 10}, ReserveCapped(12, 5), Status::kOk},
    {"reserved uncapped huge cost", {1, 10}, Reserve(1e300), Status::kOk},
    {"reserved uncapped, rate zero", {0, 10}, Reserve(1e6), Status::kOk},
    /* order of checks: the first failing check wins */
    {"cost before rate", {kNaN, kNaN}, Take(kNaN), Status::kCostInvalid},
    {"rate before burst", {-1, 0}, Take(1), Status::kRateInvalid},
    {"burst before max_reserved", {1, 0}, ReserveCapped(1, kNaN), Status::kBurstInvalid},
    {"max_reserved before cost > burst",
     {1, 10},
     Request{20, false, true, kNaN},
     Status::kMaxReservedInvalid},
    {"max_reserved before debt cap", {1, 10}, ReserveCapped(1e9, -1), Status::kMaxReservedInvalid},
};

TEST(Validate, ReturnsTheFirstFailingStatus)
{
	for (const ValidateCase &c : kValidateCases) {
		SCOPED_TRACE(c.what);
		EXPECT_EQ(Validate(c.limit, c.request), c.expected);
	}
}

/* -------------------------------------------------------------- FullBucket */

TEST(FullBucket, HoldsBurstStampedNow)
{
	const std::int64_t stamps[] = {0, kNow, -kNow, kInt64Min, kInt64Max};

	for (std::int64_t now : stamps) {
		Bucket b = FullBucket(Limit{2.5, 7.25}, now);

		EXPECT_EQ(b.tokens, 7.25);
		EXPECT_EQ(b.stamp_us, now);
	}
}

/* ------------------------------------------------------------------ Refill */

struct RefillCase {
	const char *what;
	Limit limit;
	Bucket stored;
	std::int64_t now_us;
	Bucket expected;
};

const RefillCase kRefillCases[] = {
    {"adds rate times elapsed",
     {2, 10},
     {1, kNow},
     kNow + 3 * kSecond / 2,
     {4, kNow + 3 * kSecond / 2}},
    {"keeps a fraction", {1, 10}, {0, kNow}, kNow + kSecond / 4, {0.25, kNow + kSecond / 4}},
    {"one microsecond", {1, 10}, {0, kNow}, kNow + 1, {1e-6, kNow + 1}},
    {"caps at burst", {2, 10}, {9, kNow}, kNow + 5 * kSecond, {10, kNow + 5 * kSecond}},
    {"exactly reaches burst", {2, 10}, {8, kNow}, kNow + kSecond, {10, kNow + kSecond}},
    {"elapsed zero adds nothing", {2, 10}, {3, kNow}, kNow, {3, kNow}},
    {"clock step back adds nothing, keeps stamp",
     {2, 10},
     {3, kNow},
     kNow - 5 * kSecond,
     {3, kNow}},
    {"rate zero never refills",
     {0, 10},
     {3, kNow},
     kNow + 1000 * kSecond,
     {3, kNow + 1000 * kSecond}},
    {"years forward cap at burst",
     {1e6, 10},
     {-5, kNow},
     kNow + INT64_C(100) * 366 * 86400 * kSecond,
     {10, kNow + INT64_C(100) * 366 * 86400 * kSecond}},
    {"lowered burst caps at once", {1, 5}, {10, kNow}, kNow + kSecond, {5, kNow + kSecond}},
    {"lowered burst caps with elapsed zero", {1, 5}, {10, kNow}, kNow, {5, kNow}},
    {"lowered burst caps after step back", {1, 5}, {10, kNow}, kNow - kSecond, {5, kNow}},
    {"debt refills", {1, 10}, {-3, kNow}, kNow + 2 * kSecond, {-1, kNow + 2 * kSecond}},
    {"debt refills past zero", {1, 10}, {-3, kNow}, kNow + 4 * kSecond, {1, kNow + 4 * kSecond}},
    {"huge span without overflow",
     {1e-12, 10},
     {0, INT64_C(-4000000000000000000)},
     INT64_C(4000000000000000000),
     {8, INT64_C(4000000000000000000)}},
    {"now - stamp overflows int64", {1e-300, 10}, {-5, kInt64Min}, kInt64Max, {10, kInt64Max}},
    {"now - stamp overflows by one", {0, 10}, {1, -1}, kInt64Max, {10, kInt64Max}},
    {"largest span that fits",
     {1e-18, 10},
     {0, -1},
     kInt64Max - 1,
     {1e-18 * (9223372036854775807.0 / 1e6), kInt64Max - 1}},
};

TEST(Refill, MatchesHandComputedCases)
{
	for (const RefillCase &c : kRefillCases) {
		SCOPED_TRACE(c.what);
		Bucket b = Refill(c.stored, c.limit, c.now_us);

		EXPECT_DOUBLE_EQ(b.tokens, c.expected.tokens);
		EXPECT_EQ(b.stamp_us, c.expected.stamp_us);
	}
}

TEST(Refill, QuarterSecondStepsAddExactQuarters)
{
	const Limit limit{1, 10};
	Bucket b{0, kNow};
	const double expected[] = {0.25, 0.5, 0.75, 1.0};

	for (int i = 0; i < 4; i++) {
		b = Refill(b, limit, b.stamp_us + kSecond / 4);
		EXPECT_EQ(b.tokens, expected[i]);
		EXPECT_EQ(b.stamp_us, kNow + (i + 1) * kSecond / 4);
	}
}

TEST(Refill, MillionMicrosecondStepsMakeOneToken)
{
	const Limit limit{1, 10};
	Bucket b{0, kNow};

	for (int i = 0; i < 1000000; i++)
		b = Refill(b, limit, b.stamp_us + 1);
	EXPECT_NEAR(b.tokens, 1.0, 1e-9);
	EXPECT_EQ(b.stamp_us, kNow + kSecond);
}

TEST(Refill, StampNeverMovesBackwards)
{
	const Limit limit{1, 10};
	Bucket b = Refill(Bucket{2, 10 * kSecond}, limit, 9 * kSecond);

	EXPECT_EQ(b.stamp_us, 10 * kSecond);
	EXPECT_EQ(b.tokens, 2.0);
	/* Refill resumes at the stamp, not at the earlier reading. */
	b = Refill(b, limit, 11 * kSecond);
	EXPECT_EQ(b.stamp_us, 11 * kSecond);
	EXPECT_EQ(b.tokens, 3.0);
}

/* ------------------------------------------------------------------ Decide */

void
ExpectSameBucket(const Bucket &actual, const Bucket &expected)
{
	EXPECT_EQ(actual.tokens, expected.tokens);
	EXPECT_EQ(actual.stamp_us, expected.stamp_us);
}

TEST(Decide, GrantTakesCostAndWrites)
{
	Decision d = Decide(Bucket{5, kNow}, Limit{1, 10}, Take(2), kNow);

	EXPECT_TRUE(d.allowed);
	EXPECT_TRUE(d.write);
	EXPECT_EQ(d.remaining, 3.0);
	EXPECT_EQ(d.retry_after, 0.0);
	EXPECT_EQ(d.reset_after, 7.0);
	ExpectSameBucket(d.next, Bucket{3, kNow});
}

TEST(Decide, GrantRefillsFirst)
{
	Decision d = Decide(Bucket{0.5, kNow - kSecond / 2}, Limit{3, 10}, Take(2), kNow);

	EXPECT_TRUE(d.allowed);
	EXPECT_TRUE(d.write);
	EXPECT_EQ(d.remaining, 0.0);
	EXPECT_EQ(d.retry_after, 0.0);
	EXPECT_NEAR(d.reset_after, 10.0 / 3.0, 1e-6);
	ExpectSameBucket(d.next, Bucket{0, kNow});
}

TEST(Decide, GrantOfWholeBurstEmptiesBucket)
{
	Decision d = Decide(FullBucket(Limit{2, 10}, kNow), Limit{2, 10}, Take(10), kNow);

	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 0.0);
	EXPECT_EQ(d.reset_after, 5.0);
}

TEST(Decide, FirstCallOnFullBucketResetsAfterCost)
{
	/* the SQL layer's first call: a full bucket stamped now */
	Decision d = Decide(FullBucket(Limit{10, 20}, kNow), Limit{10, 20}, Take(1), kNow);

	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 19.0);
	EXPECT_EQ(d.reset_after, 0.1);
}

TEST(Decide, LookWithCostZeroNeverWrites)
{
	const Limit limit{1, 10};
	Decision d = Decide(Bucket{5, kNow - kSecond}, limit, Take(0), kNow);

	EXPECT_TRUE(d.allowed);
	EXPECT_FALSE(d.write);
	EXPECT_EQ(d.remaining, 6.0);
	EXPECT_EQ(d.retry_after, 0.0);
	EXPECT_EQ(d.reset_after, 4.0);
	ExpectSameBucket(d.next, Bucket{6, kNow});
}

TEST(Decide, LookAtEmptyBucketIsAllowed)
{
	Decision d = Decide(Bucket{0, kNow}, Limit{1, 10}, Take(0), kNow);

	EXPECT_TRUE(d.allowed);
	EXPECT_FALSE(d.write);
	EXPECT_EQ(d.remaining, 0.0);
	EXPECT_EQ(d.reset_after, 10.0);
}

TEST(Decide, LookAtFullBucketResetsAfterZero)
{
	Decision d = Decide(Bucket{10, kNow}, Limit{0, 10}, Take(0), kNow);

	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.reset_after, 0.0);
}

TEST(Decide, LookAtDebtIsDeniedUntilDebtIsRepaid)
{
	Bucket stored{-2, kNow};
	Decision d = Decide(stored, Limit{1, 10}, Take(0), kNow);

	EXPECT_FALSE(d.allowed);
	EXPECT_FALSE(d.write);
	EXPECT_EQ(d.remaining, -2.0);
	EXPECT_EQ(d.retry_after, 2.0);
	EXPECT_EQ(d.reset_after, 12.0);
	ExpectSameBucket(d.next, stored);
}

TEST(Decide, DenialChangesNothingAndSaysWhenToRetry)
{
	const Limit limit{1, 10};
	const Bucket stored{0.5, kNow - kSecond / 4};
	Decision d = Decide(stored, limit, Take(2), kNow);

	EXPECT_FALSE(d.allowed);
	EXPECT_FALSE(d.write);
	EXPECT_EQ(d.remaining, 0.75);
	EXPECT_EQ(d.retry_after, 1.25);
	EXPECT_EQ(d.reset_after, 9.25);
	ExpectSameBucket(d.next, Refill(stored, limit, kNow));
	ExpectSameBucket(d.next, Bucket{0.75, kNow});

	/* the same call, with the same stored state, at now + retry_after */
	Decision later = Decide(stored, limit, Take(2), kNow + 5 * kSecond / 4);
	EXPECT_TRUE(later.allowed);
	EXPECT_EQ(later.remaining, 0.0);
	Decision early = Decide(stored, limit, Take(2), kNow + 5 * kSecond / 4 - 1);
	EXPECT_FALSE(early.allowed);
}

TEST(Decide, RetryAfterRoundsUpToWholeMicroseconds)
{
	/* 1/3 s is 333333.33 µs: the call succeeds at 333334 µs, not before */
	const Limit limit{3, 10};
	const Bucket stored{0, kNow};
	Decision d = Decide(stored, limit, Take(1), kNow);

	EXPECT_FALSE(d.allowed);
	EXPECT_EQ(d.retry_after, 0.333334);
	EXPECT_FALSE(Decide(stored, limit, Take(1), kNow + 333333).allowed);
	EXPECT_TRUE(Decide(stored, limit, Take(1), kNow + 333334).allowed);
}

/*
 * The denied call is not stored, so the retry refills from the old stamp in
 * one step (254.82 + (1/3) * 771.54 s) while retry_after was computed from
 * the balance refilled to now (255.0140066...) plus a second credit.  The
 * two sums round differently; waiting retry_after must still be enough.
 */
TEST(Decide, RetryAfterSufficesWhenStoredStampIsOlder)
{
	const Limit limit{1.0 / 3.0, 1000};
	const Bucket stored{254.82, kNow - 582020};
	Decision d = Decide(stored, limit, Take(512), kNow);

	ASSERT_FALSE(d.allowed);
	std::int64_t wait = std::llround(d.retry_after * 1e6);
	/* 770957980 µs in real arithmetic; in float8 the credit is then still
	 * short of 512 by one ulp, so the exact answer is one µs more. */
	EXPECT_NEAR(wait, 770957980, 1);
	Decision retried = Decide(stored, limit, Take(512), kNow + wait);
	EXPECT_TRUE(retried.allowed) << "remaining " << retried.remaining;
	EXPECT_FALSE(Decide(stored, limit, Take(512), kNow + wait - 1).allowed);
}

/*
 * A capped reservation is denied while the debt would exceed max_reserved
 * (cost - tokens > max_reserved), but retry_after aims at
 * tokens >= cost - max_reserved, rounded separately.  At the moment it
 * names, the call must be granted, and a denial must never say "retry now".
 */
TEST(Decide, CappedReservationRetryAfterSuffices)
{
	const Limit limit{0.001, 1000};
	const Request request = ReserveCapped(619, 244.08);
	const Bucket stored{329.95, kNow};
	Decision d = Decide(stored, limit, request, kNow);

	ASSERT_FALSE(d.allowed);
	std::int64_t wait = std::llround(d.retry_after * 1e6);
	/* 44970 s in real arithmetic; float8 rounding may need a µs more. */
	EXPECT_NEAR(wait, 44970 * kSecond, 1);
	Decision retried = Decide(stored, limit, request, kNow + wait);
	EXPECT_TRUE(retried.allowed);
	EXPECT_FALSE(Decide(stored, limit, request, kNow + wait - 1).allowed);
	/* granted: the debt's wait; denied: must not be 0 */
	EXPECT_GT(retried.retry_after, 0.0);
}

/*
 * 38 - 37.8 is a hair above 0.2 in binary, so the estimate 0.2 / 0.001 s
 * rounds up to 200.000001 s although 37.8 + 0.001 * 200 s already reaches
 * 38: retry_after must be the first microsecond that succeeds.
 */
TEST(Decide, RetryAfterIsNotAMicrosecondLate)
{
	const Limit limit{0.001, 100};
	const Bucket stored{37.8, kNow};
	Decision d = Decide(stored, limit, Take(38), kNow);

	ASSERT_FALSE(d.allowed);
	EXPECT_TRUE(Decide(stored, limit, Take(38), kNow + 200 * kSecond).allowed);
	EXPECT_EQ(std::llround(d.retry_after * 1e6), 200 * kSecond);
}

TEST(Decide, TinyCostWaitsOneMicrosecond)
{
	const Limit limit{1, 1};
	const Bucket stored{0, kNow};
	Decision d = Decide(stored, limit, Take(1e-12), kNow);

	EXPECT_FALSE(d.allowed);
	EXPECT_EQ(d.retry_after, 1e-6);
	EXPECT_TRUE(Decide(stored, limit, Take(1e-12), kNow + 1).allowed);
}

TEST(Decide, RateZeroDenialNeverSucceeds)
{
	Decision d = Decide(Bucket{0.5, kNow - kSecond}, Limit{0, 10}, Take(1), kNow);

	EXPECT_FALSE(d.allowed);
	EXPECT_FALSE(d.write);
	EXPECT_EQ(d.remaining, 0.5);
	EXPECT_EQ(d.retry_after, kInf);
	EXPECT_EQ(d.reset_after, kInf);
}

TEST(Decide, RateZeroGrantNeverResets)
{
	Decision d = Decide(Bucket{10, kNow}, Limit{0, 10}, Take(1), kNow);

	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 9.0);
	EXPECT_EQ(d.retry_after, 0.0);
	EXPECT_EQ(d.reset_after, kInf);
}

TEST(Decide, ReservationGoesIntoDebt)
{
	const Limit limit{2, 10};
	Decision d = Decide(Bucket{1, kNow}, limit, Reserve(3), kNow);

	EXPECT_TRUE(d.allowed);
	EXPECT_TRUE(d.write);
	EXPECT_EQ(d.remaining, -2.0);
	EXPECT_EQ(d.retry_after, 1.0);
	EXPECT_EQ(d.reset_after, 6.0);
	ExpectSameBucket(d.next, Bucket{-2, kNow});
	/* the debt is repaid exactly at retry_after */
	EXPECT_EQ(Refill(d.next, limit, kNow + kSecond).tokens, 0.0);
	EXPECT_LT(Refill(d.next, limit, kNow + kSecond - 1).tokens, 0.0);
}

TEST(Decide, ReservationWithEnoughTokensIsAPlainGrant)
{
	Decision d = Decide(Bucket{5, kNow}, Limit{2, 10}, ReserveCapped(3, 0), kNow);

	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 2.0);
	EXPECT_EQ(d.retry_after, 0.0);
}

TEST(Decide, ReservationUpToTheCapIsGranted)
{
	Decision d = Decide(Bucket{1, kNow}, Limit{2, 10}, ReserveCapped(3, 2), kNow);

	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, -2.0);
	EXPECT_EQ(d.retry_after, 1.0);
}

TEST(Decide, ReservationBeyondTheCapIsDenied)
{
	const Limit limit{2, 10};
	const Bucket stored{1, kNow};
	Decision d = Decide(stored, limit, ReserveCapped(3, 1.5), kNow);

	EXPECT_FALSE(d.allowed);
	EXPECT_FALSE(d.write);
	EXPECT_EQ(d.remaining, 1.0);
	ExpectSameBucket(d.next, stored);
	/* granted once tokens >= cost - max_reserved = 1.5: 0.5 tokens at 2/s */
	EXPECT_EQ(d.retry_after, 0.25);
	EXPECT_EQ(d.reset_after, 4.5);
	Decision later = Decide(stored, limit, ReserveCapped(3, 1.5), kNow + kSecond / 4);
	EXPECT_TRUE(later.allowed);
	EXPECT_EQ(later.remaining, -1.5);
	EXPECT_FALSE(Decide(stored, limit, ReserveCapped(3, 1.5), kNow + kSecond / 4 - 1).allowed);
}

TEST(Decide, ReservationWithRateZeroIsNeverRepaid)
{
	Decision d = Decide(Bucket{1, kNow}, Limit{0, 10}, Reserve(3), kNow);

	EXPECT_FALSE(d.allowed);
	EXPECT_FALSE(d.write);
	EXPECT_EQ(d.remaining, 1.0);
	EXPECT_EQ(d.retry_after, kInf);
	EXPECT_EQ(d.reset_after, kInf);

	Decision capped = Decide(Bucket{1, kNow}, Limit{0, 10}, ReserveCapped(3, 5), kNow);
	EXPECT_FALSE(capped.allowed);
	EXPECT_EQ(capped.retry_after, kInf);
}

TEST(Decide, ReservationWithRateZeroWithoutDebtIsGranted)
{
	Decision d = Decide(Bucket{5, kNow}, Limit{0, 10}, Reserve(3), kNow);

	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 2.0);
	EXPECT_EQ(d.retry_after, 0.0);
	EXPECT_EQ(d.reset_after, kInf);
}

TEST(Decide, UncappedReservationAllowsAnyDebt)
{
	Decision d = Decide(Bucket{0, kNow}, Limit{1, 10}, Reserve(1e6), kNow);

	EXPECT_TRUE(d.allowed);
	EXPECT_TRUE(d.write);
	EXPECT_EQ(d.remaining, -1e6);
	EXPECT_EQ(d.retry_after, 1e6);
	EXPECT_EQ(d.reset_after, 1e6 + 10);

	/* and a second one piles on */
	Decision again = Decide(d.next, Limit{1, 10}, Reserve(1e6), kNow);
	EXPECT_TRUE(again.allowed);
	EXPECT_EQ(again.remaining, -2e6);
}

TEST(Decide, BackwardClockDenialCountsTheLag)
{
	/* stamp 10 s, now 9 s: refill resumes at 10 s, one token takes until 11 s */
	const Limit limit{1, 5};
	const Bucket stored{0, 10 * kSecond};
	Decision d = Decide(stored, limit, Take(1), 9 * kSecond);

	EXPECT_FALSE(d.allowed);
	EXPECT_FALSE(d.write);
	EXPECT_EQ(d.remaining, 0.0);
	EXPECT_EQ(d.retry_after, 2.0);
	EXPECT_EQ(d.reset_after, 6.0);
	ExpectSameBucket(d.next, stored);
	EXPECT_TRUE(Decide(stored, limit, Take(1), 11 * kSecond).allowed);
	EXPECT_FALSE(Decide(stored, limit, Take(1), 11 * kSecond - 1).allowed);
}

TEST(Decide, BackwardClockGrantKeepsTheStamp)
{
	Decision d = Decide(Bucket{3, 10 * kSecond}, Limit{1, 5}, Take(1), 9 * kSecond);

	EXPECT_TRUE(d.allowed);
	EXPECT_TRUE(d.write);
	EXPECT_EQ(d.remaining, 2.0);
	EXPECT_EQ(d.retry_after, 0.0);
	EXPECT_EQ(d.reset_after, 4.0);
	ExpectSameBucket(d.next, Bucket{2, 10 * kSecond});
}

TEST(Decide, BackwardClockReservationCountsTheLag)
{
	Decision d = Decide(Bucket{0, 10 * kSecond}, Limit{1, 5}, Reserve(1), 9 * kSecond);

	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, -1.0);
	EXPECT_EQ(d.retry_after, 2.0);
	EXPECT_EQ(d.reset_after, 7.0);
	ExpectSameBucket(d.next, Bucket{-1, 10 * kSecond});
}

TEST(Decide, BackwardClockWithRateZeroStaysInfinite)
{
	Decision d = Decide(Bucket{0, 10 * kSecond}, Limit{0, 5}, Take(1), 9 * kSecond);

	EXPECT_FALSE(d.allowed);
	EXPECT_EQ(d.retry_after, kInf);
	EXPECT_EQ(d.reset_after, kInf);
}

TEST(Decide, Int64OverflowForwardGivesFullBucket)
{
	Decision d = Decide(Bucket{-5, kInt64Min}, Limit{1, 10}, Take(4), kInt64Max);

	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 6.0);
	EXPECT_EQ(d.retry_after, 0.0);
	EXPECT_EQ(d.reset_after, 4.0);
	ExpectSameBucket(d.next, Bucket{6, kInt64Max});
}

/*
 * The mirror image: the stored stamp is far in the future and the clock
 * reads far in the past, so stamp - now does not fit in int64.  Run in a
 * child process, so that a sanitizer abort fails this test only.
 */
TEST(Decide, Int64OverflowBackwardIsDefined)
{
	EXPECT_EXIT(
	    {
		    /* A stamp that far ahead restarts at the clock (and must be
		     * stored); nothing overflows on the way. */
		    Decision d = Decide(Bucket{0, kInt64Max}, Limit{1, 10}, Take(1), kInt64Min);
		    bool sane = !d.allowed && d.write && d.remaining == 0.0 && d.retry_after == 1.0 &&
		                d.reset_after == 10.0 && d.next.stamp_us == kInt64Min;
		    std::exit(sane ? 0 : 1);
	    },
	    ::testing::ExitedWithCode(0), "");
}

/* ----------------------------------------------------------- extreme numbers */

TEST(ExtremeNumbers, HugeBurstTinyRateNeverNaN)
{
	const Limit limit{1e-300, 1e300};
	const Request requests[] = {Take(1),     Take(1e300),    Take(0),
	                            Take(1e-12), Reserve(1e300), ReserveCapped(1e300, 1e300)};

	for (const Request &r : requests) {
		ASSERT_EQ(Validate(limit, r), Status::kOk);
		Decision d = Decide(Bucket{0, kNow - kSecond}, limit, r, kNow);

		EXPECT_FALSE(std::isnan(d.remaining));
		EXPECT_FALSE(std::isnan(d.retry_after));
		EXPECT_FALSE(std::isnan(d.reset_after));
		EXPECT_FALSE(std::isnan(d.next.tokens));
		EXPECT_GE(d.retry_after, 0.0);
		EXPECT_GT(d.reset_after, 0.0);
	}
}

TEST(ExtremeNumbers, HugeBurstTinyRateDenialWaitsVeryLong)
{
	Decision d = Decide(Bucket{0, kNow}, Limit{1e-300, 1e300}, Take(1), kNow);

	EXPECT_FALSE(d.allowed);
	EXPECT_GT(d.retry_after, 1e290);
	EXPECT_GT(d.reset_after, 1e290);
}

TEST(ExtremeNumbers, FullHugeBucketGrantsHugeCost)
{
	const Limit limit{1, 1e300};
	Decision d = Decide(FullBucket(limit, kNow), limit, Take(1e300), kNow);

	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 0.0);
	EXPECT_DOUBLE_EQ(d.reset_after, 1e300);
}

TEST(ExtremeNumbers, TinyCostFromTinyBucket)
{
	const Limit limit{1e-12, 1e-12};
	Decision d = Decide(FullBucket(limit, kNow), limit, Take(1e-12), kNow);

	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 0.0);
	EXPECT_EQ(d.reset_after, 1.0);
	EXPECT_EQ(Refill(d.next, limit, kNow + kSecond).tokens, 1e-12);
}

} /* namespace */

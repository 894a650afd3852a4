/*
 * test/unit/limit_test.cpp
 *
 * A limit compares by value, its start balance included: every field takes
 * part in operator==, an initial balance equal to the burst is the same as
 * none, and a limit written as {rate, burst} or zeroed starts full.
 */
#include "test_helpers.hpp"

#include <cstring>

#include <gtest/gtest.h>

namespace {

using ratelimit::core::NewBucket;
using ratelimit::core::StartsBelowFull;
using ratelimit::core::StartTokens;

Limit
EveryField()
{
	Limit limit{2, 10};
	limit.window_us = 1000000;
	limit.phase_us = 250000;
	limit.floor_rate = 0.5;
	limit.penalty_us = 3000000;
	limit.has_initial = true;
	limit.initial = 4;
	return limit;
}

/* One field of EveryField() changed: the limits differ. */
struct FieldChange {
	const char *field;
	void (*change)(Limit &limit);
};

const FieldChange kFieldChanges[] = {
    {"rate", [](Limit &l) { l.rate = 3; }},
    {"burst", [](Limit &l) { l.burst = 11; }},
    {"window_us", [](Limit &l) { l.window_us = 2000000; }},
    {"phase_us", [](Limit &l) { l.phase_us = 0; }},
    {"floor_rate", [](Limit &l) { l.floor_rate = 0.25; }},
    {"penalty_us", [](Limit &l) { l.penalty_us = 0; }},
    {"has_initial", [](Limit &l) { l.has_initial = false; }},
    {"initial", [](Limit &l) { l.initial = 5; }},
    {"sliding", [](Limit &l) { l.sliding = true; }},
};

TEST(LimitEquality, EveryFieldTakesPart)
{
	const Limit base = EveryField();
	EXPECT_TRUE(base == EveryField());
	EXPECT_FALSE(base != EveryField());
	for (const FieldChange &c : kFieldChanges) {
		Limit other = EveryField();
		c.change(other);
		EXPECT_FALSE(base == other) << c.field;
		EXPECT_TRUE(base != other) << c.field;
		EXPECT_FALSE(other == base) << c.field;
	}
	/* Eight fields of eight bytes (has_initial and sliding padded): a field added to
	 * Limit changes the size, and must be listed above and compared. */
	EXPECT_EQ(sizeof(Limit), 64u);
}

/* Equal when a new key starts alike: an initial balance equal to the burst
 * is the same as none, and without has_initial the initial is not read. */
TEST(LimitEquality, ComparesWhatANewKeyStartsWith)
{
	Limit full{2, 10};
	Limit at_burst = full;
	at_burst.has_initial = true;
	at_burst.initial = 10;
	EXPECT_TRUE(full == at_burst);

	Limit unused = full;
	unused.initial = 3;
	EXPECT_TRUE(full == unused);

	Limit below = full;
	below.has_initial = true;
	below.initial = 3;
	EXPECT_TRUE(full != below);
}

TEST(LimitStart, DefaultAndZeroedLimitsStartFull)
{
	const Limit written{1, 5};
	EXPECT_FALSE(written.has_initial);
	EXPECT_EQ(StartTokens(written), 5.0);
	EXPECT_FALSE(StartsBelowFull(written));

	/* As palloc0 or shared memory leave it, then the rate and burst set. */
	Limit zeroed;
	std::memset(static_cast<void *>(&zeroed), 0, sizeof(zeroed));
	zeroed.rate = 1;
	zeroed.burst = 5;
	EXPECT_EQ(StartTokens(zeroed), 5.0);
	EXPECT_TRUE(zeroed == written);
}

TEST(LimitStart, InitialBalance)
{
	Limit limit{1, 5};
	limit.has_initial = true;
	limit.initial = 0;
	EXPECT_EQ(StartTokens(limit), 0.0);
	EXPECT_TRUE(StartsBelowFull(limit));
	const Bucket fresh = NewBucket(limit, 42);
	EXPECT_EQ(fresh.tokens, 0.0);
	EXPECT_EQ(fresh.stamp_us, 42);
	EXPECT_EQ(fresh.blocked_until_us, kNotBlocked);

	limit.initial = 5;
	EXPECT_FALSE(StartsBelowFull(limit));
	EXPECT_EQ(NewBucket(limit, 42).tokens, 5.0);
}

/* The algebra never reads the start balance: a bucket refills and decides
 * alike under a limit with or without one. */
TEST(LimitStart, AlgebraIgnoresIt)
{
	Limit plain{0.5, 8};
	Limit started = plain;
	started.has_initial = true;
	started.initial = 1;
	const Bucket stored{2.5, 1000000};
	const Request take = Request::Plain(3);
	const Decision a = Decide(stored, plain, take, 7000000);
	const Decision b = Decide(stored, started, take, 7000000);
	EXPECT_EQ(a.allowed, b.allowed);
	EXPECT_EQ(a.remaining, b.remaining);
	EXPECT_EQ(a.retry_after, b.retry_after);
	EXPECT_EQ(a.reset_after, b.reset_after);
	EXPECT_EQ(Refill(stored, plain, 9000000).tokens, Refill(stored, started, 9000000).tokens);
}

} /* namespace */

/*
 * test/unit/escrow_test.cpp
 *
 * The escrow, case by case: what test/specs/memory_escrow.spec,
 * test/sql/memory.sql and test/cluster/memory.sh show of the memory engine,
 * with the same numbers, at the level of the core.  The first cases are the
 * escrow's basic promises; each later one is a scenario the memory engine
 * once answered wrongly, named after what it now does, under a comment that
 * names the commit that corrected it (each fails if that correction is
 * undone in the core); the last, still open, is disabled.  Clocks are as
 * the SQL tests fix them: ratelimit.fixed_clock 2000000000 is kT0.
 */
#include "escrow_harness.hpp"

#include <cmath>
#include <cstdint>

#include <gtest/gtest.h>

namespace {

using namespace escrow_harness;
using ratelimit::core::Available;
using ratelimit::core::EscrowState;
using ratelimit::core::Forgettable;
using ratelimit::core::InvariantsHold;
using ratelimit::core::Listed;
using ratelimit::core::Remembered;
using ratelimit::core::SettledEscrow;

Limit
Policy(double rate, double burst)
{
	return Limit{rate, burst};
}

Limit
WithInitial(Limit limit, double initial)
{
	limit.has_initial = true;
	limit.initial = initial;
	return limit;
}

Limit
WithPenalty(Limit limit, std::int64_t penalty_us)
{
	limit.penalty_us = penalty_us;
	return limit;
}

/* What rate_limit_check(cost) answers on `slot` under `limit` at `now_us`. */
Decision
Look(Slot &slot, const Limit &limit, double cost, std::int64_t now_us)
{
	return Call(slot, nullptr, Check(cost), limit, now_us).decision;
}

/* A slot holding `tokens` committed at `now_us`, as a committed take
 * leaves it. */
Slot
Holding(const Limit &limit, double tokens, std::int64_t now_us)
{
	Slot slot;
	slot.used = true;
	slot.state = SettledEscrow(Bucket{tokens, now_us}, limit);
	return slot;
}

void
ExpectDecision(const Decision &d, bool allowed, double remaining)
{
	EXPECT_EQ(d.allowed, allowed);
	EXPECT_NEAR(d.remaining, remaining, 1e-9);
}

/* ------------------------------------------------------------- the basics */

/* memory_escrow.spec: bucket (mem, k) holds 2 and never refills. */
const Limit kMem = Policy(0, 10);

/* s1b s1take s2b s2take s2take obs s1a obs s2c obs: a pending take is
 * spent for the others; its abort gives it back. */
TEST(Escrow, APendingTakeIsSpentUntilItsAbortGivesItBack)
{
	Slot slot = Holding(kMem, 2, kT0);
	Transaction s1, s2;
	ExpectDecision(Call(slot, &s1, Take(1), kMem, kT0).decision, true, 1);
	ExpectDecision(Call(slot, &s2, Take(1), kMem, kT0).decision, true, 0);
	ExpectDecision(Call(slot, &s2, Take(1), kMem, kT0).decision, false, 0);
	ExpectDecision(Look(slot, kMem, 1, kT0), false, 0);
	End(slot, s1, false);
	ExpectDecision(Look(slot, kMem, 1, kT0), true, 0);
	End(slot, s2, true);
	ExpectDecision(Look(slot, kMem, 1, kT0), true, 0);
	EXPECT_EQ(slot.state.pending, 0.0);
	EXPECT_EQ(slot.state.bucket.tokens, 1.0);
}

/* s1b s1sp s1take2 s2take s1rbsp s2take s1c obs: a savepoint rolled back
 * gives back what was taken in it. */
TEST(Escrow, ASavepointRolledBackGivesBackItsTakes)
{
	Slot slot = Holding(kMem, 2, kT0);
	Transaction s1;
	const int savepoint = s1.subxact = s1.next_subxact++;
	ExpectDecision(Call(slot, &s1, Take(2), kMem, kT0).decision, true, 0);
	ExpectDecision(Call(slot, nullptr, Take(1), kMem, kT0).decision, false, 0);
	EndSubtransaction(slot, s1, savepoint, false, 1);
	s1.subxact = s1.next_subxact++;
	ExpectDecision(Call(slot, nullptr, Take(1), kMem, kT0).decision, true, 1);
	End(slot, s1, true);
	ExpectDecision(Look(slot, kMem, 1, kT0), true, 0);
}

/* s1b s1refund s2take s2take s2take s1c s2take obs: a refund counts only
 * once committed. */
TEST(Escrow, ARefundCountsOnceCommitted)
{
	Slot slot = Holding(kMem, 2, kT0);
	Transaction s1;
	ExpectDecision(Call(slot, &s1, GiveBack(1), kMem, kT0).decision, true, 3);
	ExpectDecision(Call(slot, nullptr, Take(1), kMem, kT0).decision, true, 1);
	ExpectDecision(Call(slot, nullptr, Take(1), kMem, kT0).decision, true, 0);
	ExpectDecision(Call(slot, nullptr, Take(1), kMem, kT0).decision, false, 0);
	End(slot, s1, true);
	ExpectDecision(Call(slot, nullptr, Take(1), kMem, kT0).decision, true, 0);
	ExpectDecision(Look(slot, kMem, 1, kT0), false, 0);
}

/* s1b s1reset s2take obs s1c obs, and s1b s1reset s1a obs: a reset empties
 * nothing until committed; then the key starts full. */
TEST(Escrow, AResetCountsOnceCommitted)
{
	Slot slot = Holding(kMem, 2, kT0);
	Transaction s1;
	ASSERT_TRUE(Reset(slot, s1));
	ExpectDecision(Call(slot, nullptr, Take(1), kMem, kT0).decision, true, 1);
	ExpectDecision(Look(slot, kMem, 1, kT0), true, 0);
	End(slot, s1, true);
	EXPECT_TRUE(slot.state.absent);
	ExpectDecision(Look(slot, kMem, 1, kT0), true, 9);

	Slot other = Holding(kMem, 2, kT0);
	Transaction rolled;
	ASSERT_TRUE(Reset(other, rolled));
	End(other, rolled, false);
	ExpectDecision(Look(other, kMem, 1, kT0), true, 1);
}

/* s1b s1box s2boxed s1a s2boxed, and s1b s1box s1c s2boxed: a penalty box
 * is stored at once, and lifted by an abort. */
TEST(Escrow, APenaltyBoxHoldsAtOnceAndAnAbortLiftsIt)
{
	const Limit boxed = WithPenalty(kMem, 3600 * kSecond);
	for (bool commit : {false, true}) {
		Slot slot = Holding(boxed, 2, kT0);
		Transaction s1;
		EXPECT_FALSE(Call(slot, &s1, Take(5), boxed, kT0).decision.allowed);
		EXPECT_FALSE(Call(slot, nullptr, Take(1), boxed, kT0).decision.allowed);
		End(slot, s1, commit);
		EXPECT_EQ(Call(slot, nullptr, Take(1), boxed, kT0).decision.allowed, !commit)
		    << (commit ? "committed" : "rolled back");
	}
}

/* -------------------------------------------------------------------------
 * Guards e075636, "Memory engine: a late commit never counts refill twice; a
 * deferred refund counts from when it was made; a rolled-back first sighting
 * is forgotten".
 */

/* memory.sh: 1 token a minute, burst 100 (a stamp restarts only 100
 * minutes ahead).  A take held open from kT0 commits after a take 105
 * minutes later moved the stamp on: it is taken from the bucket as it is,
 * without counting the refill since again. */
TEST(EscrowFix, ALateCommitNeverCountsRefillTwice)
{
	const Limit slow = Policy(1.0 / 60, 100);
	Slot slot;
	Transaction held;
	EXPECT_TRUE(Call(slot, &held, Take(1), slow, kT0).decision.allowed);
	EXPECT_TRUE(Call(slot, nullptr, Take(99), slow, kT0 + 6300 * kSecond).decision.allowed);
	End(slot, held, true);
	const Decision d = Call(slot, nullptr, Take(50), slow, kT0 + 6360 * kSecond).decision;
	EXPECT_FALSE(d.allowed);
	EXPECT_EQ(std::floor(d.remaining), 1.0); /* a minute's refill, not a burst */
}

/* memory.sql: 1 token a second up to 100, floor rate 10.  A refund in the
 * transaction of a take counts from when it was made: committed a second
 * later, the bucket has 11, as the table engine leaves it, not refill at
 * the floor rate in between. */
TEST(EscrowFix, ADeferredRefundCountsFromWhenItWasMade)
{
	Limit floor = Policy(1, 100);
	floor.floor_rate = 10;
	Slot slot;
	ExpectDecision(Call(slot, nullptr, Take(90), floor, kT0 + 300 * kSecond).decision, true, 10);
	Transaction t;
	ExpectDecision(Call(slot, &t, Take(10), floor, kT0 + 300 * kSecond).decision, true, 0);
	ExpectDecision(Call(slot, &t, GiveBack(10), floor, kT0 + 300 * kSecond).decision, true, 10);
	End(slot, t, true);
	ExpectDecision(Look(slot, floor, 0, kT0 + 301 * kSecond), true, 11);
}

/* memory.sql: 1 a second up to 100, new keys start with none, a box of 10
 * seconds.  A first sighting rolled back after penalty boxes of its own
 * transaction is forgotten: 100 seconds later the key starts afresh. */
TEST(EscrowFix, ARolledBackFirstSightingIsForgotten)
{
	const Limit sighting = WithPenalty(WithInitial(Policy(1, 100), 0), 10 * kSecond);
	Slot slot;
	Transaction t;
	ExpectDecision(Call(slot, &t, Take(1), sighting, kT0 + 400 * kSecond).decision, false, 0);
	ExpectDecision(Call(slot, &t, Take(50), sighting, kT0 + 415 * kSecond).decision, false, 0);
	ASSERT_TRUE(slot.used);
	End(slot, t, false);
	EXPECT_FALSE(slot.used) << "the sighting's slot is freed";
	ExpectDecision(Call(slot, nullptr, Take(50), sighting, kT0 + 500 * kSecond).decision, false, 0);
}

/* -------------------------------------------------------------------------
 * Guards 44d000d, "Memory engine: a first sighting still open no longer
 * hides others' commits".
 */

/* memory_escrow.spec: key new of mem-initial starts with 3 of 10, never
 * refilling.  s1b s1new s2new s2new s2new obsnew s1a obsnew: once another
 * take from the key commits, the others decide on what it left, not on the
 * key as new: the third take is denied. */
TEST(EscrowFix, AnOpenFirstSightingNoLongerHidesOthersCommits)
{
	const Limit initial = WithInitial(Policy(0, 10), 3);
	Slot slot;
	Transaction s1;
	ExpectDecision(Call(slot, &s1, Take(1), initial, kT0).decision, true, 2);
	ExpectDecision(Call(slot, nullptr, Take(1), initial, kT0).decision, true, 1);
	ExpectDecision(Call(slot, nullptr, Take(1), initial, kT0).decision, true, 0);
	ExpectDecision(Call(slot, nullptr, Take(1), initial, kT0).decision, false, 0);
	ExpectDecision(Look(slot, initial, 1, kT0), false, 0);
	End(slot, s1, false);
	ExpectDecision(Look(slot, initial, 1, kT0), true, 0);
}

/* s1b s1new s2new s1c obsnew. */
TEST(EscrowFix, BothTakesOnANewKeyCount)
{
	const Limit initial = WithInitial(Policy(0, 10), 3);
	Slot slot;
	Transaction s1;
	ExpectDecision(Call(slot, &s1, Take(1), initial, kT0).decision, true, 2);
	ExpectDecision(Call(slot, nullptr, Take(1), initial, kT0).decision, true, 1);
	End(slot, s1, true);
	ExpectDecision(Look(slot, initial, 1, kT0), true, 0);
}

/* -------------------------------------------------------------------------
 * Guards f003af7, "Memory engine: boxes hold on a key first seen by an open
 * transaction; refunds there settle nothing".
 */

/* Key new of mem-initial-boxed: 3 of 10, never refilling, a box of an
 * hour.  s1b s1ibox s1inew s1c s2inew: a box stored on a first sighting
 * still open holds for the sighting's own later takes, and for everyone's. */
TEST(EscrowFix, ABoxOnAnOpenFirstSightingHolds)
{
	const Limit boxed = WithPenalty(WithInitial(Policy(0, 10), 3), 3600 * kSecond);
	Slot slot;
	Transaction s1;
	EXPECT_FALSE(Call(slot, &s1, Take(5), boxed, kT0).decision.allowed);
	EXPECT_FALSE(Call(slot, &s1, Take(1), boxed, kT0).decision.allowed);
	End(slot, s1, true);
	EXPECT_FALSE(Call(slot, nullptr, Take(1), boxed, kT0).decision.allowed);
}

/* s1b s1inew s2ibox s2inew s1a s2inew: a box another transaction committed
 * meanwhile outlives the sighting's abort. */
TEST(EscrowFix, ACommittedBoxOutlivesTheSightingsAbort)
{
	const Limit boxed = WithPenalty(WithInitial(Policy(0, 10), 3), 3600 * kSecond);
	Slot slot;
	Transaction s1;
	EXPECT_TRUE(Call(slot, &s1, Take(1), boxed, kT0).decision.allowed);
	EXPECT_FALSE(Call(slot, nullptr, Take(5), boxed, kT0).decision.allowed);
	EXPECT_FALSE(Call(slot, nullptr, Take(1), boxed, kT0).decision.allowed);
	End(slot, s1, false);
	ASSERT_TRUE(slot.used);
	EXPECT_FALSE(Call(slot, nullptr, Take(1), boxed, kT0).decision.allowed);
}

/* mem-zero: 1 a second up to 10, new keys start with none; z1 at kT0, z2
 * five seconds later.  z1b z1refund z2take z1a z2take: a refund on a key
 * never seen, not yet committed, leaves the key new for the others. */
TEST(EscrowFix, ARefundOnANewKeySettlesNothing)
{
	const Limit zero = WithInitial(Policy(1, 10), 0);
	Slot slot;
	Transaction z1;
	ExpectDecision(Call(slot, &z1, GiveBack(1), zero, kT0).decision, true, 1);
	ExpectDecision(Call(slot, nullptr, Take(5), zero, kT0 + 5 * kSecond).decision, false, 0);
	End(slot, z1, false);
	ExpectDecision(Call(slot, nullptr, Take(5), zero, kT0 + 5 * kSecond).decision, false, 0);
}

/* -------------------------------------------------------------------------
 * Guards fa97cba, "Memory engine: a policy redefined under pending takes
 * grants no more than either definition".
 */

/* mem-redefined: rate 0, burst 10, new keys start with 3, then 8.
 * s1b s1rnew s0init s2rnew s1c obsr: the others count on no more than
 * either definition leaves: 2, not 7. */
TEST(EscrowFix, ARaisedStartUnderAPendingTakeGrantsNoMore)
{
	const Limit three = WithInitial(Policy(0, 10), 3);
	const Limit eight = WithInitial(Policy(0, 10), 8);
	Slot slot;
	Transaction s1;
	ExpectDecision(Call(slot, &s1, Take(1), three, kT0).decision, true, 2);
	ExpectDecision(Call(slot, nullptr, Take(7), eight, kT0).decision, false, 2);
	End(slot, s1, true);
	ExpectDecision(Look(slot, eight, 1, kT0), true, 1);
}

/* mem-rate: 1 a second up to 10, emptied at kT0, then 100 a second.
 * z2b z2rate s0rate z3rate z2c z3check: a raised rate credits nothing for
 * the time the pending take was decided on. */
TEST(EscrowFix, ARaisedRateUnderAPendingTakeCreditsNothing)
{
	const Limit one = Policy(1, 10), hundred = Policy(100, 10);
	Slot slot = Holding(one, 0, kT0);
	Transaction z2;
	ExpectDecision(Call(slot, &z2, Take(5), one, kT0 + 5 * kSecond).decision, true, 0);
	ExpectDecision(Call(slot, nullptr, Take(5), hundred, kT0 + 5 * kSecond).decision, false, 0);
	End(slot, z2, true);
	ExpectDecision(Look(slot, hundred, 1, kT0 + 5 * kSecond), false, 0);
}

/* -------------------------------------------------------------------------
 * Guards d6df072, "Memory engine: buckets of a redefined policy stay until a
 * call judges them again".
 */

/* memory.sh: a policy slowed down while its bucket is full under the limit
 * it last saw, short of full under the new one.  Written, the policy marks
 * the bucket kept: not forgettable although full under its own limit
 * (forgotten, it would come back full: a take of 50 granted, where the
 * bucket denies it), until a call under the new limit judges it. */
TEST(EscrowFix, ARedefinedPolicysBucketIsKeptUntilACallJudgesIt)
{
	const Limit before = Policy(1, 10), after = Policy(0, 100);
	Slot slot = Holding(before, 10, kT0);
	slot.kept = true; /* the policy was written with `after` */
	EXPECT_TRUE(Forgettable(slot.state, false, kT0)) << "full under the limit it last saw";
	EXPECT_FALSE(Forgettable(slot.state, slot.kept, kT0));
	EXPECT_FALSE(Call(slot, nullptr, Take(50), after, kT0).decision.allowed);
	EXPECT_TRUE(slot.kept) << "a denial judges nothing";
	const EscrowStep step = Call(slot, nullptr, Take(1), after, kT0);
	EXPECT_TRUE(step.decision.allowed);
	EXPECT_TRUE(step.record.relimits);
	EXPECT_FALSE(slot.kept);
	EXPECT_FALSE(Forgettable(slot.state, slot.kept, kT0)) << "9 of 100";
}

/* -------------------------------------------------------------------------
 * Guards feab87d, "Memory engine: a redefined policy counts in full once the
 * takes from before it end".
 */

/* z2b z2rate s0rate z4b z4rate z2c z4check z4c z4check: once the takes
 * decided under the old definition end, the new one counts in full,
 * though takes under it are still open. */
TEST(EscrowFix, ARedefinedLimitCountsInFullOnceTheOldTakesEnd)
{
	const Limit one = Policy(1, 10), hundred = Policy(100, 10);
	Slot slot = Holding(one, 0, kT0);
	Transaction z2, z4;
	ExpectDecision(Call(slot, &z2, Take(5), one, kT0 + 5 * kSecond).decision, true, 0);
	ExpectDecision(Call(slot, &z4, Take(1), hundred, kT0 + 6 * kSecond).decision, true, 0);
	EXPECT_EQ(slot.state.prior_holds, 1);
	End(slot, z2, true);
	EXPECT_EQ(slot.state.prior_holds, 0);
	ExpectDecision(Look(slot, hundred, 1, kT0 + 6 * kSecond), true, 8);
	End(slot, z4, true);
	ExpectDecision(Look(slot, hundred, 1, kT0 + 6 * kSecond), true, 8);
}

/* -------------------------------------------------------------------------
 * Guards af60594, "Memory engine: closes three more ways a redefinition
 * over-admitted; kept buckets wear off".
 */

/* z2b z2rate s0rate2 z4rate z2c z4check: a take under the new definition
 * (2 a second) that commits while one from before is open refills no more
 * than the old definition gives over that time. */
TEST(EscrowFix, ANewLimitsCommitRefillsNoMoreThanTheOld)
{
	const Limit one = Policy(1, 10), two = Policy(2, 10);
	Slot slot = Holding(one, 0, kT0);
	Transaction z2;
	ExpectDecision(Call(slot, &z2, Take(5), one, kT0 + 5 * kSecond).decision, true, 0);
	ExpectDecision(Call(slot, nullptr, Take(1), two, kT0 + 6 * kSecond).decision, true, 0);
	End(slot, z2, true);
	ExpectDecision(Look(slot, two, 1, kT0 + 6 * kSecond), false, 0);
}

/* z2b z2rate s0rate z3b z3refund s2b s2reset s2a z5rate z3a z2c: a reset
 * rolled back does not end the old definition's count. */
TEST(EscrowFix, AResetRolledBackKeepsTheOldDefinitionsCount)
{
	const Limit one = Policy(1, 10), hundred = Policy(100, 10);
	Slot slot = Holding(one, 0, kT0);
	Transaction z2, z3, s2;
	ExpectDecision(Call(slot, &z2, Take(5), one, kT0 + 5 * kSecond).decision, true, 0);
	EXPECT_TRUE(Call(slot, &z3, GiveBack(1), hundred, kT0 + 5 * kSecond).decision.allowed);
	ASSERT_TRUE(Reset(slot, s2));
	End(slot, s2, false);
	EXPECT_EQ(slot.state.prior_holds, 1);
	ExpectDecision(Call(slot, nullptr, Take(5), hundred, kT0 + 5 * kSecond).decision, false, 0);
	End(slot, z3, false);
	End(slot, z2, true);
}

/* z2b z2rate s0rate z3b z3refund s0rate3 z4b z4refund z3a z4a z5rate z2c:
 * redefined twice (100, then 200 a second) while a take from the first
 * definition is open: until it ends, no refill is counted. */
TEST(EscrowFix, RedefinedTwiceUnderAnOpenTakeCountsNoRefill)
{
	const Limit one = Policy(1, 10), hundred = Policy(100, 10), two_hundred = Policy(200, 10);
	Slot slot = Holding(one, 0, kT0);
	Transaction z2, z3, z4;
	ExpectDecision(Call(slot, &z2, Take(5), one, kT0 + 5 * kSecond).decision, true, 0);
	EXPECT_TRUE(Call(slot, &z3, GiveBack(1), hundred, kT0 + 5 * kSecond).decision.allowed);
	EXPECT_TRUE(Call(slot, &z4, GiveBack(1), two_hundred, kT0 + 6 * kSecond).decision.allowed);
	EXPECT_EQ(slot.state.prior_limit.rate, 0.0);
	End(slot, z3, false);
	End(slot, z4, false);
	ExpectDecision(Call(slot, nullptr, Take(5), hundred, kT0 + 5 * kSecond).decision, false, -5);
	End(slot, z2, true);
}

/* -------------------------------------------------------------------------
 * Guards 6517fb3, "Memory engine: a penalty box rolled back leaves no refill
 * behind".
 */

/* memory.sql: 1 a second up to 10, a box of a second, emptied at +600.  A
 * box started at +605 and rolled back leaves the bucket as it was, refill
 * included: slowed to 1 an hour, the key holds 5 seconds of the slow rate
 * (0.001389), as the table leaves it, not the 5 tokens of the fast one. */
TEST(EscrowFix, ABoxRolledBackLeavesNoRefillBehind)
{
	const Limit fast = WithPenalty(Policy(1, 10), kSecond);
	const Limit slow = WithPenalty(Policy(1.0 / 3600, 10), kSecond);
	Slot slot;
	ExpectDecision(Call(slot, nullptr, Take(10), fast, kT0 + 600 * kSecond).decision, true, 0);
	Transaction t;
	ExpectDecision(Call(slot, &t, Take(10), fast, kT0 + 605 * kSecond).decision, false, 5);
	End(slot, t, false);
	ExpectDecision(Call(slot, nullptr, Take(5), slow, kT0 + 605 * kSecond).decision, false,
	               5.0 / 3600);
}

/* memory_escrow.spec, mem-slowbox: the same policy emptied at kT0, a box
 * started at +5, slowed to 1 an hour, a take of 5 at +7: denied while the
 * box is open (0.001944) and once it is rolled back; granted once it has
 * committed (its refill to +5 stored with it: 0.000556 left). */
TEST(EscrowFix, AnOpenBoxCountsNoRefillForTheOthers)
{
	const Limit fast = WithPenalty(Policy(1, 10), kSecond);
	const Limit slow = WithPenalty(Policy(1.0 / 3600, 10), kSecond);
	for (bool commit : {false, true}) {
		Slot slot = Holding(fast, 0, kT0);
		Transaction z5;
		ExpectDecision(Call(slot, &z5, Take(10), fast, kT0 + 5 * kSecond).decision, false, 5);
		if (!commit)
			ExpectDecision(Call(slot, nullptr, Take(5), slow, kT0 + 7 * kSecond).decision, false,
			               7.0 / 3600);
		End(slot, z5, commit);
		const Decision d = Call(slot, nullptr, Take(5), slow, kT0 + 7 * kSecond).decision;
		if (commit)
			ExpectDecision(d, true, 2.0 / 3600);
		else
			ExpectDecision(d, false, 7.0 / 3600);
	}
}

/* -------------------------------------------------------------------------
 * Guards 1db89b2, "Memory engine: a refund of nothing stores a first
 * sighting, as the table does".
 */

/* memory.sql: 1 a second up to 10, new keys start with none.  A refund of
 * nothing on a key never seen stores its first sighting, as the table does:
 * three seconds later the key holds 3. */
TEST(EscrowFix, ARefundOfNothingStoresAFirstSighting)
{
	const Limit zero = WithInitial(Policy(1, 10), 0);
	Slot slot;
	const EscrowStep step = Call(slot, nullptr, GiveBack(0), zero, kT0 + 605 * kSecond);
	EXPECT_TRUE(step.recorded);
	ExpectDecision(step.decision, true, 0);
	ExpectDecision(Look(slot, zero, 0, kT0 + 608 * kSecond), true, 3);
}

/* -------------------------------------------------------------------------
 * Guards df89324, "Memory engine: kept marks no longer pin buckets across a
 * restart or a rollback".
 */

/* A bucket saved kept comes back kept, not remembered: whether forgetting
 * it would change answers whatever its balance depends on its limit alone
 * (a new key starting below full), so that once a purge judges it, full,
 * it goes. */
TEST(EscrowFix, AKeptBucketIsNotRemembered)
{
	const Limit limit = Policy(1, 10);
	const EscrowState loaded = SettledEscrow(Bucket{10, kT0}, limit);
	EXPECT_FALSE(Remembered(loaded));
	EXPECT_FALSE(Forgettable(loaded, true, kT0));
	EXPECT_TRUE(Forgettable(loaded, false, kT0));
	const EscrowState starts_low = SettledEscrow(Bucket{10, kT0}, WithInitial(limit, 2));
	EXPECT_TRUE(Remembered(starts_low));
	EXPECT_FALSE(Forgettable(starts_low, false, kT0));
}

/* -------------------------------------------------------------------------
 * Guards d8b236a, "Memory engine: a call judged under a definition rolled
 * back leaves its bucket kept".
 */

/* memory.sh: rate 0, burst 100, 10 tokens left; inside a transaction (or
 * a savepoint) that redefines the burst as 5 and rolls back, a take judged
 * the bucket by a limit that never committed.  Full under it, the bucket
 * is kept until a call under the committed limit judges it again, and then
 * denies a take of 11, as the table does (forgetting it would grant it). */
TEST(EscrowFix, ACallUnderARolledBackDefinitionKeepsItsBucket)
{
	const Limit hundred = Policy(0, 100), five = Policy(0, 5);
	for (bool savepoint : {false, true}) {
		Slot slot = Holding(hundred, 10, kT0);
		Transaction t;
		if (savepoint)
			t.subxact = t.next_subxact++;
		EXPECT_TRUE(Call(slot, &t, Take(1), five, kT0).decision.allowed);
		if (savepoint)
			EndSubtransaction(slot, t, 2, false, 1);
		End(slot, t, savepoint);
		EXPECT_TRUE(slot.kept);
		EXPECT_TRUE(Forgettable(slot.state, false, kT0)) << "full under the limit of the call";
		EXPECT_FALSE(Forgettable(slot.state, slot.kept, kT0));
		EXPECT_FALSE(Call(slot, nullptr, Take(11), hundred, kT0).decision.allowed);
		Slot forgotten;
		EXPECT_TRUE(Call(forgotten, nullptr, Take(11), hundred, kT0).decision.allowed);
	}
}

/* Unless a call under another limit judged it since: that call's limit
 * counts then. */
TEST(EscrowFix, ACallJudgingTheBucketSinceDecides)
{
	const Limit hundred = Policy(0, 100), five = Policy(0, 5);
	Slot slot = Holding(hundred, 10, kT0);
	Transaction t;
	EXPECT_TRUE(Call(slot, &t, Take(1), five, kT0).decision.allowed);
	EXPECT_TRUE(Call(slot, nullptr, Take(1), hundred, kT0).decision.allowed);
	End(slot, t, false);
	EXPECT_FALSE(slot.kept);
}

/* -------------------------------------------------------------------------
 * Guards 086a376, "Memory engine: buckets stored while a redefinition is
 * open are kept too".
 */

/* The engine marks kept a bucket that a call stores new, or judges by
 * another limit, while a write of its policy is open: the record says
 * which (created, relimits), for a key never seen, one reset since, and a
 * call under a limit other than the last one recorded. */
TEST(EscrowFix, ARecordSaysWhetherItStoredOrRejudgedItsBucket)
{
	const Limit before = Policy(0, 10), after = Policy(0, 5);
	Slot slot;
	EscrowStep step = Call(slot, nullptr, Take(1), before, kT0);
	EXPECT_TRUE(step.record.created);
	EXPECT_FALSE(step.record.relimits);
	step = Call(slot, nullptr, Take(1), before, kT0);
	EXPECT_FALSE(step.record.created);
	EXPECT_FALSE(step.record.relimits);
	step = Call(slot, nullptr, Take(1), after, kT0);
	EXPECT_FALSE(step.record.created);
	EXPECT_TRUE(step.record.relimits);
	Transaction holds;
	EXPECT_TRUE(Call(slot, &holds, Take(1), after, kT0).decision.allowed);
	EXPECT_FALSE(ratelimit::core::Forget(slot.state));
	step = Call(slot, nullptr, Take(1), after, kT0);
	EXPECT_TRUE(step.record.created) << "reset since";
	End(slot, holds, false);
}

/* -------------------------------------------------------------------------
 * Over-admissions found by escrow_property_test.cpp and reduced by hand:
 * the escrow granted, or left, what the table engine would not.  Each case
 * asserts the table engine's answer, and says why the table gives it (a
 * call that finds another transaction's write in flight waits for it and
 * decides on what it left), and, in parentheses, what the escrow answered
 * before the commit named above it.
 */

/* -------------------------------------------------------------------------
 * Guards d14ed79, "Escrow: a take committed late is taken from the balance
 * capped at its burst".
 */

/* A take committed after the burst was lowered, when something else was
 * pending and the bucket's stamp is not before the take, is taken from the
 * balance capped at the new burst, as the call found it: 29 of a burst of
 * 40, lowered to 10 at the same instant; a take of 1 pending, then one of
 * 7 that commits first.  Table: 10 - 8 = 2 left.  (Taken from the balance
 * as stored, 29 - 8 = 21 would be read as 10.) */
TEST(EscrowOverAdmission, ACommitUnderALoweredBurstTakesFromTheCappedBalance)
{
	const Limit forty = Policy(2.5, 40), ten = Policy(2.5, 10);
	Slot slot = Holding(forty, 29, kT0);
	Transaction t1;
	EXPECT_TRUE(Call(slot, &t1, Take(1), ten, kT0).decision.allowed);
	EXPECT_TRUE(Call(slot, nullptr, Take(7), ten, kT0).decision.allowed);
	End(slot, t1, true);
	ExpectDecision(Look(slot, ten, 0, kT0), true, 2);
}

/* -------------------------------------------------------------------------
 * Guards 2812dd7, "Escrow: a call under a new limit compares both balances
 * refilled to now".
 */

/* A call under a new limit counts on no more than the limit kept from
 * before leaves also when nothing is pending (a refund, a box, a first
 * sighting or a reset open under the old limit): both balances are
 * compared refilled to now, each under its limit.  1 a second, emptied at
 * kT0; at +10s a refund of nothing under it is open; redefined to 10 a
 * second, a take of 50 at +10s.  Table: it waits for the refund;
 * committed, that stored {10 at +10s}: denied.  (Compared unrefilled, the
 * call refilled under the new limit alone: {0 at kT0} refilled 10 s at 10
 * a second, 100, granted.) */
TEST(EscrowOverAdmission, ANewLimitCountsOnTheOldWithNothingPending)
{
	const Limit one = Policy(1, 100), ten = Policy(10, 100);
	Slot slot = Holding(one, 0, kT0);
	Transaction t1;
	EXPECT_TRUE(Call(slot, &t1, GiveBack(0), one, kT0 + 10 * kSecond).recorded);
	EXPECT_FALSE(Call(slot, nullptr, Take(50), ten, kT0 + 10 * kSecond).decision.allowed);
	End(slot, t1, true);
}

/* -------------------------------------------------------------------------
 * Guards 8316d8d, "Escrow: a refund that would write on the committed
 * bucket is recorded".
 */

/* The same with a refund of nothing, which the table stores (its refill),
 * and so does the escrow, though it finds the bucket refilled already
 * because a take is pending. */
TEST(EscrowOverAdmission, ARefundOfNothingOverAPendingTakeStoresItsRefill)
{
	const Limit one = Policy(1, 100), two = Policy(2, 100);
	Slot slot = Holding(one, 0, kT0);
	Transaction t1;
	EXPECT_TRUE(Call(slot, &t1, Take(5), one, kT0 + 10 * kSecond).decision.allowed);
	EXPECT_TRUE(Call(slot, nullptr, GiveBack(0), one, kT0 + 10 * kSecond).decision.allowed);
	End(slot, t1, false);
	EXPECT_FALSE(Call(slot, nullptr, Take(20), two, kT0 + 11 * kSecond).decision.allowed);
}

/* A refund that caps the balance at a burst lowered below it is stored,
 * as the table stores it, also when it refunds nothing and follows others
 * of its transaction.  10 a second up to 40, full; in one transaction a
 * refund of 1, then, the policy lowered to 3, a refund of 2, then, back at
 * 40, a refund of 1.  Table: 40, 3, then 4.  (Not recorded, the second
 * left 40.) */
TEST(EscrowOverAdmission, ARefundUnderALoweredBurstCapsTheBalance)
{
	const Limit forty = Policy(10, 40), three = Policy(0.25, 3);
	Slot slot = Holding(forty, 40, kT0);
	Transaction t;
	EXPECT_TRUE(Call(slot, &t, GiveBack(1), forty, kT0 + kSecond).recorded);
	EXPECT_TRUE(Call(slot, &t, GiveBack(2), three, kT0 + kSecond).recorded);
	EXPECT_TRUE(Call(slot, &t, GiveBack(1), forty, kT0 + kSecond).recorded);
	End(slot, t, true);
	ExpectDecision(Look(slot, forty, 0, kT0 + kSecond), true, 4);
}

/* -------------------------------------------------------------------------
 * Guards a69ee16, "Escrow: a box decided over a pending take stores its
 * refill at commit".
 */

/* A penalty box started while another take is pending stores at its
 * commit the refill the table stores with it, as one decided with nothing
 * pending does.  Once the take aborts, the bucket counts no refill from
 * before the box: redefined to refill faster, the faster rate is not
 * credited over time the table credited at the old one.  Table: the box's
 * denial waits for the take, which aborts; it stores {10 at +10s}; at +11s
 * under 2 a second that is 12: a take of 20 is denied.  (Without that
 * refill: {0 at kT0} refilled 11 s at 2 a second, 22, granted.) */
TEST(EscrowOverAdmission, ABoxDecidedOverAPendingTakeStoresItsRefill)
{
	const Limit one = WithPenalty(Policy(1, 100), kSecond);
	const Limit two = WithPenalty(Policy(2, 100), kSecond);
	Slot slot = Holding(one, 0, kT0);
	Transaction t1;
	EXPECT_TRUE(Call(slot, &t1, Take(5), one, kT0 + 10 * kSecond).decision.allowed);
	EXPECT_FALSE(Call(slot, nullptr, Take(50), one, kT0 + 10 * kSecond).decision.allowed);
	End(slot, t1, false);
	EXPECT_FALSE(Call(slot, nullptr, Take(20), two, kT0 + 11 * kSecond).decision.allowed);
}

/* -------------------------------------------------------------------------
 * Guards 9aac9b5, "Escrow: a refund leaving a new key full does not keep it
 * from being forgotten".
 */

/* A refund decided over a pending take on a key never seen finds it short
 * of full and is recorded; its commit leaves the bucket full, as the key
 * starts, and when the take aborts the bucket is forgotten with it.  The
 * table's refund waits for the take, finds the key new and full, and
 * stores nothing.  Alike while the limit stays; redefined so that new keys
 * start below full, a stored bucket would be full again at once, where the
 * table's key starts anew.  1 a second up to 1; then 50 a second up to 3,
 * new keys starting with 1: a take of 2 a second later.  Table: 1 (new),
 * denied.  (Kept: {1 at kT0} refilled, 3, granted.) */
TEST(EscrowOverAdmission, ARefundOverATakeThatAbortsStoresNoBucket)
{
	const Limit one = Policy(1, 1);
	const Limit later = WithInitial(Policy(50, 3), 1);
	Slot slot;
	Transaction t1;
	EXPECT_TRUE(Call(slot, &t1, Take(1), one, kT0).decision.allowed);
	EXPECT_TRUE(Call(slot, nullptr, GiveBack(1), one, kT0).recorded);
	End(slot, t1, false);
	EXPECT_FALSE(Call(slot, nullptr, Take(2), later, kT0 + kSecond).decision.allowed);
}

/* -------------------------------------------------------------------------
 * Guards 640f1fd, "Escrow: a refund committed late adds no more than refill
 * left room for".
 */

/* A refund applied at its commit does not escape the cap that refill met
 * meanwhile: it adds no more than its amount less the refill counted
 * since.  1 a second up to 10, 5 left at kT0; a refund of 5 then, open; at
 * +5s another transaction takes 5 and commits; the refund commits.  Table:
 * the refund fills the bucket at kT0; the take waits for it and finds 10
 * (refill capped): 5 left, and a take of 10 is denied.  (The take leaving
 * 5 at +5s and the refund adding 5 would leave 10: granted.) */
TEST(EscrowOverAdmission, ARefundCommittedLateMeetsTheCapRefillMet)
{
	const Limit limit = Policy(1, 10);
	Slot slot = Holding(limit, 5, kT0);
	Transaction refunds;
	EXPECT_TRUE(Call(slot, &refunds, GiveBack(5), limit, kT0).recorded);
	EXPECT_TRUE(Call(slot, nullptr, Take(5), limit, kT0 + 5 * kSecond).decision.allowed);
	End(slot, refunds, true);
	EXPECT_FALSE(Call(slot, nullptr, Take(10), limit, kT0 + 5 * kSecond).decision.allowed);
}

/* -------------------------------------------------------------------------
 * Guards 8457597, "Escrow: calls count on what an open reset leaves; a
 * reset ends what came before it".
 */

/* A take decided while a reset of its key is open counts on no more than
 * the new key leaves either, since the reset may lower the balance (new
 * keys start with none here).  Table: the take waits for the reset, then
 * finds a new key with nothing: denied.  (Counted on the balance before
 * the reset, it was granted from the 10 there, and the key left 10 in debt
 * without any reservation.)  Alike when the reset is the taker's own,
 * earlier in its transaction. */
TEST(EscrowOverAdmission, ATakeDuringAResetCountsOnWhatTheResetLeaves)
{
	const Limit zero = WithInitial(Policy(1, 10), 0);
	{
		Slot slot = Holding(zero, 10, kT0);
		Transaction resets, takes;
		ASSERT_TRUE(Reset(slot, resets));
		EXPECT_FALSE(Call(slot, &takes, Take(10), zero, kT0).decision.allowed);
		End(slot, resets, true);
		End(slot, takes, true);
		EXPECT_GE(Available(slot.state, zero, kT0).tokens, 0.0);
	}
	{
		Slot slot = Holding(zero, 10, kT0);
		Transaction t1;
		ASSERT_TRUE(Reset(slot, t1));
		EXPECT_FALSE(Call(slot, &t1, Take(10), zero, kT0).decision.allowed);
		End(slot, t1, true);
		EXPECT_GE(Available(slot.state, zero, kT0).tokens, 0.0);
	}
}

/* Takes decided before a reset of their key and committed after it leave
 * nothing: they come before the reset, which leaves nothing of them.  1 a
 * second up to 10, new keys start with none; full at kT0, a take of 5
 * pending; a reset commits; the take commits.  At +10s a take of 3.
 * Table: the reset waits for the take, which wrote first; the key is new
 * after it, first seen at +10s with nothing: denied.  (Taken from a new
 * bucket that starts at the take's own instant, 0 - 5 at kT0 earned refill
 * for time before the reset, 5 at +10s: granted.) */
TEST(EscrowOverAdmission, TakesCommittedAfterAResetEarnNothingFromBeforeIt)
{
	const Limit zero = WithInitial(Policy(1, 10), 0);
	Slot slot = Holding(zero, 10, kT0);
	Transaction takes, resets;
	EXPECT_TRUE(Call(slot, &takes, Take(5), zero, kT0).decision.allowed);
	ASSERT_TRUE(Reset(slot, resets));
	End(slot, resets, true);
	End(slot, takes, true);
	EXPECT_FALSE(Call(slot, nullptr, Take(3), zero, kT0 + 10 * kSecond).decision.allowed);
}

/* A penalty box started after a reset in the same transaction outlives
 * the reset's commit, on the new key.  Never refilling, up to 10, new keys
 * start with 5, a box of an hour; 2 left.  In one transaction: a reset,
 * then a take of 8, denied, boxed.  Table: the take finds the new key (5),
 * is denied and stores its box with it: a take of 5 is denied for the
 * hour.  (Forgotten with the key, the box let it be granted.) */
TEST(EscrowOverAdmission, ABoxAfterAResetOutlivesTheResetsCommit)
{
	const Limit boxed = WithPenalty(WithInitial(Policy(0, 10), 5), 3600 * kSecond);
	Slot slot = Holding(boxed, 2, kT0);
	Transaction t1;
	ASSERT_TRUE(Reset(slot, t1));
	EXPECT_FALSE(Call(slot, &t1, Take(8), boxed, kT0).decision.allowed);
	End(slot, t1, true);
	EXPECT_FALSE(Call(slot, nullptr, Take(5), boxed, kT0 + kSecond).decision.allowed);
}

/* -------------------------------------------------------------------------
 * Guards 42e1627, "Escrow: after a reset, its transaction's later calls
 * leave the new key as the table does".
 */

/* A denial after a reset in the same transaction stores the first
 * sighting of the new key that starts below full, as the table does.  1 a
 * second up to 10, new keys start with none, 5 left; in one transaction a
 * reset, then a take of 8, denied.  Table: the take finds the new key, is
 * denied, and stores it, empty, at kT0; redefined never to refill, it
 * still holds nothing.  (Left absent, the key started full under the new
 * definition: a take of 1 granted.) */
TEST(EscrowOverAdmission, ADenialAfterAResetStoresTheNewKeysFirstSighting)
{
	const Limit zero = WithInitial(Policy(1, 10), 0), never = Policy(0, 10);
	Slot slot = Holding(zero, 5, kT0);
	Transaction t1;
	ASSERT_TRUE(Reset(slot, t1));
	EXPECT_FALSE(Call(slot, &t1, Take(8), zero, kT0).decision.allowed);
	End(slot, t1, true);
	EXPECT_FALSE(Call(slot, nullptr, Take(1), never, kT0 + kSecond).decision.allowed);
}

/* A refund after a reset in the same transaction, on a key that starts
 * full, stores nothing: the table's refund finds the key new, full.  1 a
 * second up to 10, 5 left; a reset, then a refund of 1.  Redefined so
 * that new keys start with none, the key holds nothing.  (Stored full,
 * it held 10: a take of 1 granted.) */
TEST(EscrowOverAdmission, ARefundAfterAResetOnAFullNewKeyStoresNothing)
{
	const Limit full = Policy(1, 10), zero = WithInitial(Policy(1, 10), 0);
	Slot slot = Holding(full, 5, kT0);
	Transaction t1;
	ASSERT_TRUE(Reset(slot, t1));
	EXPECT_TRUE(Call(slot, &t1, GiveBack(1), full, kT0).decision.allowed);
	End(slot, t1, true);
	EXPECT_FALSE(Call(slot, nullptr, Take(1), zero, kT0).decision.allowed);
}

/* A penalty box started after a reset outlives the commit of a take of
 * its transaction that stored the new key first.  10 a second up to 3, a
 * box of 2 seconds; in one transaction a reset, a take of 1 (granted from
 * the new key), then a take of 2.5, denied, boxed.  Table: the box holds:
 * a take of 1 at +0.1s is denied.  (Stored anew by the take's commit, the
 * key lost the box: granted.) */
TEST(EscrowOverAdmission, ABoxAfterAResetOutlivesAnEarlierTakesCommit)
{
	const Limit boxed = WithPenalty(Policy(10, 3), 2 * kSecond);
	Slot slot = Holding(boxed, 3, kT0);
	Transaction t1;
	ASSERT_TRUE(Reset(slot, t1));
	EXPECT_TRUE(Call(slot, &t1, Take(1), boxed, kT0).decision.allowed);
	const EscrowStep denial = Call(slot, &t1, Take(2.5), boxed, kT0);
	EXPECT_FALSE(denial.decision.allowed);
	EXPECT_TRUE(denial.record.boxed);
	End(slot, t1, true);
	EXPECT_FALSE(Call(slot, nullptr, Take(1), boxed, kT0 + kSecond / 10).decision.allowed);
}

/* A box started after a reset, on a key that starts full, where the escrow
 * denied only because of takes before the reset (which the reset ends),
 * does not store the new key with it: the table's take, on the new key,
 * full, is granted and stores what it leaves.  0.25 a second up to 10, a
 * box of 0.3 s; in one transaction takes of 2 and 3, a reset, a take of 9:
 * denied.  Table: 10 - 9 = 1; redefined to 1 a second up to 3, new keys
 * starting with 1, it holds 1.5 half a second later: a take of 2 is
 * denied.  (Stored full with the box, which has ended: 3, granted.) */
TEST(EscrowOverAdmission, ABoxAfterAResetStoresNoKeyThatStartsFull)
{
	const Limit boxed = WithPenalty(Policy(0.25, 10), 300000);
	const Limit later = WithPenalty(WithInitial(Policy(1, 3), 1), 300000);
	Slot slot = Holding(boxed, 10, kT0);
	Transaction t1;
	EXPECT_TRUE(Call(slot, &t1, Take(2), boxed, kT0).decision.allowed);
	EXPECT_TRUE(Call(slot, &t1, Take(3), boxed, kT0).decision.allowed);
	ASSERT_TRUE(Reset(slot, t1));
	EXPECT_FALSE(Call(slot, &t1, Take(9), boxed, kT0).decision.allowed);
	End(slot, t1, true);
	EXPECT_FALSE(Call(slot, nullptr, Take(2), later, kT0 + kSecond / 2).decision.allowed);
}

/* While a reset is open, a call counts on no more than the new key leaves
 * as the last recorded call starts it, which may have stored it first.
 * Never refilling, up to 10, 10 left; in one transaction a reset, a take
 * of 1 under a definition whose new keys start with none (denied: it
 * stores the new key, empty), then a take of 1 under one whose new keys
 * start with 5.  Table: the second take finds the key stored empty:
 * denied.  (Counted on a new key of the second definition: granted.) */
TEST(EscrowOverAdmission, ACallDuringAResetCountsOnTheNewKeyAsStoredFirst)
{
	const Limit none = WithInitial(Policy(0, 10), 0), five = WithInitial(Policy(0, 10), 5);
	Slot slot = Holding(none, 10, kT0);
	Transaction t1;
	ASSERT_TRUE(Reset(slot, t1));
	EXPECT_FALSE(Call(slot, &t1, Take(1), none, kT0).decision.allowed);
	EXPECT_FALSE(Call(slot, &t1, Take(1), five, kT0).decision.allowed);
	End(slot, t1, true);
}

/* -------------------------------------------------------------------------
 * Guards 3ec0867, "Escrow: three more over-admissions the property test
 * finds, one transaction at a time".
 */

/* A take denied while a reset is open, inside a box the reset ends, that
 * the new key alone would deny too, starts a box on the new key.  Never
 * refilling, up to 10, new keys start with 2, a box of an hour; 3 left.
 * In one transaction a take of 5, denied, boxed; a reset; a take of 5,
 * denied inside that box.  Table: the reset ends the first box; the second
 * take finds the new key (2), is denied, and starts its own: a take of 1
 * is denied.  (Without a box of its own, the new key granted it.) */
TEST(EscrowOverAdmission, ADenialDuringAResetBoxesTheNewKey)
{
	const Limit boxed = WithPenalty(WithInitial(Policy(0, 10), 2), 3600 * kSecond);
	Slot slot = Holding(boxed, 3, kT0);
	Transaction t1;
	EXPECT_FALSE(Call(slot, &t1, Take(5), boxed, kT0).decision.allowed);
	ASSERT_TRUE(Reset(slot, t1));
	EXPECT_FALSE(Call(slot, &t1, Take(5), boxed, kT0).decision.allowed);
	End(slot, t1, true);
	EXPECT_FALSE(Call(slot, nullptr, Take(1), boxed, kT0 + kSecond).decision.allowed);
}

/* A box on a key an open transaction stored new, under a limit whose new
 * keys start higher, keeps the balance that transaction stored.  50 a
 * second up to 3, new keys start with none; in one transaction a refund of
 * 1 (the key's first sighting), then, redefined to 10 a second up to 40
 * with a box, a take of 4: denied, boxed.  Table: 0 + 1 = 1, boxed.
 * (Stored as the new definition's new key, 40, capped at the refund's
 * commit: 3.) */
TEST(EscrowOverAdmission, ABoxOnAnOpenFirstSightingKeepsItsBalance)
{
	const Limit zero = WithInitial(Policy(50, 3), 0);
	const Limit boxed = WithPenalty(Policy(10, 40), 300000);
	Slot slot;
	Transaction t1;
	EXPECT_TRUE(Call(slot, &t1, GiveBack(1), zero, kT0).recorded);
	EXPECT_FALSE(Call(slot, &t1, Take(4), boxed, kT0).decision.allowed);
	End(slot, t1, true);
	ExpectDecision(Look(slot, boxed, 0, kT0), true, 1);
}

/* A refund under another limit than records still open were decided
 * under is recorded, so that its commit caps what they raised at its
 * burst.  1 a second up to 3, emptied at kT0; in one transaction a refund
 * of 2, then, redefined never to refill, up to 1, a refund of nothing.
 * Table: 2, then 1.  (Not recorded, the second left 2.) */
TEST(EscrowOverAdmission, ARefundUnderAnotherLimitCapsWhatOpenRefundsRaise)
{
	const Limit three = Policy(1, 3), one = Policy(0, 1), later = Policy(0.25, 3);
	Slot slot = Holding(three, 0, kT0);
	Transaction t1;
	EXPECT_TRUE(Call(slot, &t1, GiveBack(2), three, kT0).recorded);
	EXPECT_TRUE(Call(slot, &t1, GiveBack(0), one, kT0).recorded);
	End(slot, t1, true);
	ExpectDecision(Look(slot, later, 0, kT0), true, 1);
}

/* -------------------------------------------------------------------------
 * Still open: disabled, it asserts the table engine's answer.  Run it with
 * --gtest_also_run_disabled_tests.
 */

/* A take denied inside another transaction's penalty box, not yet
 * committed, starts no box of its own; when that box is rolled back the
 * key is left unboxed.  Never refilling, 2 left, a box of an hour.  Table:
 * the second denial waits for the first, which aborts, and then starts its
 * own box: a take of 1 is denied.  Escrow: granted.  What over-admits:
 * until the box the table starts would end (the penalty after that
 * denial), every take the balance allows, here 2 tokens; and that denial
 * stores no refill, so a policy then redefined to refill faster credits
 * the time before it at its new rate (the property test's kFollowBoxes).
 * Correcting it needs to know whether the box in place is committed: a
 * denial inside a committed box must start none, and the state does not
 * count the open ones. */
TEST(EscrowOverAdmission, DISABLED_ADenialInsideAnOpenBoxStartsABoxOfItsOwn)
{
	const Limit boxed = WithPenalty(Policy(0, 10), 3600 * kSecond);
	Slot slot = Holding(boxed, 2, kT0);
	Transaction t1;
	EXPECT_FALSE(Call(slot, &t1, Take(5), boxed, kT0).decision.allowed);
	EXPECT_FALSE(Call(slot, nullptr, Take(5), boxed, kT0).decision.allowed);
	End(slot, t1, false);
	EXPECT_FALSE(Call(slot, nullptr, Take(1), boxed, kT0).decision.allowed);
}

/* ------------------------------------------------------- helpers, invariants */

TEST(EscrowState, ListedAndAvailableSpendWhatIsPending)
{
	const Limit limit = Policy(1, 10);
	Slot slot = Holding(limit, 4, kT0);
	Transaction t;
	EXPECT_TRUE(Call(slot, &t, Take(3), limit, kT0).decision.allowed);
	const Bucket listed = Listed(slot.state, kT0 + 2 * kSecond);
	EXPECT_EQ(listed.tokens, 3.0);
	EXPECT_EQ(listed.stamp_us, kT0 + 2 * kSecond);
	EXPECT_EQ(Available(slot.state, limit, kT0 + 2 * kSecond).tokens, 3.0);
	EXPECT_FALSE(Forgettable(slot.state, false, kT0 + 100 * kSecond)) << "held";
	End(slot, t, true);
	EXPECT_EQ(Listed(slot.state, kT0 + 2 * kSecond).tokens, 1.0) << "as stored";
	EXPECT_FALSE(Forgettable(slot.state, false, kT0 + 8 * kSecond));
	EXPECT_TRUE(Forgettable(slot.state, false, kT0 + 9 * kSecond));
	EXPECT_FALSE(Forgettable(slot.state, true, kT0 + 9 * kSecond)) << "kept";
}

TEST(EscrowState, AKeyStartingBelowFullIsRemembered)
{
	const Limit initial = WithInitial(Policy(1, 10), 2);
	Slot slot;
	Call(slot, nullptr, Take(1), initial, kT0);
	EXPECT_TRUE(ratelimit::core::Remembered(slot.state));
	EXPECT_FALSE(Forgettable(slot.state, false, kT0 + 3600 * kSecond));
}

TEST(EscrowState, ForgettingAtOnceKeepsWhatIsPending)
{
	const Limit limit = Policy(0, 10);
	Slot slot = Holding(limit, 4, kT0);
	Transaction t;
	EXPECT_TRUE(Call(slot, &t, Take(3), limit, kT0).decision.allowed);
	EXPECT_FALSE(ratelimit::core::Forget(slot.state)) << "held: the slot stays";
	ExpectDecision(Look(slot, limit, 1, kT0), true, 6);
	End(slot, t, true);
	ExpectDecision(Look(slot, limit, 1, kT0), true, 6);
	EXPECT_TRUE(ratelimit::core::Forget(slot.state));
}

TEST(EscrowState, InvariantsDetectBrokenCounters)
{
	EscrowState state = SettledEscrow(Bucket{1, kT0}, Policy(1, 10));
	EXPECT_TRUE(InvariantsHold(state));
	EscrowState broken = state;
	broken.pending = 1;
	EXPECT_FALSE(InvariantsHold(broken)) << "pending without holds";
	broken = state;
	broken.holds = 1;
	broken.prior_holds = 2;
	EXPECT_FALSE(InvariantsHold(broken)) << "more prior holds than holds";
	broken = state;
	broken.holds = 1;
	broken.provisional = 2;
	EXPECT_FALSE(InvariantsHold(broken)) << "more sightings than holds";
	broken = state;
	broken.unsettled = true;
	EXPECT_FALSE(InvariantsHold(broken)) << "unsettled without a sighting";
	broken = state;
	broken.holds = -1;
	EXPECT_FALSE(InvariantsHold(broken));
}

} /* namespace */

/*
 * test/unit/shards_test.cpp
 *
 * Hot keys split over shards (src/core/shards.*): each shard's share of the
 * limit, plans over two shards and over many (one, several, deny) on
 * hand-computed cases, a check answering what the take would do, waits that
 * are exact for continuous refill, fixed windows and floor rates, the
 * canonical order of shard numbers, a long random run in which the shards
 * together never admit more than the whole limit, and one in which a call
 * as sharded keys make it (two shards, then every shard) is denied only
 * when the whole key cannot serve it and never reports less than it can.
 */
#include "shards.hpp"
#include "test_helpers.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace {

using ratelimit::core::CompareShards;
using ratelimit::core::kMaxShards;
using ratelimit::core::NeedsEveryShard;
using ratelimit::core::PlanShards;
using ratelimit::core::ShardOrder;
using ratelimit::core::ShardOutcome;
using ratelimit::core::ShardPlan;
using ratelimit::core::ShareOfShard;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr std::int64_t kSecond = ratelimit::core::kMicrosPerSecond;
/* An arbitrary "now" on a whole minute: 2025 in µs since the PostgreSQL epoch. */
constexpr std::int64_t kNow = INT64_C(13333333) * 60 * kSecond;

Request
Take(double cost)
{
	return Request{cost, false, false, 0.0};
}

/* One shard of 2: 1 token a second, 5 at most. */
const Limit kShard{1, 5};

/* ------------------------------------------------------------ the share */

TEST(ShareOfShard, DividesRateBurstFloorAndInitialKeepsWindowsAndBox)
{
	Limit whole{10, 100};
	whole.floor_rate = 4;
	whole.window_us = 60 * kSecond;
	whole.phase_us = 7;
	whole.penalty_us = 3 * kSecond;
	whole.has_initial = true;
	whole.initial = 20;
	const Limit share = ShareOfShard(whole, 4);
	EXPECT_EQ(share.rate, 2.5);
	EXPECT_EQ(share.burst, 25);
	EXPECT_EQ(share.floor_rate, 1);
	EXPECT_EQ(share.window_us, 60 * kSecond);
	EXPECT_EQ(share.phase_us, 7);
	EXPECT_EQ(share.penalty_us, 3 * kSecond);
	EXPECT_TRUE(share.has_initial);
	EXPECT_EQ(share.initial, 5);
}

/* ------------------------------------------------------------- the plan */

struct PlanCase {
	const char *what;
	double tokens[2]; /* stored at kNow */
	double cost;
	ShardPlan::Kind kind;
	int richest;
	double take[2];
	double after[2];
};

const PlanCase kPlanCases[] = {
    {"both full: the first", {5, 5}, 1, ShardPlan::kOne, 0, {1, 0}, {4, 5}},
    {"the richer alone", {2, 4}, 3, ShardPlan::kOne, 1, {0, 3}, {2, 1}},
    {"the richer exactly", {2, 4}, 4, ShardPlan::kOne, 1, {0, 4}, {2, 0}},
    {"several: all of the richer, the rest", {3, 4}, 6, ShardPlan::kSeveral, 1, {2, 4}, {1, 0}},
    {"several: equal shards", {2, 2}, 4, ShardPlan::kSeveral, 0, {2, 2}, {0, 0}},
    {"several: everything", {5, 5}, 10, ShardPlan::kSeveral, 0, {5, 5}, {0, 0}},
    {"deny: together too little", {3, 2}, 6, ShardPlan::kDeny, 0, {0, 0}, {3, 2}},
    {"deny: the other empty", {0, 4}, 5, ShardPlan::kDeny, 1, {0, 0}, {0, 4}},
    {"deny: both empty", {0, 0}, 1, ShardPlan::kDeny, 0, {0, 0}, {0, 0}},
    {"cost 0: granted, nothing taken", {0, 0}, 0, ShardPlan::kOne, 0, {0, 0}, {0, 0}},
    {"fractions", {0.25, 0.5}, 0.75, ShardPlan::kSeveral, 1, {0.25, 0.5}, {0, 0}},
};

TEST(PlanShards, MatchesHandComputedCases)
{
	for (const PlanCase &c : kPlanCases) {
		SCOPED_TRACE(c.what);
		const Bucket seen[2] = {{c.tokens[0], kNow}, {c.tokens[1], kNow}};
		const ShardPlan plan = PlanShards(seen, 2, kShard, Request::Plain(c.cost), kNow);
		EXPECT_EQ(plan.kind, c.kind);
		EXPECT_EQ(plan.richest, c.richest);
		for (int s = 0; s < 2; s++) {
			EXPECT_EQ(plan.cost[s], c.take[s]) << "shard " << s;
			EXPECT_EQ(plan.after[s].tokens, c.after[s]) << "shard " << s;
			EXPECT_EQ(plan.after[s].stamp_us, kNow) << "shard " << s;
		}
	}
}

TEST(PlanShards, DecidesOnBalancesRefilledToNow)
{
	/* Stored empty, but one of them 3 s ago: it holds 3 now. */
	const Bucket seen[2] = {{0, kNow}, {0, kNow - 3 * kSecond}};
	const ShardPlan plan = PlanShards(seen, 2, kShard, Request::Plain(2), kNow);
	EXPECT_EQ(plan.kind, ShardPlan::kOne);
	EXPECT_EQ(plan.richest, 1);
	EXPECT_EQ(plan.after[1].tokens, 1);
	EXPECT_EQ(plan.after[1].stamp_us, kNow);
	EXPECT_EQ(plan.after[0].tokens, 0);
}

/* Plans over many shards: the richest alone, or the richest ones, as few as
 * can serve the cost (shard order breaks ties), or a denial only when all
 * of them together hold too little. */
struct ManyCase {
	const char *what;
	int count;
	double tokens[8]; /* stored at kNow */
	double cost;
	ShardPlan::Kind kind;
	double take[8];
};

const ManyCase kManyCases[] = {
    {"the richest alone",
     8,
     {1, 2, 5, 0, 0, 3, 0, 1},
     4,
     ShardPlan::kOne,
     {0, 0, 4, 0, 0, 0, 0, 0}},
    {"the two richest",
     8,
     {1, 2, 5, 0, 0, 3, 0, 1},
     7,
     ShardPlan::kSeveral,
     {0, 0, 5, 0, 0, 2, 0, 0}},
    {"the three richest",
     8,
     {1, 2, 5, 0, 0, 3, 0, 1},
     9,
     ShardPlan::kSeveral,
     {0, 1, 5, 0, 0, 3, 0, 0}},
    {"all of them", 8, {1, 2, 5, 0, 0, 3, 0, 1}, 12, ShardPlan::kSeveral, {1, 2, 5, 0, 0, 3, 0, 1}},
    {"one short", 8, {1, 2, 5, 0, 0, 3, 0, 1}, 12.5, ShardPlan::kDeny, {0, 0, 0, 0, 0, 0, 0, 0}},
    {"equals: the first ones",
     8,
     {0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25},
     1,
     ShardPlan::kSeveral,
     {0.25, 0.25, 0.25, 0.25, 0, 0, 0, 0}},
    {"no two, but five", 5, {1, 1, 1, 1, 1}, 2.5, ShardPlan::kSeveral, {1, 1, 0.5, 0, 0}},
    {"one shard", 1, {3}, 2, ShardPlan::kOne, {2}},
    {"one shard, too little", 1, {3}, 4, ShardPlan::kDeny, {0}},
};

TEST(PlanShards, OverManyShardsTakesFromTheRichestFirst)
{
	for (const ManyCase &c : kManyCases) {
		SCOPED_TRACE(c.what);
		Bucket seen[8];
		for (int s = 0; s < c.count; s++)
			seen[s] = Bucket{c.tokens[s], kNow};
		const ShardPlan plan = PlanShards(seen, c.count, kShard, Request::Plain(c.cost), kNow);
		EXPECT_EQ(plan.kind, c.kind);
		double taken = 0;
		for (int s = 0; s < c.count; s++) {
			EXPECT_EQ(plan.cost[s], c.take[s]) << "shard " << s;
			EXPECT_EQ(plan.after[s].tokens, c.tokens[s] - c.take[s]) << "shard " << s;
			taken += plan.cost[s];
		}
		EXPECT_EQ(taken, c.kind == ShardPlan::kDeny ? 0 : c.cost);
	}
}

/* What a take does: Decide on each shard the plan draws on. */
bool
CarryOut(const ShardPlan &plan, Bucket *states, int count, const Limit &shard, std::int64_t now)
{
	if (plan.kind == ShardPlan::kDeny)
		return false;
	bool allowed = true;
	for (int s = 0; s < count; s++) {
		if (!(plan.cost[s] > 0))
			continue;
		const Decision d = Decide(states[s], shard, Take(plan.cost[s]), now);
		allowed = allowed && d.allowed;
		if (d.write)
			states[s] = d.next;
	}
	return allowed;
}

TEST(PlanShards, CheckAnswersWhatTheTakeDoes)
{
	std::mt19937_64 rng(11);
	for (int i = 0; i < 20000; i++) {
		const Bucket seen[2] = {{static_cast<double>(rng() % 501) / 100.0,
		                         kNow - static_cast<std::int64_t>(rng() % kSecond)},
		                        {static_cast<double>(rng() % 501) / 100.0,
		                         kNow - static_cast<std::int64_t>(rng() % kSecond)}};
		const double cost = static_cast<double>(rng() % 1001) / 100.0;
		const ShardPlan plan = PlanShards(seen, 2, kShard, Request::Plain(cost), kNow);
		const Decision check = ShardOutcome(plan.kind != ShardPlan::kDeny, plan.after, 2, kShard,
		                                    Request::Plain(cost), kNow);

		Bucket states[2] = {seen[0], seen[1]};
		const bool taken = CarryOut(plan, states, 2, kShard, kNow);
		ASSERT_EQ(taken, plan.kind != ShardPlan::kDeny);
		const Bucket after[2] = {Refill(states[0], kShard, kNow), Refill(states[1], kShard, kNow)};
		const Decision take = ShardOutcome(taken, after, 2, kShard, Request::Plain(cost), kNow);
		ASSERT_EQ(check.allowed, take.allowed);
		ASSERT_EQ(check.remaining, take.remaining);
		ASSERT_EQ(check.retry_after, take.retry_after);
		ASSERT_EQ(check.reset_after, take.reset_after);
		if (taken) {
			ASSERT_NEAR(after[0].tokens + after[1].tokens,
			            Refill(seen[0], kShard, kNow).tokens +
			                Refill(seen[1], kShard, kNow).tokens - cost,
			            1e-9);
		}
	}
}

/* ------------------------------------------------------------- the answer */

TEST(ShardOutcome, RemainingIsWhatTheShardsSeenHold)
{
	const Bucket after[2] = {{1, kNow}, {2, kNow}};
	const Decision d = ShardOutcome(true, after, 2, kShard, Request::Plain(1), kNow);
	EXPECT_TRUE(d.allowed);
	EXPECT_EQ(d.remaining, 3);
	EXPECT_EQ(d.retry_after, 0);
	EXPECT_EQ(d.reset_after, 4); /* the emptier shard: 4 tokens at 1 a second */
}

struct WaitCase {
	const char *what;
	Limit shard;
	double tokens[2];
	std::int64_t now; /* the shards are stored at now */
	double cost;
	double retry_after;
	double reset_after;
};

Limit
Window(double rate, double burst, std::int64_t window_us)
{
	Limit limit{rate, burst};
	limit.window_us = window_us;
	return limit;
}

Limit
Floor(double rate, double burst, double floor_rate)
{
	Limit limit{rate, burst};
	limit.floor_rate = floor_rate;
	return limit;
}

const WaitCase kWaitCases[] = {
    {"continuous: both refill", kShard, {0, 0}, kNow, 1, 0.5, 5},
    {"continuous: one full earns nothing", kShard, {5, 0}, kNow, 6, 1, 5},
    {"continuous: split once the sum is there", kShard, {3.5, 0}, kNow, 4, 0.25, 5},
    /* 5 tokens a minute each, emptied half a second into the minute */
    {"fixed window: the next one",
     Window(5.0 / 60, 5, 60 * kSecond),
     {0, 0},
     kNow + kSecond / 2,
     1,
     59.5,
     59.5},
    {"fixed window: both shards' next",
     Window(5.0 / 60, 5, 60 * kSecond),
     {0, 1},
     kNow + kSecond / 2,
     7,
     59.5,
     59.5},
    {"fixed window: two windows away",
     Window(1.0 / 60, 5, 60 * kSecond),
     {0, 0},
     kNow,
     3,
     120,
     300},
    /* 1 every two hours each, but 1 a second up to 1 token */
    {"floor rate: the fast part", Floor(1.0 / 7200, 5, 1), {0, 0}, kNow, 1, 0.5, 28801},
    {"floor rate: beyond the floor level", Floor(1.0 / 7200, 5, 1), {0, 0}, kNow, 3, 3601, 28801},
    {"no refill: never", Limit{0, 5}, {1, 1}, kNow, 3, kInf, kInf},
    {"floor only: never beyond the level", Floor(0, 5, 1), {0, 0}, kNow, 3, kInf, kInf},
    {"floor only: up to the level", Floor(0, 5, 1), {0, 0}, kNow, 2, 1, kInf},
};

TEST(ShardOutcome, WaitsMatchHandComputedCases)
{
	for (const WaitCase &c : kWaitCases) {
		SCOPED_TRACE(c.what);
		const Bucket after[2] = {{c.tokens[0], c.now}, {c.tokens[1], c.now}};
		const Decision d = ShardOutcome(false, after, 2, c.shard, Request::Plain(c.cost), c.now);
		EXPECT_FALSE(d.allowed);
		EXPECT_DOUBLE_EQ(d.retry_after, c.retry_after);
		EXPECT_DOUBLE_EQ(d.reset_after, c.reset_after);
	}
}

TEST(ShardOutcome, AboveTwoShardsNeverServed)
{
	const Bucket after[2] = {{5, kNow}, {5, kNow}};
	EXPECT_EQ(ShardOutcome(false, after, 2, kShard, Request::Plain(10.5), kNow).retry_after, kInf);
}

/* Waiting retry_after, the same plan over `count` shards grants; a
 * microsecond sooner it does not. */
void
ExpectExactWaits(const char *what, Limit (*make)(std::mt19937_64 &), int count, int runs)
{
	SCOPED_TRACE(what);
	SCOPED_TRACE(count);
	std::mt19937_64 rng(23);
	int checked = 0;
	for (int i = 0; i < runs; i++) {
		const Limit shard = make(rng);
		const std::int64_t now = kNow + static_cast<std::int64_t>(rng() % (120 * kSecond));
		Bucket after[kMaxShards];
		for (int s = 0; s < count; s++)
			after[s] = Bucket{
			    std::fmod(static_cast<double>(rng() % 10000) / 100.0 / (count / 2), shard.burst),
			    now - static_cast<std::int64_t>(rng() % (5 * kSecond))};
		const double cost = std::fmod(static_cast<double>(rng() % 20000) / 100.0, 2 * shard.burst);
		if (PlanShards(after, count, shard, Request::Plain(cost), now).kind != ShardPlan::kDeny)
			continue;
		const Decision d = ShardOutcome(false, after, count, shard, Request::Plain(cost), now);
		if (!std::isfinite(d.retry_after))
			continue;
		const std::int64_t wait = std::llround(d.retry_after * kSecond);
		ASSERT_EQ(static_cast<double>(wait) / kSecond, d.retry_after) << "whole microseconds";
		ASSERT_GE(wait, 1);
		ASSERT_NE(PlanShards(after, count, shard, Request::Plain(cost), now + wait).kind,
		          ShardPlan::kDeny)
		    << "retry_after " << d.retry_after << " is not enough";
		ASSERT_EQ(PlanShards(after, count, shard, Request::Plain(cost), now + wait - 1).kind,
		          ShardPlan::kDeny)
		    << "retry_after " << d.retry_after << " is longer than needed";
		checked++;
	}
	EXPECT_GT(checked, runs / 10);
}

Limit
RandomContinuous(std::mt19937_64 &rng)
{
	return Limit{static_cast<double>(rng() % 1000 + 1) / 1000.0,
	             static_cast<double>(rng() % 1000 + 1) / 10.0};
}

Limit
RandomWindow(std::mt19937_64 &rng)
{
	Limit limit{static_cast<double>(rng() % 1000 + 1) / 1000.0,
	            static_cast<double>(rng() % 1000 + 1) / 10.0};
	limit.window_us = static_cast<std::int64_t>(rng() % (90 * kSecond) + 1);
	limit.phase_us = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(limit.window_us));
	return limit;
}

Limit
RandomFloor(std::mt19937_64 &rng)
{
	Limit limit{static_cast<double>(rng() % 1000) / 100000.0,
	            static_cast<double>(rng() % 1000 + 1) / 10.0};
	limit.floor_rate = static_cast<double>(rng() % 5000 + 1) / 1000.0;
	return limit;
}

TEST(ShardOutcome, WaitsAreExactForContinuousRefill)
{
	ExpectExactWaits("continuous", RandomContinuous, 2, 20000);
	ExpectExactWaits("continuous", RandomContinuous, 8, 5000);
}

TEST(ShardOutcome, WaitsAreExactForFixedWindows)
{
	ExpectExactWaits("fixed windows", RandomWindow, 2, 20000);
	ExpectExactWaits("fixed windows", RandomWindow, 8, 5000);
}

TEST(ShardOutcome, WaitsAreExactForFloorRates)
{
	ExpectExactWaits("floor rates", RandomFloor, 2, 20000);
	ExpectExactWaits("floor rates", RandomFloor, 8, 5000);
}

/* ------------------------------------------------------ canonical order */

TEST(ShardOrder, BytewiseOrderOfDecimalForms)
{
	EXPECT_LT(CompareShards(1, 10), 0);
	EXPECT_LT(CompareShards(10, 2), 0);
	EXPECT_GT(CompareShards(9, 63), 0);
	EXPECT_EQ(CompareShards(7, 7), 0);
	EXPECT_LT(CompareShards(0, 1), 0);

	int order[64];
	ShardOrder(12, order);
	const int expected[12] = {0, 1, 10, 11, 2, 3, 4, 5, 6, 7, 8, 9};
	for (int i = 0; i < 12; i++)
		EXPECT_EQ(order[i], expected[i]) << "position " << i;

	for (int shards = 1; shards <= 64; shards++) {
		std::vector<std::string> names;
		for (int s = 0; s < shards; s++)
			names.push_back(std::to_string(s));
		std::sort(names.begin(), names.end());
		ShardOrder(shards, order);
		for (int i = 0; i < shards; i++)
			ASSERT_EQ(std::to_string(order[i]), names[i]) << shards << " shards, position " << i;
	}
}

/* ------------------------------------------------- a call, as made */

/*
 * A call of `cost` on a key whose `shards` shards stand at `state`, made as
 * src/pg/sharding.cpp makes it: shards `first` and `second` looked at, the
 * richer taken from if it serves the call alone, and counted alone unless
 * NeedsEveryShard; otherwise every shard planned over.  A take (`take`)
 * stores what it consumes in `state`.
 */
Decision
ShardedCall(Bucket *state, int shards, int first, int second, const Limit &shard, double cost,
            std::int64_t now, bool take)
{
	Bucket pair[2] = {state[first], state[second]};
	const ShardPlan two = PlanShards(pair, 2, shard, Request::Plain(cost), now);
	if (two.kind == ShardPlan::kOne) {
		pair[two.richest] = two.after[two.richest];
		if (take) {
			state[first] = pair[0];
			state[second] = pair[1];
		}
		const Decision answer = ShardOutcome(true, pair, 2, shard, Request::Plain(cost), now);
		if (!NeedsEveryShard(answer.remaining, cost))
			return answer;
		Bucket all[kMaxShards];
		for (int s = 0; s < shards; s++)
			all[s] = s == first ? pair[0] : s == second ? pair[1] : state[s];
		return ShardOutcome(true, all, shards, shard, Request::Plain(cost), now);
	}
	const ShardPlan every = PlanShards(state, shards, shard, Request::Plain(cost), now);
	const bool allowed = every.kind != ShardPlan::kDeny;
	if (!allowed)
		return ShardOutcome(false, state, shards, shard, Request::Plain(cost), now);
	if (take)
		for (int s = 0; s < shards; s++)
			state[s] = every.after[s];
	return ShardOutcome(true, every.after, shards, shard, Request::Plain(cost), now);
}

/* What all `shards` shards hold together at `now`. */
double
Total(const Bucket *state, int shards, const Limit &shard, std::int64_t now)
{
	double total = 0;
	for (int s = 0; s < shards; s++)
		total += Refill(state[s], shard, now).tokens;
	return total;
}

/*
 * Random keys over `shards` shards, random pairs, random costs up to what
 * two shards hold: a call is denied only when the shards together hold less
 * than its cost, and then reports exactly what they hold; granted, its
 * remaining never exceeds what is left, and is below the cost or one token
 * only when the whole key holds that little; and a denial's retry_after is
 * honoured by the call itself, whichever pair it looks at then.
 */
TEST(ShardsProperty, ACallIsDeniedOnlyWhenTheKeyCannotServeIt)
{
	std::mt19937_64 rng(31);
	int denied = 0;
	int widened = 0;
	for (int shards : {2, 3, 8, 64}) {
		SCOPED_TRACE(shards);
		const Limit shard{0.5, 4};
		for (int i = 0; i < 20000; i++) {
			Bucket state[kMaxShards];
			/* Mostly poor shards, now and then a rich one. */
			for (int s = 0; s < shards; s++)
				state[s] = Bucket{rng() % 8 == 0 ? static_cast<double>(rng() % 401) / 100.0
				                                 : static_cast<double>(rng() % 41) / 100.0,
				                  kNow - static_cast<std::int64_t>(rng() % kSecond)};
			const int first = static_cast<int>(rng() % static_cast<std::uint64_t>(shards));
			const int second =
			    (first + 1 + static_cast<int>(rng() % static_cast<std::uint64_t>(shards - 1))) %
			    shards;
			const double cost = static_cast<double>(rng() % 801) / 100.0;
			const double before = Total(state, shards, shard, kNow);
			Bucket taken[kMaxShards];
			std::copy(state, state + shards, taken);
			const Decision check =
			    ShardedCall(state, shards, first, second, shard, cost, kNow, false);
			const Decision d = ShardedCall(taken, shards, first, second, shard, cost, kNow, true);
			ASSERT_EQ(check.allowed, d.allowed);
			ASSERT_EQ(check.remaining, d.remaining);
			if (!d.allowed) {
				denied++;
				ASSERT_LT(before, cost + 1e-9) << "denied while the key could serve it";
				ASSERT_NEAR(d.remaining, before, 1e-9);
				ASSERT_GT(d.retry_after, 0);
				if (!std::isfinite(d.retry_after))
					continue;
				const std::int64_t wait = std::llround(d.retry_after * kSecond);
				for (int p = 0; p < 4; p++) {
					const int a = static_cast<int>(rng() % static_cast<std::uint64_t>(shards));
					const int b =
					    (a + 1 + static_cast<int>(rng() % static_cast<std::uint64_t>(shards - 1))) %
					    shards;
					ASSERT_TRUE(
					    ShardedCall(state, shards, a, b, shard, cost, kNow + wait, false).allowed)
					    << "retry_after " << d.retry_after << " is not enough";
				}
				ASSERT_FALSE(
				    ShardedCall(state, shards, first, second, shard, cost, kNow + wait - 1, false)
				        .allowed)
				    << "retry_after " << d.retry_after << " is longer than needed";
				continue;
			}
			const double left = Total(taken, shards, shard, kNow);
			ASSERT_NEAR(left, before - cost, 1e-9);
			ASSERT_LE(d.remaining, left + 1e-9) << "more than is left";
			if (left >= cost) {
				ASSERT_GE(d.remaining, cost - 1e-9) << "below the cost while the key serves it";
			}
			if (left >= 1) {
				ASSERT_GE(d.remaining, 1 - 1e-9) << "below one token while the key holds it";
			}
			if (d.remaining < 1 || d.remaining < cost) {
				widened++;
				ASSERT_NEAR(d.remaining, left, 1e-9) << "not every shard counted";
			}
		}
	}
	EXPECT_GT(denied, 1000);
	EXPECT_GT(widened, 1000);
}

/* ------------------------------------------------------- admission bound */

/*
 * Many callers on one key split over `shards` rows, each call made as sharded
 * keys make it: the shards together never grant more than the whole limit
 * would (burst plus what it refills since the start), and no shard goes
 * negative.
 */
void
ExpectWithinWholeLimit(const Limit &whole, int shards, std::uint64_t seed)
{
	SCOPED_TRACE(shards);
	std::mt19937_64 rng(seed);
	const Limit shard = ShareOfShard(whole, shards);
	Bucket state[64];
	for (int s = 0; s < shards; s++)
		state[s] = Bucket{shard.burst, kNow};
	std::int64_t now = kNow;
	double granted = 0.0;
	std::int64_t denials = 0;
	for (int i = 0; i < 200000; i++) {
		now += static_cast<std::int64_t>(rng() % (kSecond / 20));
		const int first = static_cast<int>(rng() % static_cast<std::uint64_t>(shards));
		const int second =
		    (first + 1 + static_cast<int>(rng() % static_cast<std::uint64_t>(shards - 1))) % shards;
		const double cost = std::fmod(static_cast<double>(rng() % 1000) / 100.0, 2 * shard.burst);
		if (ShardedCall(state, shards, first, second, shard, cost, now, true).allowed)
			granted += cost;
		else
			denials++;
		for (int s = 0; s < shards; s++)
			ASSERT_GE(state[s].tokens, 0.0);
		double refilled = whole.rate * static_cast<double>(now - kNow) / kSecond;
		if (whole.window_us > 0)
			refilled = whole.rate * static_cast<double>(whole.window_us) / kSecond *
			           static_cast<double>((now - whole.phase_us) / whole.window_us -
			                               (kNow - whole.phase_us) / whole.window_us);
		ASSERT_LE(granted, whole.burst + refilled + 1e-6) << "after " << i << " calls";
	}
	EXPECT_GT(denials, 1000); /* overloaded: the bound was tested */
}

TEST(ShardsProperty, NeverAdmitMoreThanTheWholeLimit)
{
	for (int shards : {2, 3, 8, 64})
		ExpectWithinWholeLimit(Limit{20, 40}, shards, 101 + shards);
}

TEST(ShardsProperty, NeverAdmitMoreThanTheWholeLimitWithFixedWindows)
{
	for (int shards : {2, 5, 16})
		ExpectWithinWholeLimit(Window(20, 40, 3 * kSecond), shards, 202 + shards);
}

} /* namespace */

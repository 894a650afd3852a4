/*
 * src/pg/sharding.cpp
 *
 * Sharded keys in storage.  The plan (which shard gives what) and the
 * answer's numbers come from src/core/shards.hpp; this file reads the shard
 * rows, carries the plan out through storage and keeps every multi-row
 * write in canonical order, the order TakeAll locks rows in: a shard's row
 * key is the key, U+001F and its number, so the order of the rows of one key
 * is core::CompareShards' order of their numbers.  Only plain data is alive
 * here: a PostgreSQL error is a longjmp that skips C++ destructors.
 */
#include "pg/sharding.hpp"

#include "core/shards.hpp"
#include "pg/clock.hpp"
#include "pg/errors.hpp"

namespace ratelimit::pg {

namespace {

const core::Request kNothing = core::Request::Plain(0.0);

/* `kind` on one shard: a shard never seen before starts at its share of the
 * policy's initial balance. */
Operation
ShardOperation(Operation::Kind kind, const core::Request &request, double amount,
               const Policy &policy, const core::ShardShare &share)
{
	return Operation{kind, request, amount, policy.has_initial, share.initial};
}

/* Positions 0 and 1 of two shards in canonical order. */
void
PairOrder(const int numbers[2], int order[2])
{
	const bool swapped = core::CompareShards(numbers[0], numbers[1]) > 0;
	order[0] = swapped ? 1 : 0;
	order[1] = swapped ? 0 : 1;
}

/* Takes plan.cost[s] from shard s, both or neither; after[s]: how each stands. */
bool
TakeFromBoth(text *name, text *const keys[2], const int numbers[2], const Policy &policy,
             const core::ShardShare &share, const core::ShardPlan &plan, core::Bucket after[2])
{
	int order[2];
	PairOrder(numbers, order);
	BucketTake takes[2];
	for (int t = 0; t < 2; t++) {
		const int s = order[t];
		takes[t] = BucketTake{name,
		                      keys[s],
		                      share.limit,
		                      core::Request::Plain(plan.cost[s]),
		                      policy.has_initial,
		                      share.initial,
		                      core::Decision{}};
	}
	const bool allowed = TakeAll(takes, 2);
	for (int t = 0; t < 2; t++)
		after[order[t]] = takes[t].decision.next;
	return allowed;
}

} /* namespace */

text *
ShardKey(text *key, int shard)
{
	char suffix[16];
	int suffix_bytes = snprintf(suffix, sizeof(suffix), "\x1f%d", shard);
	int key_bytes = VARSIZE_ANY_EXHDR(key);
	text *result = static_cast<text *>(palloc(VARHDRSZ + key_bytes + suffix_bytes));
	SET_VARSIZE(result, VARHDRSZ + key_bytes + suffix_bytes);
	memcpy(VARDATA(result), VARDATA_ANY(key), key_bytes);
	memcpy(VARDATA(result) + key_bytes, suffix, suffix_bytes);
	return result;
}

core::Decision
ShardedDecision(text *name, text *key, const Policy &policy, const core::Limit &limit,
                Operation::Kind kind, double cost)
{
	const int shards = policy.shards;
	const core::ShardShare share = core::ShareOfShard(limit, policy.initial, shards);
	const core::Limit &shard = share.limit;
	if (cost > 2.0 * shard.burst)
		ReportShardedCost(cost, 2.0 * shard.burst, shards);

	int numbers[2];
	numbers[0] = RlRandomBelow(shards);
	numbers[1] = (numbers[0] + 1 + RlRandomBelow(shards - 1)) % shards;
	text *keys[2] = {ShardKey(key, numbers[0]), ShardKey(key, numbers[1])};
	/* Each shard as it stands, then as the call leaves it. */
	core::Bucket after[2];
	for (int s = 0; s < 2; s++)
		after[s] = DecideBucket(name, keys[s], shard,
		                        ShardOperation(Operation::kPeek, kNothing, 0.0, policy, share))
		               .next;
	core::ShardPlan plan = core::PlanShards(after, shard, cost, ClockNow());
	bool allowed = false;

	if (kind == Operation::kCheck) {
		allowed = plan.kind != core::ShardPlan::kDeny;
		if (allowed)
			for (int s = 0; s < 2; s++)
				after[s] = plan.after[s];
	} else {
		if (plan.kind == core::ShardPlan::kRicher) {
			const int richer = plan.richer;
			core::Decision d = DecideBucket(name, keys[richer], shard,
			                                ShardOperation(Operation::kTake,
			                                               core::Request::Plain(plan.cost[richer]),
			                                               0.0, policy, share));
			allowed = d.allowed;
			after[richer] = d.next;
			/* Others took from it meanwhile: what it still holds, and the rest
			 * from the other shard. */
			if (!allowed)
				plan = core::PlanSplit(after, richer, shard, cost, ClockNow());
		}
		if (plan.kind == core::ShardPlan::kSplit)
			allowed = TakeFromBoth(name, keys, numbers, policy, share, plan, after);
	}

	/* Denied shards never seen before still start earning now; recorded in
	 * canonical order, like any two rows one transaction writes. */
	const Operation record = ShardOperation(Operation::kRecordNew, kNothing, 0.0, policy, share);
	if (!allowed && kind == Operation::kTake && StartsBelowFull(record, shard)) {
		int order[2];
		PairOrder(numbers, order);
		for (int t = 0; t < 2; t++)
			(void)DecideBucket(name, keys[order[t]], shard, record);
	}

	return core::ShardOutcome(allowed, after, shard, shards, cost, ClockNow());
}

core::Decision
ShardedRefund(text *name, text *key, const Policy &policy, const core::Limit &limit, double amount)
{
	const int shards = policy.shards;
	const core::ShardShare share = core::ShareOfShard(limit, policy.initial, shards);
	int order[kMaxShards];
	core::ShardOrder(shards, order);

	core::Decision result{};
	result.allowed = true;
	double left = amount;
	for (int i = 0; i < shards; i++) {
		const Operation operation = ShardOperation(
		    left > 0.0 ? Operation::kRefund : Operation::kPeek, kNothing, left, policy, share);
		core::Decision d = DecideBucket(name, ShardKey(key, order[i]), share.limit, operation);
		if (operation.kind == Operation::kRefund)
			left -= d.refunded;
		result.remaining += d.remaining;
		if (d.reset_after > result.reset_after)
			result.reset_after = d.reset_after;
	}
	return result;
}

bool
ResetShards(text *name, text *key, const Policy &policy)
{
	if (policy.shards <= 1)
		return false;
	int order[kMaxShards];
	core::ShardOrder(policy.shards, order);
	bool existed = false;
	for (int i = 0; i < policy.shards; i++)
		if (ResetBucket(name, ShardKey(key, order[i])))
			existed = true;
	return existed;
}

} /* namespace ratelimit::pg */

/*
 * src/pg/sharding.cpp
 *
 * Sharded keys, in an engine that can shard (BucketEngine::can_shard).  The
 * plan (which shard gives what) and the answer's numbers come from
 * src/core/shards.hpp; this file reads the shard rows, carries the plan out
 * through the policy's engine and keeps every multi-row write in canonical
 * order, the order an all-or-nothing take locks rows in: a shard's row
 * key is the key, U+001F and its number, so the order of the rows of one key
 * is core::CompareShards' order of their numbers.  Only plain data is alive
 * here: a PostgreSQL error is a longjmp that skips C++ destructors.
 */
#include "pg/sharding.hpp"

#include "pg/take_all.hpp"

#include "core/shards.hpp"
#include "pg/clock.hpp"
#include "pg/errors.hpp"

namespace ratelimit::pg {

namespace {

const core::Request kNothing = core::Request::Plain(0.0);

/* Shard `number` of `key` as it stands, without waiting for a writer. */
core::Bucket
PeekShard(text *name, text *key, int number, const Policy &policy, const core::Limit &shard)
{
	return policy.engine
	    ->decide(name, ShardKey(key, number), shard, Operation{Operation::kPeek, kNothing, 0.0})
	    .next;
}

/* Takes plan.cost[s] from every shard s the plan draws on, all or none, in
 * canonical order (by `request` when the plan reserves); after[s]: how each
 * of them stands; *wait: the reservation's wait (0 if none). */
bool
TakeFromShards(text *name, text *key, const Policy &policy, const core::Limit &shard,
               const core::ShardPlan &plan, const core::Request &request, core::Bucket *after,
               double *wait)
{
	int order[kMaxShards];
	core::ShardOrder(policy.shards, order);
	BucketTake takes[kMaxShards];
	int numbers[kMaxShards];
	int count = 0;
	for (int i = 0; i < policy.shards; i++) {
		const int s = order[i];
		if (!(plan.cost[s] > 0.0))
			continue;
		numbers[count] = s;
		takes[count++] = BucketTake{
		    name,
		    ShardKey(key, s),
		    shard,
		    plan.kind == core::ShardPlan::kReserve ? request : core::Request::Plain(plan.cost[s]),
		    policy.engine,
		    core::Decision{}};
	}
	const bool allowed = TakeEvery(takes, count);
	*wait = 0.0;
	for (int t = 0; t < count; t++) {
		after[numbers[t]] = takes[t].decision.next;
		if (allowed && plan.kind == core::ShardPlan::kReserve)
			*wait = takes[t].decision.retry_after;
	}
	return allowed;
}

/* How often a call over every shard plans again when others took what it
 * counted on before it could lock the rows. */
constexpr int kEveryShardAttempts = 4;

/*
 * `kind` over every shard of `key`: from the richest ones, as few as can
 * serve request.cost (a shard's share of the request), or reserved on the
 * richest, or denied.  all[s]: how shard s stands once it is done; *wait:
 * a reservation's wait.
 */
bool
DecideOverEveryShard(text *name, text *key, const Policy &policy, const core::Limit &shard,
                     Operation::Kind kind, const core::Request &request, core::Bucket *all,
                     double *wait)
{
	for (int attempt = 0; attempt < kEveryShardAttempts; attempt++) {
		for (int s = 0; s < policy.shards; s++)
			all[s] = PeekShard(name, key, s, policy, shard);
		const core::ShardPlan plan =
		    core::PlanShards(all, policy.shards, shard, request, ClockNow());
		if (plan.kind == core::ShardPlan::kDeny)
			return false;
		if (kind == Operation::kCheck) {
			for (int s = 0; s < policy.shards; s++)
				all[s] = plan.after[s];
			*wait = plan.wait;
			return true;
		}
		if (TakeFromShards(name, key, policy, shard, plan, request, all, wait))
			return true;
	}
	/* Still taken from under it: denied on the latest states it saw. */
	return false;
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

bool
SplitShardKey(text *row_key, int shards, text **key, int *shard)
{
	const char *bytes = VARDATA_ANY(row_key);
	int length = VARSIZE_ANY_EXHDR(row_key);
	int mark = length - 1;
	while (mark >= 0 && bytes[mark] != '\x1f')
		mark--;
	const int digits = length - mark - 1;
	/* One or two digits, no leading zero: what "%d" writes below 64. */
	if (mark < 0 || digits < 1 || digits > 2 || (digits == 2 && bytes[mark + 1] == '0'))
		return false;
	int number = 0;
	for (int i = mark + 1; i < length; i++) {
		if (bytes[i] < '0' || bytes[i] > '9')
			return false;
		number = number * 10 + (bytes[i] - '0');
	}
	if (number >= shards)
		return false;
	*key = cstring_to_text_with_len(bytes, mark);
	*shard = number;
	return true;
}

core::Decision
ShardedDecision(text *name, text *key, const Policy &policy, const core::Limit &limit,
                Operation::Kind kind, const core::Request &request)
{
	const int shards = policy.shards;
	const double cost = request.cost;
	const core::Limit shard = core::ShareOfShard(limit, shards);
	const core::Request shard_request = core::ShareOfRequest(request, shards);
	if (cost > 2.0 * shard.burst &&
	    !(request.reserve && cost <= shard.burst + core::DebtCap(shard, shard_request)))
		ReportShardedCost(cost, 2.0 * shard.burst, shards, request.reserve);

	/* Two shards picked at random, as they stand; the richer serves the call
	 * alone if it can. */
	int numbers[2];
	numbers[0] = RlRandomBelow(shards);
	numbers[1] = (numbers[0] + 1 + RlRandomBelow(shards - 1)) % shards;
	core::Bucket pair[2];
	for (int p = 0; p < 2; p++)
		pair[p] = PeekShard(name, key, numbers[p], policy, shard);
	const core::ShardPlan plan =
	    core::PlanShards(pair, 2, shard, core::Request::Plain(cost), ClockNow());
	bool allowed = false;
	if (plan.kind == core::ShardPlan::kOne) {
		const int p = plan.richest;
		if (kind == Operation::kCheck) {
			allowed = true;
			pair[p] = plan.after[p];
		} else {
			core::Decision d =
			    policy.engine->decide(name, ShardKey(key, numbers[p]), shard,
			                          Operation{Operation::kTake, core::Request::Plain(cost), 0.0});
			allowed = d.allowed;
			pair[p] = d.next;
		}
	}

	core::Bucket all[kMaxShards];
	double wait = 0.0;
	if (allowed) {
		/* Granted: the two shards tell enough unless they hold less than the
		 * call, when the rest may hold what they lack. */
		const core::Decision answer =
		    core::ShardOutcome(true, pair, 2, shard, core::Request::Plain(cost), ClockNow());
		if (!core::NeedsEveryShard(answer.remaining, cost))
			return answer;
		for (int s = 0; s < shards; s++)
			all[s] = s == numbers[0]   ? pair[0]
			         : s == numbers[1] ? pair[1]
			                           : PeekShard(name, key, s, policy, shard);
	} else {
		/* Neither can serve it alone (or others took from the richer first):
		 * the whole key decides. */
		allowed = DecideOverEveryShard(name, key, policy, shard, kind, shard_request, all, &wait);
	}

	/* Denied shards never seen before still start earning now; recorded in
	 * canonical order, like any rows one transaction writes. */
	const Operation record{Operation::kRecordNew, kNothing, 0.0};
	if (!allowed && kind == Operation::kTake && core::StartsBelowFull(shard)) {
		int order[kMaxShards];
		core::ShardOrder(shards, order);
		for (int i = 0; i < shards; i++)
			(void)policy.engine->decide(name, ShardKey(key, order[i]), shard, record);
	}

	core::Decision outcome =
	    core::ShardOutcome(allowed, all, shards, shard, shard_request, ClockNow());
	if (allowed)
		outcome.retry_after = wait;
	return outcome;
}

core::Decision
ShardedRefund(text *name, text *key, const Policy &policy, const core::Limit &limit, double amount)
{
	const int shards = policy.shards;
	const core::Limit shard = core::ShareOfShard(limit, shards);
	int order[kMaxShards];
	core::ShardOrder(shards, order);

	core::Decision result{};
	result.allowed = true;
	double left = amount;
	for (int i = 0; i < shards; i++) {
		const Operation operation{left > 0.0 ? Operation::kRefund : Operation::kPeek, kNothing,
		                          left};
		core::Decision d = policy.engine->decide(name, ShardKey(key, order[i]), shard, operation);
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
		if (policy.engine->reset(name, ShardKey(key, order[i])))
			existed = true;
	return existed;
}

} /* namespace ratelimit::pg */

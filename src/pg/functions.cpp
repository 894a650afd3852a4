/*
 * src/pg/functions.cpp
 *
 * The SQL-callable entry points, each decode → require → call → encode:
 * fmgr_args decodes and checks the arguments and encodes the result row,
 * storage applies the call to the bucket's row, take_all plans several
 * limits at once.  Only plain data is alive here: a PostgreSQL error is a
 * longjmp that skips C++ destructors.
 */
#include "pg/pg_includes.hpp"

#include "core/token_bucket.hpp"
#include "pg/bucket_keys.hpp"
#include "pg/errors.hpp"
#include "pg/fmgr_args.hpp"
#include "pg/policies.hpp"
#include "pg/storage.hpp"
#include "pg/take_all.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(rate_limit_take);
PG_FUNCTION_INFO_V1(rate_limit_check);
PG_FUNCTION_INFO_V1(rate_limit_reset);
PG_FUNCTION_INFO_V1(rate_limit_take_policy);
PG_FUNCTION_INFO_V1(rate_limit_check_policy);
PG_FUNCTION_INFO_V1(rate_limit_refund);
PG_FUNCTION_INFO_V1(rate_limit_refund_policy);
PG_FUNCTION_INFO_V1(rate_limit_policies_changed);
PG_FUNCTION_INFO_V1(rate_limit_take_all);
}

namespace ratelimit::pg {

namespace {

/* The row key of shard `shard` of bucket key `key`: the key, U+001F, the
 * shard's number.  Shard rows are ordinary buckets of the same name. */
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

/* Each of `shards` rows holds and refills its share of the limit, so
 * together they admit what the whole limit admits. */
core::Limit
ShardLimit(core::Limit limit, int shards)
{
	limit.rate /= shards;
	limit.burst /= shards;
	limit.floor_rate /= shards;
	return limit;
}

/*
 * A take or check on a key split over several rows: look, without waiting,
 * at two shards picked at random and take from the richer; when neither has
 * enough alone, take from both at once (all or nothing, locked in canonical
 * order).  Callers of a hot key thus spread over the rows instead of queueing
 * on one.  remaining is estimated from the two shards seen; retry_after and
 * reset_after are estimates for them.
 */
core::Decision
ShardedDecision(text *name, text *key, const Policy &policy, const core::Limit &limit,
                Operation::Kind kind, double cost)
{
	const int shards = policy.shards;
	const core::Limit shard = ShardLimit(limit, shards);
	if (cost > 2.0 * shard.burst)
		ReportShardedCost(cost, 2.0 * shard.burst, shards);
	const double initial = policy.initial / shards;
	const core::Request nothing{0.0, false, false, 0.0};

	int first = RlRandomBelow(shards);
	int second = (first + 1 + RlRandomBelow(shards - 1)) % shards;
	text *keys[2] = {ShardKey(key, first), ShardKey(key, second)};
	double tokens[2];
	for (int s = 0; s < 2; s++)
		tokens[s] = DecideBucket(name, keys[s], shard,
		                         {Operation::kPeek, nothing, 0.0, policy.has_initial, initial})
		                .remaining;
	const int richer = tokens[1] > tokens[0] ? 1 : 0;
	const int other = 1 - richer;
	double after[2] = {tokens[0], tokens[1]};
	bool allowed = false;
	double from_richer = cost < tokens[richer] ? cost : tokens[richer];

	if (kind == Operation::kCheck) {
		allowed = tokens[richer] >= cost || (tokens[other] > 0.0 && tokens[0] + tokens[1] >= cost);
		if (allowed) {
			after[richer] -= from_richer;
			after[other] -= cost - from_richer;
		}
	} else {
		if (tokens[richer] >= cost) {
			core::Request request{cost, false, false, 0.0};
			core::Decision d =
			    DecideBucket(name, keys[richer], shard,
			                 {Operation::kTake, request, 0.0, policy.has_initial, initial});
			allowed = d.allowed;
			after[richer] = d.remaining;
			from_richer = d.remaining < cost ? d.remaining : cost;
		}
		if (!allowed && from_richer > 0.0 && tokens[other] > 0.0 &&
		    from_richer + tokens[other] >= cost) {
			BucketTake takes[2] = {{name,
			                        keys[richer],
			                        shard,
			                        {from_richer, false, false, 0.0},
			                        policy.has_initial,
			                        initial,
			                        core::Decision{}},
			                       {name,
			                        keys[other],
			                        shard,
			                        {cost - from_richer, false, false, 0.0},
			                        policy.has_initial,
			                        initial,
			                        core::Decision{}}};
			int order[2] = {richer, other};
			if (TakeOrder(&takes[0], &takes[1]) > 0) {
				BucketTake swapped = takes[0];
				takes[0] = takes[1];
				takes[1] = swapped;
				order[0] = other;
				order[1] = richer;
			}
			allowed = TakeAll(takes, 2);
			for (int t = 0; t < 2; t++)
				after[order[t]] = takes[t].decision.remaining;
		}
	}

	/* Denied shards never seen before still start earning now; recorded in
	 * canonical order, like any two rows one transaction writes. */
	const Operation record{Operation::kRecordNew, nothing, 0.0, policy.has_initial, initial};
	if (!allowed && kind == Operation::kTake && StartsBelowFull(record, shard)) {
		BucketTake pair[2] = {{name, keys[0], shard, nothing, false, 0.0, core::Decision{}},
		                      {name, keys[1], shard, nothing, false, 0.0, core::Decision{}}};
		const int lower = TakeOrder(&pair[0], &pair[1]) <= 0 ? 0 : 1;
		(void)DecideBucket(name, keys[lower], shard, record);
		(void)DecideBucket(name, keys[1 - lower], shard, record);
	}

	core::Decision result{};
	result.allowed = allowed;
	result.remaining = (after[0] + after[1]) / 2.0 * shards;
	if (!allowed)
		result.retry_after = core::SecondsUntil(tokens[0] + tokens[1], cost, 2.0 * shard.rate);
	for (int s = 0; s < 2; s++) {
		double full = core::SecondsUntil(after[s], shard.burst, shard.rate);
		if (full > result.reset_after)
			result.reset_after = full;
	}
	return result;
}

/* Shard numbers 0..shards-1 in the canonical (bytewise) order of their row
 * keys, the order in which rows are locked. */
void
ShardOrder(int shards, int *order)
{
	char names[kMaxShards][8];
	for (int s = 0; s < shards; s++) {
		order[s] = s;
		snprintf(names[s], sizeof(names[s]), "%d", s);
	}
	for (int i = 1; i < shards; i++)
		for (int j = i; j > 0 && strcmp(names[order[j - 1]], names[order[j]]) > 0; j--) {
			int swap = order[j];
			order[j] = order[j - 1];
			order[j - 1] = swap;
		}
}

/*
 * A refund of a key split over several rows: `amount` goes to the shards
 * with room for it, shard after shard in canonical order, so that exactly
 * what the whole limit can hold is given back (never more than its burst).
 * remaining and reset_after cover every shard.
 */
core::Decision
ShardedRefund(text *name, text *key, const Policy &policy, const core::Limit &limit, double amount)
{
	const int shards = policy.shards;
	const core::Limit shard = ShardLimit(limit, shards);
	const core::Request nothing{0.0, false, false, 0.0};
	int order[kMaxShards];
	ShardOrder(shards, order);

	core::Decision result{};
	result.allowed = true;
	double left = amount;
	for (int i = 0; i < shards; i++) {
		Operation operation{left > 0.0 ? Operation::kRefund : Operation::kPeek, nothing, left,
		                    policy.has_initial, policy.initial / shards};
		core::Decision d = DecideBucket(name, ShardKey(key, order[i]), shard, operation);
		if (operation.kind == Operation::kRefund)
			left -= d.refunded;
		result.remaining += d.remaining;
		if (d.reset_after > result.reset_after)
			result.reset_after = d.reset_after;
	}
	return result;
}

/* A take writes its bucket; a check only reads it, on the primary. */
void
RequireFor(const Signature &signature, Operation::Kind kind)
{
	if (kind == Operation::kTake)
		RequireWritable(signature);
	else
		RequirePrimary(signature);
}

/* Take or check with the rate and burst the call gives. */
Datum
BucketDecision(FunctionCallInfo fcinfo, const Signature &signature, Operation::Kind kind)
{
	BucketCall call = DecodeBucketCall(fcinfo, signature);
	RequireFor(signature, kind);
	core::Decision decision =
	    DecideBucket(call.name, call.key, call.limit, {kind, call.request, 0.0});
	return DecisionDatum(fcinfo, decision, call.limit);
}

/* Take or check with the limit of policy `name`. */
Datum
PolicyDecision(FunctionCallInfo fcinfo, const Signature &signature, Operation::Kind kind)
{
	PolicyCall call = DecodePolicyCall(fcinfo, signature);
	RequireFor(signature, kind);
	Policy policy = LookupPolicy(call.name);
	core::Limit limit = PolicyLimit(policy, call.name, call.key);
	core::Request request = core::Request::Plain(call.cost);
	CheckRequest(limit, request);
	core::Decision decision;
	if (policy.shards > 1) {
		decision = ShardedDecision(call.name, call.key, policy, limit, kind, call.cost);
	} else {
		Operation operation{kind, request, 0.0, policy.has_initial, policy.initial};
		decision = DecideBucket(call.name, call.key, limit, operation);
	}
	if (policy.jitter > 0.0)
		decision.retry_after = core::Jittered(decision.retry_after, policy.jitter,
		                                      BucketHash(call.name, call.key, kJitterSeed));
	return DecisionDatum(fcinfo, decision, limit);
}

} /* namespace */

} /* namespace ratelimit::pg */

namespace core = ratelimit::core;
namespace pg = ratelimit::pg;

/* rate_limit_take(name, key, cost, rate, burst, reserve, max_reserved) */
Datum
rate_limit_take(PG_FUNCTION_ARGS)
{
	return pg::BucketDecision(fcinfo, pg::kTakeSignature, pg::Operation::kTake);
}

/* rate_limit_check(...): the answer take would give, without consuming. */
Datum
rate_limit_check(PG_FUNCTION_ARGS)
{
	return pg::BucketDecision(fcinfo, pg::kCheckSignature, pg::Operation::kCheck);
}

/* rate_limit_reset(name, key): forget the bucket; it starts full again. */
Datum
rate_limit_reset(PG_FUNCTION_ARGS)
{
	pg::KeyCall call = pg::DecodeKeyCall(fcinfo);
	pg::RequireWritable(pg::kResetSignature);
	bool existed = pg::ResetBucket(call.name, call.key);
	pg::Policy policy;
	if (pg::FindPolicy(call.name, &policy) && policy.shards > 1)
		for (int s = 0; s < policy.shards; s++)
			existed |= pg::ResetBucket(call.name, pg::ShardKey(call.key, s));
	PG_RETURN_BOOL(existed);
}

/* rate_limit_take(name, key, cost): the limit of policy `name`. */
Datum
rate_limit_take_policy(PG_FUNCTION_ARGS)
{
	return pg::PolicyDecision(fcinfo, pg::kTakePolicySignature, pg::Operation::kTake);
}

/* rate_limit_check(name, key, cost): the limit of policy `name`. */
Datum
rate_limit_check_policy(PG_FUNCTION_ARGS)
{
	return pg::PolicyDecision(fcinfo, pg::kCheckPolicySignature, pg::Operation::kCheck);
}

/* rate_limit_refund(name, key, amount, rate, burst): tokens back, capped. */
Datum
rate_limit_refund(PG_FUNCTION_ARGS)
{
	pg::RefundCall call = pg::DecodeRefundCall(fcinfo);
	pg::RequireWritable(pg::kRefundSignature);
	pg::Operation refund{pg::Operation::kRefund, core::Request::Plain(0.0), call.amount};
	core::Decision decision = pg::DecideBucket(call.name, call.key, call.limit, refund);
	return pg::DecisionDatum(fcinfo, decision, call.limit);
}

/* rate_limit_refund(name, key, amount): the limit of policy `name`. */
Datum
rate_limit_refund_policy(PG_FUNCTION_ARGS)
{
	pg::PolicyRefundCall call = pg::DecodePolicyRefundCall(fcinfo);
	pg::RequireWritable(pg::kRefundPolicySignature);
	pg::Policy policy = pg::LookupPolicy(call.name);
	core::Limit limit = pg::PolicyLimit(policy, call.name, call.key);
	core::Decision decision;
	if (policy.shards > 1) {
		decision = pg::ShardedRefund(call.name, call.key, policy, limit, call.amount);
	} else {
		pg::Operation refund{pg::Operation::kRefund, core::Request::Plain(0.0), call.amount,
		                     policy.has_initial, policy.initial};
		decision = pg::DecideBucket(call.name, call.key, limit, refund);
	}
	return pg::DecisionDatum(fcinfo, decision, limit);
}

/* Trigger on ratelimit.policies (row or statement): invalidate policy caches. */
Datum
rate_limit_policies_changed(PG_FUNCTION_ARGS)
{
	if (!CALLED_AS_TRIGGER(fcinfo))
		elog(ERROR, "rate_limit_policies_changed() must be called as a trigger");
	TriggerData *trigger = reinterpret_cast<TriggerData *>(fcinfo->context);
	pg::PoliciesChanged(RelationGetRelid(trigger->tg_relation));
	return PointerGetDatum(NULL);
}

/*
 * rate_limit_take_all(names, keys, costs): takes costs[i] from bucket
 * (names[i], keys[i]) under policy names[i], for every i or for none.
 */
Datum
rate_limit_take_all(PG_FUNCTION_ARGS)
{
	pg::LimitList limits = pg::ReadLimitList(pg::DecodeTakeAllCall(fcinfo));
	pg::RequireWritable(pg::kTakeAllSignature);
	return pg::AllDecisionDatum(fcinfo, pg::TakeAllLimits(limits));
}

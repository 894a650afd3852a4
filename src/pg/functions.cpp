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
#include "pg/sharding.hpp"
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
PG_FUNCTION_INFO_V1(rate_limit_take_policy_wait);
PG_FUNCTION_INFO_V1(rate_limit_check_policy_wait);
PG_FUNCTION_INFO_V1(rate_limit_take_all_wait);
PG_FUNCTION_INFO_V1(rate_limit_take_per);
PG_FUNCTION_INFO_V1(rate_limit_check_per);
PG_FUNCTION_INFO_V1(rate_limit_refund_per);
}

namespace ratelimit::pg {

namespace {

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
	if (pg::FindPolicy(call.name, &policy) && pg::ResetShards(call.name, call.key, policy))
		existed = true;
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

/* Entry points of 0.3.0, not yet built. */
#define RATELIMIT_NOT_YET(fn)                                                                      \
	Datum fn(PG_FUNCTION_ARGS)                                                                     \
	{                                                                                              \
		elog(ERROR, #fn " is not built yet");                                                      \
		PG_RETURN_NULL();                                                                          \
	}
RATELIMIT_NOT_YET(rate_limit_take_policy_wait)
RATELIMIT_NOT_YET(rate_limit_check_policy_wait)
RATELIMIT_NOT_YET(rate_limit_take_all_wait)
RATELIMIT_NOT_YET(rate_limit_take_per)
RATELIMIT_NOT_YET(rate_limit_check_per)
RATELIMIT_NOT_YET(rate_limit_refund_per)

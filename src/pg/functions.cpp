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
#include "pg/leases.hpp"
#include "pg/engine.hpp"
#include "pg/policies.hpp"
#include "pg/sharding.hpp"
#include "pg/stats.hpp"
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
PG_FUNCTION_INFO_V1(rate_limit_require_memory_engine);
PG_FUNCTION_INFO_V1(rate_limit_take_all);
PG_FUNCTION_INFO_V1(rate_limit_take_policy_wait);
PG_FUNCTION_INFO_V1(rate_limit_check_policy_wait);
PG_FUNCTION_INFO_V1(rate_limit_take_all_wait);
PG_FUNCTION_INFO_V1(rate_limit_take_explicit);
PG_FUNCTION_INFO_V1(rate_limit_check_explicit);
PG_FUNCTION_INFO_V1(rate_limit_refund_explicit);
PG_FUNCTION_INFO_V1(rate_limit_lease);
PG_FUNCTION_INFO_V1(rate_limit_release);
PG_FUNCTION_INFO_V1(rate_limit_drop_leases);
}

namespace ratelimit::pg {

namespace {

/* A take writes its bucket; a check only reads it (RequireEngine). */
void
RequireFor(const BucketEngine &engine, const Signature &signature, Operation::Kind kind)
{
	RequireEngine(engine, signature, kind != Operation::kCheck);
}

/* A call that rate_limit_stats counts (a take): attached to the counters
 * before it writes anything, with the row-lock waits it measures. */
struct TakeCount {
	bool counted;
	int64 waited_before;
};

TakeCount
StartCount(bool counted)
{
	if (counted)
		PrepareStats();
	return TakeCount{counted, BucketWaitMicros()};
}

void
FinishCount(const TakeCount &count, text *name, double cost, const core::Decision &decision)
{
	if (count.counted)
		CountTake(name, cost, decision, BucketWaitMicros() - count.waited_before);
}

/* Take or check with the limit the call gives. */
Datum
BucketDecision(FunctionCallInfo fcinfo, const Signature &signature, Operation::Kind kind)
{
	BucketCall call = DecodeBucketCall(fcinfo, signature);
	/* Buckets of explicit calls live in the table. */
	RequireFor(kTableEngine, signature, kind);
	const TakeCount count = StartCount(kind == Operation::kTake);
	core::Decision decision =
	    kTableEngine.decide(call.name, call.key, call.limit, {kind, call.request, 0.0});
	FinishCount(count, call.name, call.request.cost, decision);
	return DecisionDatum(fcinfo, decision, call.limit, call.label);
}

/* Where places of concurrency limit `policy` can be taken (take) or
 * counted: held until the transaction ends, in the lock table (in a
 * transaction block); as leases, in the table (writable for a take). */
void
RequirePlaces(const Signature &signature, const Policy &policy, text *name, bool take)
{
	if (policy.lease_us > 0) {
		if (take)
			RequireLeaseWrite(signature, false);
		else if (RecoveryInProgress())
			ReportLeaseRecovery(signature.function);
	} else
		RequireHolds(signature, name, take);
}

/* Take or check of places of concurrency limit `policy` (see holds.hpp and
 * leases.hpp): max_wait does not apply, a hold never reserves.  A take of
 * a lease policy takes a lease; `grant` (may be NULL) receives it. */
core::Decision
TakePlaces(const PolicyCall &call, const Policy &policy, Operation::Kind kind, LeaseGrant *grant)
{
	const int places = PolicyPlaces(policy, call.name, call.cost);
	const bool take = kind == Operation::kTake;
	const TakeCount count = StartCount(take);
	core::Decision decision =
	    policy.lease_us > 0
	        ? LeasePlaces(call.name, call.key, policy.max_held, places, policy.lease_us, take,
	                      grant)
	        : policy.engine->hold(call.name, call.key, policy.max_held, places, take);
	FinishCount(count, call.name, call.cost, decision);
	/* Counted as the denial it would be; answered as allowed. */
	(void)ReportOnly(policy, &decision);
	return decision;
}

Datum
HoldDecision(FunctionCallInfo fcinfo, const PolicyCall &call, const Policy &policy,
             Operation::Kind kind)
{
	core::Decision decision = TakePlaces(call, policy, kind, NULL);
	return DecisionDatum(fcinfo, decision, policy.limit, PolicyLabel(policy, call.name));
}

/* Take or check with the limit of policy `name`, reserving within
 * call.max_wait as far as the policy allows.  A denial's retry_after is
 * jittered as the policy says; a reservation's is not (the reserved work may
 * start then, within max_wait). */
Datum
PolicyDecision(FunctionCallInfo fcinfo, const Signature &signature, Operation::Kind kind)
{
	PolicyCall call = DecodePolicyCall(fcinfo, signature);
	Policy policy = LookupPolicyToTake(call.name, kind == Operation::kTake);
	if (policy.max_held > 0) {
		RequirePlaces(signature, policy, call.name, kind == Operation::kTake);
		return HoldDecision(fcinfo, call, policy, kind);
	}
	RequireFor(*policy.engine, signature, kind);
	core::Limit limit = PolicyLimit(policy, call.name, call.key);
	core::Request request = PolicyRequest(policy, call.cost, call.max_wait);
	CheckRequest(limit, request, CallForm::kPolicy);
	core::Decision decision;
	const TakeCount count = StartCount(kind == Operation::kTake);
	if (policy.shards > 1) {
		decision = ShardedDecision(call.name, call.key, policy, limit, kind, request);
	} else {
		Operation operation{kind, request, 0.0};
		decision = policy.engine->decide(call.name, call.key, limit, operation);
	}
	FinishCount(count, call.name, call.cost, decision);
	if (policy.jitter > 0.0 && !decision.allowed)
		decision.retry_after = core::Jittered(decision.retry_after, policy.jitter,
		                                      BucketHash(call.name, call.key, kJitterSeed));
	/* Counted as the denial it would be; answered as allowed. */
	(void)ReportOnly(policy, &decision);
	return DecisionDatum(fcinfo, decision, limit, PolicyLabel(policy, call.name));
}

/* Refund with the limit the call gives. */
Datum
BucketRefund(FunctionCallInfo fcinfo, const Signature &signature)
{
	RefundCall call = DecodeRefundCall(fcinfo, signature);
	RequireFor(kTableEngine, signature, Operation::kRefund);
	Operation refund{Operation::kRefund, core::Request::Plain(0.0), call.amount};
	core::Decision decision = kTableEngine.decide(call.name, call.key, call.limit, refund);
	return DecisionDatum(fcinfo, decision, call.limit, call.label);
}

/* rate_limit_take_all under `signature`. */
Datum
TakeAllDecision(FunctionCallInfo fcinfo, const Signature &signature)
{
	TakeAllCall call = DecodeTakeAllCall(fcinfo, signature);
	LimitList limits = ReadLimitList(call);
	const TakeCount count = StartCount(true);
	AllDecision decision = TakeAllLimits(limits, call.max_wait, signature);
	/* Each limit counts the call's outcome (granted, a report-only limit's
	 * would-be denial is its own), its own cost and the call's wait. */
	for (int i = 0; i < decision.count; i++) {
		core::Decision outcome = decision.decisions[i];
		outcome.allowed = decision.allowed && outcome.allowed;
		FinishCount(count, DatumGetTextPP(limits.names[i]),
		            limits.costs != NULL ? DatumGetFloat8(limits.costs[i]) : 1.0, outcome);
	}
	return AllDecisionDatum(fcinfo, decision);
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

/* rate_limit_take_explicit(name, key, cost, rate, per, burst, max_wait, max_reserved) */
Datum
rate_limit_take_explicit(PG_FUNCTION_ARGS)
{
	return pg::BucketDecision(fcinfo, pg::kTakePerSignature, pg::Operation::kTake);
}

/* rate_limit_check_explicit(name, key, cost, rate, per, burst, max_wait, max_reserved) */
Datum
rate_limit_check_explicit(PG_FUNCTION_ARGS)
{
	return pg::BucketDecision(fcinfo, pg::kCheckPerSignature, pg::Operation::kCheck);
}

/* rate_limit_reset(name, key): forget the bucket; it starts full again. */
Datum
rate_limit_reset(PG_FUNCTION_ARGS)
{
	pg::KeyCall call = pg::DecodeKeyCall(fcinfo);
	pg::Policy policy;
	const bool has_policy = pg::FindPolicy(call.name, &policy);
	const pg::BucketEngine &engine = has_policy ? *policy.engine : pg::kTableEngine;
	pg::RequireEngine(engine, pg::kResetSignature, true);
	bool existed = engine.reset(call.name, call.key);
	if (has_policy && pg::ResetShards(call.name, call.key, policy))
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

/* rate_limit_take(name, key, cost, max_wait): reserving as policy `name` allows. */
Datum
rate_limit_take_policy_wait(PG_FUNCTION_ARGS)
{
	return pg::PolicyDecision(fcinfo, pg::kTakePolicyWaitSignature, pg::Operation::kTake);
}

/* rate_limit_check(name, key, cost, max_wait) */
Datum
rate_limit_check_policy_wait(PG_FUNCTION_ARGS)
{
	return pg::PolicyDecision(fcinfo, pg::kCheckPolicyWaitSignature, pg::Operation::kCheck);
}

/* rate_limit_refund(name, key, amount, rate, burst): tokens back, capped. */
Datum
rate_limit_refund(PG_FUNCTION_ARGS)
{
	return pg::BucketRefund(fcinfo, pg::kRefundSignature);
}

/* rate_limit_refund_explicit(name, key, amount, rate, per, burst) */
Datum
rate_limit_refund_explicit(PG_FUNCTION_ARGS)
{
	return pg::BucketRefund(fcinfo, pg::kRefundPerSignature);
}

/* rate_limit_refund(name, key, amount): the limit of policy `name`. */
Datum
rate_limit_refund_policy(PG_FUNCTION_ARGS)
{
	pg::PolicyRefundCall call = pg::DecodePolicyRefundCall(fcinfo);
	pg::Policy policy = pg::LookupPolicy(call.name);
	if (policy.max_held > 0)
		pg::ReportConcurrencyRefund(text_to_cstring(call.name), policy.lease_us > 0);
	pg::RequireFor(*policy.engine, pg::kRefundPolicySignature, pg::Operation::kRefund);
	core::Limit limit = pg::PolicyLimit(policy, call.name, call.key);
	core::Decision decision;
	if (policy.shards > 1) {
		decision = pg::ShardedRefund(call.name, call.key, policy, limit, call.amount);
	} else {
		pg::Operation refund{pg::Operation::kRefund, core::Request::Plain(0.0), call.amount};
		decision = policy.engine->decide(call.name, call.key, limit, refund);
	}
	return pg::DecisionDatum(fcinfo, decision, limit, pg::PolicyLabel(policy, call.name));
}

/* Trigger on ratelimit.policies (row or statement): invalidate policy caches. */
Datum
rate_limit_policies_changed(PG_FUNCTION_ARGS)
{
	if (!CALLED_AS_TRIGGER(fcinfo))
		elog(ERROR, "rate_limit_policies_changed() must be called as a trigger");
	TriggerData *trigger = reinterpret_cast<TriggerData *>(fcinfo->context);
	pg::PoliciesChanged(RelationGetRelid(trigger->tg_relation));
	/* A policy written with another limit: its engine may keep state that
	 * depends on it (the memory engine judges eviction by a bucket's limit). */
	if (TRIGGER_FIRED_FOR_ROW(trigger->tg_event) &&
	    (TRIGGER_FIRED_BY_INSERT(trigger->tg_event) || TRIGGER_FIRED_BY_UPDATE(trigger->tg_event)))
		pg::PolicyWritten(RelationGetDescr(trigger->tg_relation),
		                  TRIGGER_FIRED_BY_UPDATE(trigger->tg_event) ? trigger->tg_trigtuple : NULL,
		                  TRIGGER_FIRED_BY_UPDATE(trigger->tg_event) ? trigger->tg_newtuple
		                                                             : trigger->tg_trigtuple);
	return PointerGetDatum(NULL);
}

/* ratelimit.require_memory_engine(), called by rate_limit_define for a
 * memory policy: raises 55000 where the memory engine has no shared memory
 * (before PostgreSQL 17, without preloading), so that such a policy is
 * refused when it is defined rather than at every call. */
Datum
rate_limit_require_memory_engine(PG_FUNCTION_ARGS)
{
	pg::kMemoryEngine.require();
	PG_RETURN_VOID();
}

/*
 * rate_limit_take_all(names, keys, costs): takes costs[i] from bucket
 * (names[i], keys[i]) under policy names[i], for every i or for none.
 */
Datum
rate_limit_take_all(PG_FUNCTION_ARGS)
{
	return pg::TakeAllDecision(fcinfo, pg::kTakeAllSignature);
}

/* rate_limit_take_all(names, keys, costs, max_wait): each limit reserving
 * within max_wait as its policy allows. */
Datum
rate_limit_take_all_wait(PG_FUNCTION_ARGS)
{
	return pg::TakeAllDecision(fcinfo, pg::kTakeAllWaitSignature);
}

/* rate_limit_lease(name, key, cost): takes cost places of lease policy
 * `name` as one lease; the decision, the lease's id and its expiry. */
Datum
rate_limit_lease(PG_FUNCTION_ARGS)
{
	pg::PolicyCall call = pg::DecodePolicyCall(fcinfo, pg::kLeaseSignature);
	pg::Policy policy = pg::LookupPolicyToTake(call.name, true);
	if (policy.lease_us <= 0)
		pg::ReportNoLease(text_to_cstring(call.name), policy.max_held > 0);
	pg::RequirePlaces(pg::kLeaseSignature, policy, call.name, true);
	pg::LeaseGrant grant;
	core::Decision decision = pg::TakePlaces(call, policy, pg::Operation::kTake, &grant);
	return pg::LeaseDatum(fcinfo, decision, policy.limit, pg::PolicyLabel(policy, call.name),
	                      grant.written ? &grant.id : NULL, grant.expires_at);
}

/* rate_limit_release(lease): gives the lease's places back now; false when
 * it is not in force (unknown, expired or released; NULL, as a denied
 * rate_limit_lease returns). */
Datum
rate_limit_release(PG_FUNCTION_ARGS)
{
	if (RecoveryInProgress())
		pg::ReportLeaseRecovery(pg::kReleaseSignature.function);
	if (PG_ARGISNULL(0))
		PG_RETURN_BOOL(false);
	pg::RequireLeaseWrite(pg::kReleaseSignature, true);
	PG_RETURN_BOOL(pg::ReleaseLease(PG_GETARG_UUID_P(0)));
}

/* ratelimit.drop_leases(name), which rate_limit_drop calls: deletes the
 * leases of policy `name`.  Where nothing may be written (a standby, a
 * read-only transaction, parallel mode), nothing: the policy's DELETE,
 * next, raises the error. */
Datum
rate_limit_drop_leases(PG_FUNCTION_ARGS)
{
	if (!RecoveryInProgress() && !XactReadOnly && !IsInParallelMode())
		(void)pg::DropLeases(PG_GETARG_TEXT_PP(0));
	PG_RETURN_VOID();
}

/*
 * src/pg/fmgr_args.hpp
 *
 * The fmgr codec of the SQL-callable functions: each SQL signature is a
 * table of its arguments (which may be NULL, and the hint when one is NULL
 * that may not be), decoded into a plain struct; the checks every call
 * makes of its arguments and of where it runs; and the result rows.
 */
#ifndef RATELIMIT_PG_FMGR_ARGS_HPP
#define RATELIMIT_PG_FMGR_ARGS_HPP

#include "pg/pg_includes.hpp"

#include "core/token_bucket.hpp"
#include "pg/engine.hpp"
#include "pg/errors.hpp"

namespace ratelimit::pg {

/* One argument of a SQL signature. */
struct ArgSpec {
	const char *name;
	const char *null_hint; /* hint of the 22004 error when it is NULL */
};

/* ArgSpec.null_hint of an argument for which NULL is a value. */
constexpr const char *kNullAllowed = NULL;

/* A SQL-callable function: its name, as errors show it, and its arguments
 * in SQL order. */
struct Signature {
	const char *function;
	const ArgSpec *args;
	int count;
};

/* rate_limit_take and rate_limit_check (name, key, cost, rate, burst,
 * reserve, max_reserved), with a limit of their own in tokens per second. */
extern const Signature kTakeSignature;
extern const Signature kCheckSignature;
/* rate_limit_take_explicit and rate_limit_check_explicit (name, key, cost,
 * rate, per, burst, max_wait, max_reserved), with a limit of their own per
 * period. */
extern const Signature kTakePerSignature;
extern const Signature kCheckPerSignature;
/* rate_limit_take and rate_limit_check (name, key, cost) of policy name,
 * and (name, key, cost, max_wait). */
extern const Signature kTakePolicySignature;
extern const Signature kCheckPolicySignature;
extern const Signature kTakePolicyWaitSignature;
extern const Signature kCheckPolicyWaitSignature;
/* rate_limit_refund (name, key, amount, rate, burst), and
 * rate_limit_refund_explicit (name, key, amount, rate, per, burst). */
extern const Signature kRefundSignature;
extern const Signature kRefundPerSignature;
/* rate_limit_refund (name, key, amount) of policy name. */
extern const Signature kRefundPolicySignature;
/* rate_limit_reset (name, key). */
extern const Signature kResetSignature;
/* rate_limit_purge (name, purged) and rate_limit_reset_limit (name,
 * reset), procedures. */
extern const Signature kPurgeSignature;
extern const Signature kResetLimitSignature;

/* rate_limit_buckets (name), rate_limit_stats () and
 * rate_limit_memory_stats (), set-returning functions; rate_limit_stats_reset
 * (name). */
extern const Signature kBucketsSignature;
extern const Signature kStatsSignature;
extern const Signature kMemoryStatsSignature;
extern const Signature kStatsResetSignature;

/* rate_limit_take_all (names, keys, costs), and (names, keys, costs, max_wait). */
extern const Signature kTakeAllSignature;
extern const Signature kTakeAllWaitSignature;
/* rate_limit_lease(name, key, cost) and rate_limit_release(lease). */
extern const Signature kLeaseSignature;
extern const Signature kReleaseSignature;

/* What a decision row says of its limit: name, quota per period. */
struct LimitLabel {
	text *name;
	double quota; /* tokens per `per` */
	Interval per;
};

/* The label of an explicit limit of `rate` tokens per second. */
LimitLabel PerSecondLabel(text *name, double rate);

/* A take or check with its own limit (kTakeSignature, kCheckSignature,
 * kTakePerSignature, kCheckPerSignature): valid numbers, for a name that no
 * policy governs. */
struct BucketCall {
	text *name;
	text *key;
	core::Limit limit;
	core::Request request;
	LimitLabel label;
};
BucketCall DecodeBucketCall(FunctionCallInfo fcinfo, const Signature &signature);

/* A refund with its own limit (kRefundSignature, kRefundPerSignature): valid
 * numbers, for a name that no policy governs. */
struct RefundCall {
	text *name;
	text *key;
	core::Limit limit;
	double amount;
	LimitLabel label;
};
RefundCall DecodeRefundCall(FunctionCallInfo fcinfo, const Signature &signature);

/* A take or check under policy name (kTakePolicySignature,
 * kCheckPolicySignature, and the *Wait ones); the cost is checked against
 * the policy later. */
struct PolicyCall {
	text *name;
	text *key;
	double cost;
	double max_wait; /* seconds (+inf: no time cap); 0: no reservation */
};
PolicyCall DecodePolicyCall(FunctionCallInfo fcinfo, const Signature &signature);

/* A refund under policy name (kRefundPolicySignature): a valid amount. */
struct PolicyRefundCall {
	text *name;
	text *key;
	double amount;
};
PolicyRefundCall DecodePolicyRefundCall(FunctionCallInfo fcinfo);

/* A bucket named by (name, key) alone (kResetSignature). */
struct KeyCall {
	text *name;
	text *key;
};
KeyCall DecodeKeyCall(FunctionCallInfo fcinfo);

/* A purge (kPurgeSignature) or a reset of a whole limit
 * (kResetLimitSignature): of one name, or, for a purge, of every name
 * (NULL). */
struct NameCall {
	text *name;
};
NameCall DecodeNameCall(FunctionCallInfo fcinfo, const Signature &signature);

/* A set-returning function's rows, materialized: each row goes to `store`
 * with the descriptor `desc` (both in the query's memory). */
struct ResultSet {
	Tuplestorestate *store;
	TupleDesc desc;
};
ResultSet BeginResultSet(FunctionCallInfo fcinfo, const Signature &signature);

/* The row of a procedure's one output argument, a count. */
Datum CountResultDatum(FunctionCallInfo fcinfo, const Signature &signature, int64 count);

/* The arrays of rate_limit_take_all (kTakeAllSignature,
 * kTakeAllWaitSignature), not yet looked into. */
struct TakeAllCall {
	ArrayType *names;
	ArrayType *keys;
	ArrayType *costs; /* NULL: a cost of 1 for each limit */
	double max_wait;  /* as PolicyCall's */
};
TakeAllCall DecodeTakeAllCall(FunctionCallInfo fcinfo, const Signature &signature);

/* 22023 / 54000: an empty or over-long name, an over-long key. */
void CheckNameAndKey(text *name, text *key);

/* The error of core::Validate(limit, request), if any, for a call of `form`. */
void CheckRequest(const core::Limit &limit, const core::Request &request, CallForm form);

/* 25006 on a standby: RequirePrimary always, RequireReadable unless bucket
 * state is logged (an unlogged table is empty there); RequireWritable also
 * raises 25006 in a read-only transaction and 25000 in parallel mode. */
void RequirePrimary(const Signature &signature);
void RequireReadable(const Signature &signature);
void RequireWritable(const Signature &signature);
/* Where `engine` may serve the call: an engine that writes tables needs
 * RequireWritable for a write (`writes`) and RequireReadable otherwise; one
 * that writes none serves anywhere (a read-only transaction and a standby
 * included), but writes nothing in parallel mode. */
void RequireEngine(const BucketEngine &engine, const Signature &signature, bool writes);
/* Where places of concurrency limit `name` may be held (`take`) or counted:
 * on a primary only (a standby's lock table is its own), a hold in a
 * transaction block only (one that ends with its statement limits nothing),
 * in a read-only transaction too (a place writes nothing), never in
 * parallel mode. */
void RequireHolds(const Signature &signature, text *name, bool take);
/* Where a lease may be written (or deleted: `release`): on a primary (a
 * standby has no unlogged table), in a read-write transaction, not in
 * parallel mode. */
void RequireLeaseWrite(const Signature &signature, bool release);

/* The rate_limit_decision row of `decision` under `limit`, labelled `label`. */
Datum DecisionDatum(FunctionCallInfo fcinfo, const core::Decision &decision,
                    const core::Limit &limit, const LimitLabel &label);

/* A rate_limit_all_decision row. */
struct AllDecision {
	bool allowed;
	double retry_after;
	text *binding_name;
	text *binding_key;
	ArrayType *remaining; /* float8[]: one per limit given, in argument order */
	/* Each limit given, in argument order: its decision, capacity and label. */
	int count;
	const core::Decision *decisions;
	const double *capacities;
	const LimitLabel *labels;
};
Datum AllDecisionDatum(FunctionCallInfo fcinfo, const AllDecision &decision);

/* The rate_limit_lease row: the decision's columns, then the lease written
 * (lease and expires_at NULL when none was: denied, or no place asked). */
Datum LeaseDatum(FunctionCallInfo fcinfo, const core::Decision &decision, const core::Limit &limit,
                 const LimitLabel &label, const pg_uuid_t *lease, TimestampTz expires_at);

} /* namespace ratelimit::pg */

#endif

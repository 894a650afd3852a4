/*
 * src/pg/functions.cpp
 *
 * The SQL-callable entry points.  Each decodes its arguments into plain
 * values, validates them, checks that the transaction may run it, calls the
 * storage layer and encodes the result.  Only plain data is alive here: a
 * PostgreSQL error is a longjmp that skips C++ destructors.
 */
#include "pg/pg_includes.hpp"

#include "core/token_bucket.hpp"
#include "pg/errors.hpp"
#include "pg/storage.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(rate_limit_take);
PG_FUNCTION_INFO_V1(rate_limit_check);
PG_FUNCTION_INFO_V1(rate_limit_reset);
}

namespace ratelimit::pg {

namespace {

/* Arguments of take and check, in SQL order. */
constexpr const char *kArgNames[] = {"name",  "key",     "cost",        "rate",
                                     "burst", "reserve", "max_reserved"};
constexpr int kBucketCallArgs = 7;
constexpr int kResultColumns = 5;

struct BucketCall {
	text *name;
	text *key;
	core::Limit limit;
	core::Request request;
};

void
CheckNameAndKey(text *name, text *key)
{
	int name_bytes = VARSIZE_ANY_EXHDR(name);
	int key_bytes = VARSIZE_ANY_EXHDR(key);
	if (name_bytes == 0)
		ReportEmptyName();
	if (name_bytes > kMaxNameBytes)
		ReportTooLong("name", name_bytes, kMaxNameBytes);
	if (key_bytes > kMaxKeyBytes)
		ReportTooLong("key", key_bytes, kMaxKeyBytes);
}

BucketCall
DecodeBucketCall(FunctionCallInfo fcinfo, const char *function)
{
	if (PG_NARGS() != kBucketCallArgs)
		elog(ERROR, "%s() called with %d arguments, expected %d", function, PG_NARGS(),
		     kBucketCallArgs);
	/* Every argument but max_reserved must be given. */
	for (int i = 0; i < kBucketCallArgs - 1; i++)
		if (PG_ARGISNULL(i))
			ReportNullArgument(function, kArgNames[i]);

	BucketCall call;
	call.name = PG_GETARG_TEXT_PP(0);
	call.key = PG_GETARG_TEXT_PP(1);
	call.request.cost = PG_GETARG_FLOAT8(2);
	call.limit.rate = PG_GETARG_FLOAT8(3);
	call.limit.burst = PG_GETARG_FLOAT8(4);
	call.request.reserve = PG_GETARG_BOOL(5);
	call.request.debt_capped = !PG_ARGISNULL(6);
	call.request.max_reserved = call.request.debt_capped ? PG_GETARG_FLOAT8(6) : 0.0;

	CheckNameAndKey(call.name, call.key);
	core::Status status = core::Validate(call.limit, call.request);
	if (status != core::Status::kOk)
		ReportInvalidRequest(status, call.limit, call.request);
	return call;
}

/* Bucket state cannot be read on a standby: its unlogged table is empty. */
void
RequirePrimary(const char *function)
{
	if (RecoveryInProgress())
		ReportRecovery(function);
}

void
RequireWritable(const char *function)
{
	RequirePrimary(function);
	if (XactReadOnly)
		ReportReadOnly(function);
	if (IsInParallelMode())
		ReportParallelMode(function);
}

/* The result row's descriptor, looked up once per call site. */
TupleDesc
ResultDescriptor(FunctionCallInfo fcinfo)
{
	if (fcinfo->flinfo->fn_extra == NULL) {
		TupleDesc desc;
		if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE ||
		    desc->natts != kResultColumns)
			elog(ERROR, "rate limit functions must return rate_limit_decision");
		MemoryContext old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
		desc = CreateTupleDescCopy(desc);
		BlessTupleDesc(desc);
		MemoryContextSwitchTo(old);
		fcinfo->flinfo->fn_extra = desc;
	}
	return static_cast<TupleDesc>(fcinfo->flinfo->fn_extra);
}

Datum
DecisionDatum(FunctionCallInfo fcinfo, const core::Decision &decision, const core::Limit &limit)
{
	Datum values[kResultColumns] = {
	    BoolGetDatum(decision.allowed), Float8GetDatum(decision.remaining),
	    Float8GetDatum(decision.retry_after), Float8GetDatum(decision.reset_after),
	    Float8GetDatum(limit.burst)};
	bool nulls[kResultColumns] = {false, false, false, false, false};
	return HeapTupleGetDatum(heap_form_tuple(ResultDescriptor(fcinfo), values, nulls));
}

} /* namespace */

} /* namespace ratelimit::pg */

using namespace ratelimit;

/* rate_limit_take(name, key, cost, rate, burst, reserve, max_reserved) */
Datum
rate_limit_take(PG_FUNCTION_ARGS)
{
	pg::BucketCall call = pg::DecodeBucketCall(fcinfo, "rate_limit_take");
	pg::RequireWritable("rate_limit_take");
	core::Decision decision =
	    pg::DecideBucket(call.name, call.key, call.limit, call.request, pg::Access::kTake);
	return pg::DecisionDatum(fcinfo, decision, call.limit);
}

/* rate_limit_check(...): the answer take would give, without consuming. */
Datum
rate_limit_check(PG_FUNCTION_ARGS)
{
	pg::BucketCall call = pg::DecodeBucketCall(fcinfo, "rate_limit_check");
	pg::RequirePrimary("rate_limit_check");
	core::Decision decision =
	    pg::DecideBucket(call.name, call.key, call.limit, call.request, pg::Access::kCheck);
	return pg::DecisionDatum(fcinfo, decision, call.limit);
}

/* rate_limit_reset(name, key): forget the bucket; it starts full again. */
Datum
rate_limit_reset(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		pg::ReportNullArgument("rate_limit_reset", "name");
	if (PG_ARGISNULL(1))
		pg::ReportNullArgument("rate_limit_reset", "key");
	text *name = PG_GETARG_TEXT_PP(0);
	text *key = PG_GETARG_TEXT_PP(1);
	pg::CheckNameAndKey(name, key);
	pg::RequireWritable("rate_limit_reset");
	PG_RETURN_BOOL(pg::ResetBucket(name, key));
}

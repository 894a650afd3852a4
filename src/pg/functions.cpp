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
#include "pg/policies.hpp"
#include "pg/sharding.hpp"
#include "pg/storage.hpp"

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

/* Arguments of take and check, in SQL order. */
constexpr const char *kArgNames[] = {"name",  "key",     "cost",        "rate",
                                     "burst", "reserve", "max_reserved"};
constexpr int kBucketCallArgs = 7;

/* What may be NULL, for the hint of a NULL-argument error. */
constexpr const char *kKeyHint = "Use key '' for a limit shared by every caller.";
constexpr const char *kMaxReservedHint =
    "Only max_reserved may be NULL, meaning no cap on reserved debt.";
constexpr const char *kNoNullHint = "Every argument of this function needs a value.";

const char *
NullHint(const char *argument, bool has_max_reserved)
{
	if (strcmp(argument, "key") == 0)
		return kKeyHint;
	return has_max_reserved ? kMaxReservedHint : kNoNullHint;
}
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

/* The buckets of a policy take their rate and burst from it: a call that
 * passes its own could refill them or lock them out. */
void
RefuseGovernedName(text *name, const char *function)
{
	Policy policy;
	if (FindPolicy(name, &policy))
		ReportGovernedName(text_to_cstring(name), function);
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
			ReportNullArgument(function, kArgNames[i], NullHint(kArgNames[i], true));

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
	RefuseGovernedName(call.name, function);
	core::Status status = core::Validate(call.limit, call.request);
	if (status != core::Status::kOk)
		ReportInvalidRequest(status, call.limit, call.request);
	return call;
}

/* (name, key, cost) of a call that takes its limit from a policy. */
struct PolicyCall {
	text *name;
	text *key;
	double number; /* cost or amount */
};

PolicyCall
DecodePolicyCall(FunctionCallInfo fcinfo, const char *function, const char *number_name)
{
	const char *names[] = {"name", "key", number_name};
	if (PG_NARGS() != 3)
		elog(ERROR, "%s() called with %d arguments, expected 3", function, PG_NARGS());
	for (int i = 0; i < 3; i++)
		if (PG_ARGISNULL(i))
			ReportNullArgument(function, names[i], NullHint(names[i], false));
	PolicyCall call;
	call.name = PG_GETARG_TEXT_PP(0);
	call.key = PG_GETARG_TEXT_PP(1);
	call.number = PG_GETARG_FLOAT8(2);
	CheckNameAndKey(call.name, call.key);
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

constexpr ResultColumn kDecisionColumns[kResultColumns] = {{"allowed", BOOLOID},
                                                           {"remaining", FLOAT8OID},
                                                           {"retry_after", FLOAT8OID},
                                                           {"reset_after", FLOAT8OID},
                                                           {"capacity", FLOAT8OID}};
constexpr int kAllResultColumns = 5;
constexpr ResultColumn kAllDecisionColumns[kAllResultColumns] = {{"allowed", BOOLOID},
                                                                 {"retry_after", FLOAT8OID},
                                                                 {"binding_name", TEXTOID},
                                                                 {"binding_key", TEXTOID},
                                                                 {"remaining", FLOAT8ARRAYOID}};
constexpr int kMaxResultColumns = 5;

/* A call site's result row type: a copy of its descriptor, the type cache's
 * identifier of the descriptor it was checked on, and the attribute that
 * holds each column (the type may contain dropped attributes). */
struct ResultType {
	TupleDesc desc;
	uint64 identifier;
	int attribute[kMaxResultColumns];
};

/*
 * The result row type of the function, checked against `columns` (its owner
 * can ALTER TYPE it) and cached per call site.  A cached one is used only
 * while the type cache still holds the descriptor it was checked on: an
 * ALTER TYPE replaces that descriptor even for a call site that lives on,
 * such as a PL/pgSQL expression evaluated again in the same transaction.
 */
const ResultType *
ResultDescriptor(FunctionCallInfo fcinfo, const ResultColumn *columns = kDecisionColumns,
                 int count = kResultColumns)
{
	ResultType *cached = static_cast<ResultType *>(fcinfo->flinfo->fn_extra);
	if (cached != NULL &&
	    lookup_type_cache(cached->desc->tdtypeid, TYPECACHE_TUPDESC)->tupDesc_identifier ==
	        cached->identifier)
		return cached;

	Oid type_id;
	if (get_call_result_type(fcinfo, &type_id, NULL) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "rate limit function does not return a composite type");
	TypeCacheEntry *entry = lookup_type_cache(type_id, TYPECACHE_TUPDESC);
	TupleDesc desc = entry->tupDesc;
	int attribute[kMaxResultColumns];
	int found = 0;
	for (int i = 0; i < desc->natts; i++) {
		Form_pg_attribute att = TupleDescAttr(desc, i);
		if (att->attisdropped)
			continue;
		if (found == count)
			ReportResultTypeAltered(type_id, NameStr(att->attname), att->atttypid, columns, count,
			                        -1);
		if (att->atttypid != columns[found].type)
			ReportResultTypeAltered(type_id, NameStr(att->attname), att->atttypid, columns, count,
			                        found);
		attribute[found++] = i;
	}
	if (found != count)
		ReportResultTypeAltered(type_id, NULL, InvalidOid, columns, count, found);

	if (cached == NULL)
		cached = static_cast<ResultType *>(
		    MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(ResultType)));
	else
		FreeTupleDesc(cached->desc);
	MemoryContext old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
	cached->desc = CreateTupleDescCopy(desc);
	MemoryContextSwitchTo(old);
	cached->identifier = entry->tupDesc_identifier;
	memcpy(cached->attribute, attribute, sizeof(attribute));
	fcinfo->flinfo->fn_extra = cached;
	return cached;
}

/* The result row of `values` (one per column, none NULL). */
Datum
ResultRow(FunctionCallInfo fcinfo, Datum *values, const ResultColumn *columns = kDecisionColumns,
          int count = kResultColumns)
{
	const ResultType *type = ResultDescriptor(fcinfo, columns, count);
	int natts = type->desc->natts;
	if (natts == count) {
		bool nulls[kMaxResultColumns] = {};
		return HeapTupleGetDatum(heap_form_tuple(type->desc, values, nulls));
	}
	/* Dropped attributes in between: NULL there. */
	Datum *row = static_cast<Datum *>(palloc0(sizeof(Datum) * natts));
	bool *nulls = static_cast<bool *>(palloc(sizeof(bool) * natts));
	memset(nulls, true, sizeof(bool) * natts);
	for (int i = 0; i < count; i++) {
		row[type->attribute[i]] = values[i];
		nulls[type->attribute[i]] = false;
	}
	return HeapTupleGetDatum(heap_form_tuple(type->desc, row, nulls));
}

Datum
DecisionDatum(FunctionCallInfo fcinfo, const core::Decision &decision, const core::Limit &limit)
{
	Datum values[kResultColumns] = {
	    BoolGetDatum(decision.allowed), Float8GetDatum(decision.remaining),
	    Float8GetDatum(decision.retry_after), Float8GetDatum(decision.reset_after),
	    Float8GetDatum(limit.burst)};
	return ResultRow(fcinfo, values);
}

/* Seed for the jitter hash, distinct from the new-key lock's. */
constexpr uint64 kJitterSeed = 0x6A6974746572ULL;

/* Take or check (name, key, cost) with policy `name`. */
Datum
PolicyDecision(FunctionCallInfo fcinfo, const char *function, Operation::Kind kind)
{
	PolicyCall call = DecodePolicyCall(fcinfo, function, "cost");
	if (kind == Operation::kTake)
		RequireWritable(function);
	else
		RequirePrimary(function);
	Policy policy = LookupPolicy(call.name);
	core::Limit limit = PolicyLimit(policy, call.name, call.key);
	core::Request request{call.number, false, false, 0.0};
	core::Status status = core::Validate(limit, request);
	if (status != core::Status::kOk)
		ReportInvalidRequest(status, limit, request);
	core::Decision decision;
	if (policy.shards > 1) {
		decision = ShardedDecision(call.name, call.key, policy, limit, kind, call.number);
	} else {
		Operation operation{kind, request, 0.0, policy.has_initial, policy.initial};
		decision = DecideBucket(call.name, call.key, limit, operation);
	}
	if (policy.jitter > 0.0)
		decision.retry_after = core::Jittered(decision.retry_after, policy.jitter,
		                                      BucketHash(call.name, call.key, kJitterSeed));
	return DecisionDatum(fcinfo, decision, limit);
}

/* Most limits one rate_limit_take_all call takes: rows it locks at once. */
constexpr int kMaxLimits = 64;

/* Elements of a one-dimensional array argument, none NULL. */
int
ArrayElements(ArrayType *array, Oid type, int16 length, bool by_value, char align, const char *what,
              Datum **elements)
{
	bool *nulls;
	int count;
	if (ARR_NDIM(array) > 1)
		ReportBadLimitList(psprintf("%s has %d dimensions.", what, ARR_NDIM(array)));
	deconstruct_array(array, type, length, by_value, align, elements, &nulls, &count);
	for (int i = 0; i < count; i++)
		if (nulls[i])
			ReportNullArgument("rate_limit_take_all", psprintf("%s[%d]", what, i + 1),
			                   "Every element of names, keys and costs needs a value.");
	return count;
}

/* qsort_arg comparator over positions into a BucketTake array. */
int
ComparePositions(const void *a, const void *b, void *arg)
{
	const BucketTake *takes = static_cast<const BucketTake *>(arg);
	return TakeOrder(&takes[*static_cast<const int *>(a)], &takes[*static_cast<const int *>(b)]);
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
	core::Decision decision = pg::DecideBucket(call.name, call.key, call.limit,
	                                           {pg::Operation::kTake, call.request, 0.0});
	return pg::DecisionDatum(fcinfo, decision, call.limit);
}

/* rate_limit_check(...): the answer take would give, without consuming. */
Datum
rate_limit_check(PG_FUNCTION_ARGS)
{
	pg::BucketCall call = pg::DecodeBucketCall(fcinfo, "rate_limit_check");
	pg::RequirePrimary("rate_limit_check");
	core::Decision decision = pg::DecideBucket(call.name, call.key, call.limit,
	                                           {pg::Operation::kCheck, call.request, 0.0});
	return pg::DecisionDatum(fcinfo, decision, call.limit);
}

/* rate_limit_reset(name, key): forget the bucket; it starts full again. */
Datum
rate_limit_reset(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		pg::ReportNullArgument("rate_limit_reset", "name", pg::NullHint("name", false));
	if (PG_ARGISNULL(1))
		pg::ReportNullArgument("rate_limit_reset", "key", pg::NullHint("key", false));
	text *name = PG_GETARG_TEXT_PP(0);
	text *key = PG_GETARG_TEXT_PP(1);
	pg::CheckNameAndKey(name, key);
	pg::RequireWritable("rate_limit_reset");
	bool existed = pg::ResetBucket(name, key);
	pg::Policy policy;
	if (pg::FindPolicy(name, &policy) && pg::ResetShards(name, key, policy))
		existed = true;
	PG_RETURN_BOOL(existed);
}

/* rate_limit_take(name, key, cost): the limit of policy `name`. */
Datum
rate_limit_take_policy(PG_FUNCTION_ARGS)
{
	return pg::PolicyDecision(fcinfo, "rate_limit_take", pg::Operation::kTake);
}

/* rate_limit_check(name, key, cost): the limit of policy `name`. */
Datum
rate_limit_check_policy(PG_FUNCTION_ARGS)
{
	return pg::PolicyDecision(fcinfo, "rate_limit_check", pg::Operation::kCheck);
}

/* rate_limit_refund(name, key, amount, rate, burst): tokens back, capped. */
Datum
rate_limit_refund(PG_FUNCTION_ARGS)
{
	static const char *const names[] = {"name", "key", "amount", "rate", "burst"};
	if (PG_NARGS() != 5)
		elog(ERROR, "rate_limit_refund() called with %d arguments, expected 5", PG_NARGS());
	for (int i = 0; i < 5; i++)
		if (PG_ARGISNULL(i))
			pg::ReportNullArgument("rate_limit_refund", names[i], pg::NullHint(names[i], false));
	text *name = PG_GETARG_TEXT_PP(0);
	text *key = PG_GETARG_TEXT_PP(1);
	double amount = PG_GETARG_FLOAT8(2);
	core::Limit limit{PG_GETARG_FLOAT8(3), PG_GETARG_FLOAT8(4)};
	pg::CheckNameAndKey(name, key);
	pg::RefuseGovernedName(name, "rate_limit_refund");
	core::Request nothing{0.0, false, false, 0.0};
	core::Status status = core::Validate(limit, nothing);
	if (status != core::Status::kOk)
		pg::ReportInvalidRequest(status, limit, nothing);
	if (core::ValidateRefund(amount) != core::Status::kOk)
		pg::ReportInvalidAmount(amount);
	pg::RequireWritable("rate_limit_refund");
	core::Decision decision =
	    pg::DecideBucket(name, key, limit, {pg::Operation::kRefund, nothing, amount});
	return pg::DecisionDatum(fcinfo, decision, limit);
}

/* rate_limit_refund(name, key, amount): the limit of policy `name`. */
Datum
rate_limit_refund_policy(PG_FUNCTION_ARGS)
{
	pg::PolicyCall call = pg::DecodePolicyCall(fcinfo, "rate_limit_refund", "amount");
	if (core::ValidateRefund(call.number) != core::Status::kOk)
		pg::ReportInvalidAmount(call.number);
	pg::RequireWritable("rate_limit_refund");
	pg::Policy policy = pg::LookupPolicy(call.name);
	core::Request nothing{0.0, false, false, 0.0};
	pg::Operation operation{pg::Operation::kRefund, nothing, call.number, policy.has_initial,
	                        policy.initial};
	core::Limit limit = pg::PolicyLimit(policy, call.name, call.key);
	core::Decision decision;
	if (policy.shards > 1) {
		decision = pg::ShardedRefund(call.name, call.key, policy, limit, call.number);
	} else {
		decision = pg::DecideBucket(call.name, call.key, limit, operation);
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
	if (PG_ARGISNULL(0))
		pg::ReportNullArgument("rate_limit_take_all", "names", pg::NullHint("names", false));
	if (PG_ARGISNULL(1))
		pg::ReportNullArgument("rate_limit_take_all", "keys", pg::NullHint("keys", false));
	Datum *names;
	Datum *keys;
	Datum *costs = NULL;
	int count = pg::ArrayElements(PG_GETARG_ARRAYTYPE_P(0), TEXTOID, -1, false, TYPALIGN_INT,
	                              "names", &names);
	int key_count = pg::ArrayElements(PG_GETARG_ARRAYTYPE_P(1), TEXTOID, -1, false, TYPALIGN_INT,
	                                  "keys", &keys);
	int cost_count = count;
	if (!PG_ARGISNULL(2))
		cost_count = pg::ArrayElements(PG_GETARG_ARRAYTYPE_P(2), FLOAT8OID, 8, FLOAT8PASSBYVAL,
		                               TYPALIGN_DOUBLE, "costs", &costs);
	if (count == 0)
		pg::ReportBadLimitList("No limit was given.");
	if (key_count != count || cost_count != count)
		pg::ReportBadLimitList(psprintf("The lengths of names, keys and costs are %d, %d and %d.",
		                                count, key_count, cost_count));
	if (count > pg::kMaxLimits)
		pg::ReportTooManyLimits(count, pg::kMaxLimits);
	pg::RequireWritable("rate_limit_take_all");

	/* One entry per argument position, then sorted positions. */
	pg::BucketTake *given = static_cast<pg::BucketTake *>(palloc0(sizeof(pg::BucketTake) * count));
	int *sorted = static_cast<int *>(palloc(sizeof(int) * count));
	for (int i = 0; i < count; i++) {
		text *name = DatumGetTextPP(names[i]);
		text *key = DatumGetTextPP(keys[i]);
		pg::CheckNameAndKey(name, key);
		pg::Policy policy = pg::LookupPolicy(name);
		if (policy.shards > 1)
			pg::ReportShardedTakeAll(text_to_cstring(name));
		core::Limit limit = pg::PolicyLimit(policy, name, key);
		core::Request request{costs != NULL ? DatumGetFloat8(costs[i]) : 1.0, false, false, 0.0};
		core::Status status = core::Validate(limit, request);
		if (status != core::Status::kOk)
			pg::ReportInvalidRequest(status, limit, request);
		given[i] = pg::BucketTake{
		    name, key, limit, request, policy.has_initial, policy.initial, core::Decision{}};
		sorted[i] = i;
	}
	qsort_arg(sorted, count, sizeof(int), pg::ComparePositions, given);

	/* Merge repeated buckets (their costs add up) in canonical order. */
	pg::BucketTake *takes = static_cast<pg::BucketTake *>(palloc0(sizeof(pg::BucketTake) * count));
	int *bucket_of = static_cast<int *>(palloc(sizeof(int) * count));
	int buckets = 0;
	for (int i = 0; i < count; i++) {
		int position = sorted[i];
		if (buckets > 0 && pg::TakeOrder(&takes[buckets - 1], &given[position]) == 0) {
			pg::BucketTake &merged = takes[buckets - 1];
			merged.request.cost += given[position].request.cost;
			if (merged.request.cost > merged.limit.burst)
				pg::ReportMergedCostExceedsBurst(text_to_cstring(merged.name),
				                                 text_to_cstring(merged.key), merged.limit.burst);
		} else {
			takes[buckets++] = given[position];
		}
		bucket_of[position] = buckets - 1;
	}
	for (int b = 0; b < buckets; b++) {
		core::Status status = core::Validate(takes[b].limit, takes[b].request);
		if (status != core::Status::kOk)
			pg::ReportInvalidRequest(status, takes[b].limit, takes[b].request);
	}

	bool allowed = pg::TakeAll(takes, buckets);

	/* Binding limit: denied, the one to wait longest for; granted, the one
	 * left with the smallest share of its burst.  Ties: first given. */
	int binding = -1;
	for (int i = 0; i < count; i++) {
		const pg::BucketTake &t = takes[bucket_of[i]];
		if (binding < 0) {
			binding = i;
			continue;
		}
		const pg::BucketTake &best = takes[bucket_of[binding]];
		bool better =
		    allowed
		        ? t.decision.remaining / t.limit.burst < best.decision.remaining / best.limit.burst
		        : (!t.decision.allowed &&
		           (best.decision.allowed || t.decision.retry_after > best.decision.retry_after));
		if (better)
			binding = i;
	}
	const pg::BucketTake &bound = takes[bucket_of[binding]];

	Datum *remaining = static_cast<Datum *>(palloc(sizeof(Datum) * count));
	for (int i = 0; i < count; i++)
		remaining[i] = Float8GetDatum(takes[bucket_of[i]].decision.remaining);
	Datum values[pg::kAllResultColumns] = {
	    BoolGetDatum(allowed), Float8GetDatum(allowed ? 0.0 : bound.decision.retry_after),
	    PointerGetDatum(bound.name), PointerGetDatum(bound.key),
	    PointerGetDatum(
	        construct_array(remaining, count, FLOAT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE))};
	return pg::ResultRow(fcinfo, values, pg::kAllDecisionColumns, pg::kAllResultColumns);
}

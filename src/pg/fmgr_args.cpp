/*
 * src/pg/fmgr_args.cpp
 *
 * Argument tables, decoders and result rows of the SQL-callable functions.
 * Decoding checks the argument count and NULLs against the signature's
 * table, then reads the values in SQL order and checks them: a decoded call
 * holds only values the limiter can work with.  Only plain data is alive
 * here: a PostgreSQL error is a longjmp that skips C++ destructors.
 */
#include "pg/fmgr_args.hpp"

#include "pg/errors.hpp"
#include "pg/policies.hpp"

namespace ratelimit::pg {

namespace {

/* Hints of the NULL-argument errors: what may be NULL instead. */
constexpr const char *kKeyHint = "Use key '' for a limit shared by every caller.";
constexpr const char *kMaxReservedHint =
    "Only max_reserved may be NULL, meaning no cap on reserved debt.";
constexpr const char *kNoNullHint = "Every argument of this function needs a value.";

/* One table per SQL signature: its arguments in SQL order. */
/* clang-format off */
constexpr ArgSpec kBucketArgs[] = {
    {"name", kMaxReservedHint},
    {"key", kKeyHint},
    {"cost", kMaxReservedHint},
    {"rate", kMaxReservedHint},
    {"burst", kMaxReservedHint},
    {"reserve", kMaxReservedHint},
    {"max_reserved", kNullAllowed},
};
constexpr ArgSpec kPolicyCostArgs[] = {
    {"name", kNoNullHint},
    {"key", kKeyHint},
    {"cost", kNoNullHint},
};
constexpr ArgSpec kRefundArgs[] = {
    {"name", kNoNullHint},
    {"key", kKeyHint},
    {"amount", kNoNullHint},
    {"rate", kNoNullHint},
    {"burst", kNoNullHint},
};
constexpr ArgSpec kPolicyAmountArgs[] = {
    {"name", kNoNullHint},
    {"key", kKeyHint},
    {"amount", kNoNullHint},
};
constexpr ArgSpec kKeyArgs[] = {
    {"name", kNoNullHint},
    {"key", kKeyHint},
};
constexpr ArgSpec kTakeAllArgs[] = {
    {"names", kNoNullHint},
    {"keys", kNoNullHint},
    {"costs", kNullAllowed},
};
/* clang-format on */

} /* namespace */

const Signature kTakeSignature = {"rate_limit_take", kBucketArgs, lengthof(kBucketArgs)};
const Signature kCheckSignature = {"rate_limit_check", kBucketArgs, lengthof(kBucketArgs)};
const Signature kTakePolicySignature = {"rate_limit_take", kPolicyCostArgs,
                                        lengthof(kPolicyCostArgs)};
const Signature kCheckPolicySignature = {"rate_limit_check", kPolicyCostArgs,
                                         lengthof(kPolicyCostArgs)};
const Signature kRefundSignature = {"rate_limit_refund", kRefundArgs, lengthof(kRefundArgs)};
const Signature kRefundPolicySignature = {"rate_limit_refund", kPolicyAmountArgs,
                                          lengthof(kPolicyAmountArgs)};
const Signature kResetSignature = {"rate_limit_reset", kKeyArgs, lengthof(kKeyArgs)};
const Signature kTakeAllSignature = {"rate_limit_take_all", kTakeAllArgs, lengthof(kTakeAllArgs)};

namespace {

/* The argument count, then every NULL where the signature wants a value. */
void
CheckArgs(FunctionCallInfo fcinfo, const Signature &signature)
{
	if (PG_NARGS() != signature.count)
		elog(ERROR, "%s() called with %d arguments, expected %d", signature.function, PG_NARGS(),
		     signature.count);
	for (int i = 0; i < signature.count; i++)
		if (signature.args[i].null_hint != kNullAllowed && PG_ARGISNULL(i))
			ReportNullArgument(signature.function, signature.args[i].name,
			                   signature.args[i].null_hint);
}

/* CheckArgs, then the leading (name, key) of a call that names one bucket. */
void
DecodeNameAndKey(FunctionCallInfo fcinfo, const Signature &signature, text **name, text **key)
{
	CheckArgs(fcinfo, signature);
	*name = PG_GETARG_TEXT_PP(0);
	*key = PG_GETARG_TEXT_PP(1);
	CheckNameAndKey(*name, *key);
}

/* The buckets of a policy take their rate and burst from it: a call that
 * passes its own could refill them or lock them out. */
void
RefuseGovernedName(text *name, const Signature &signature)
{
	Policy policy;
	if (FindPolicy(name, &policy))
		ReportGovernedName(text_to_cstring(name), signature.function);
}

void
CheckAmount(double amount)
{
	if (core::ValidateRefund(amount) != core::Status::kOk)
		ReportInvalidAmount(amount);
}

} /* namespace */

BucketCall
DecodeBucketCall(FunctionCallInfo fcinfo, const Signature &signature)
{
	Assert(signature.args == kBucketArgs);
	BucketCall call;
	DecodeNameAndKey(fcinfo, signature, &call.name, &call.key);
	call.request.cost = PG_GETARG_FLOAT8(2);
	call.limit.rate = PG_GETARG_FLOAT8(3);
	call.limit.burst = PG_GETARG_FLOAT8(4);
	call.request.reserve = PG_GETARG_BOOL(5);
	call.request.debt_capped = !PG_ARGISNULL(6);
	call.request.max_reserved = call.request.debt_capped ? PG_GETARG_FLOAT8(6) : 0.0;
	RefuseGovernedName(call.name, signature);
	CheckRequest(call.limit, call.request);
	return call;
}

RefundCall
DecodeRefundCall(FunctionCallInfo fcinfo)
{
	RefundCall call;
	DecodeNameAndKey(fcinfo, kRefundSignature, &call.name, &call.key);
	call.amount = PG_GETARG_FLOAT8(2);
	call.limit = core::Limit{PG_GETARG_FLOAT8(3), PG_GETARG_FLOAT8(4)};
	RefuseGovernedName(call.name, kRefundSignature);
	CheckRequest(call.limit, core::Request::Plain(0.0));
	CheckAmount(call.amount);
	return call;
}

PolicyCall
DecodePolicyCall(FunctionCallInfo fcinfo, const Signature &signature)
{
	Assert(signature.args == kPolicyCostArgs);
	PolicyCall call;
	DecodeNameAndKey(fcinfo, signature, &call.name, &call.key);
	call.cost = PG_GETARG_FLOAT8(2);
	return call;
}

PolicyRefundCall
DecodePolicyRefundCall(FunctionCallInfo fcinfo)
{
	PolicyRefundCall call;
	DecodeNameAndKey(fcinfo, kRefundPolicySignature, &call.name, &call.key);
	call.amount = PG_GETARG_FLOAT8(2);
	CheckAmount(call.amount);
	return call;
}

KeyCall
DecodeKeyCall(FunctionCallInfo fcinfo)
{
	KeyCall call;
	DecodeNameAndKey(fcinfo, kResetSignature, &call.name, &call.key);
	return call;
}

TakeAllCall
DecodeTakeAllCall(FunctionCallInfo fcinfo)
{
	CheckArgs(fcinfo, kTakeAllSignature);
	TakeAllCall call;
	call.names = PG_GETARG_ARRAYTYPE_P(0);
	call.keys = PG_GETARG_ARRAYTYPE_P(1);
	call.costs = PG_ARGISNULL(2) ? NULL : PG_GETARG_ARRAYTYPE_P(2);
	return call;
}

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

void
CheckRequest(const core::Limit &limit, const core::Request &request)
{
	core::Status status = core::Validate(limit, request);
	if (status != core::Status::kOk)
		ReportInvalidRequest(status, limit, request);
}

void
RequirePrimary(const Signature &signature)
{
	if (RecoveryInProgress())
		ReportRecovery(signature.function);
}

void
RequireWritable(const Signature &signature)
{
	RequirePrimary(signature);
	if (XactReadOnly)
		ReportReadOnly(signature.function);
	if (IsInParallelMode())
		ReportParallelMode(signature.function);
}

namespace {

constexpr ResultColumn kDecisionColumns[] = {
    {"allowed", BOOLOID},       {"remaining", FLOAT8OID}, {"retry_after", FLOAT8OID},
    {"reset_after", FLOAT8OID}, {"capacity", FLOAT8OID},  {"name", TEXTOID},
    {"quota", FLOAT8OID},       {"per", INTERVALOID},     {"refill_after", FLOAT8OID}};
constexpr ResultColumn kAllDecisionColumns[] = {
    {"allowed", BOOLOID},     {"retry_after", FLOAT8OID},    {"binding_name", TEXTOID},
    {"binding_key", TEXTOID}, {"remaining", FLOAT8ARRAYOID}, {"decisions", InvalidOid}};
/* The columns of the 0.1.0 and 0.2.0 row types, which a database not yet
 * updated still has: the first ones of each. */
constexpr int kLegacyColumns = 5;
constexpr int kMaxResultColumns = 9;
static_assert(lengthof(kDecisionColumns) <= kMaxResultColumns &&
                  lengthof(kAllDecisionColumns) <= kMaxResultColumns,
              "kMaxResultColumns too small");

/* A call site's result row type: a copy of its descriptor, the type cache's
 * identifier of the descriptor it was checked on, and the attribute that
 * holds each column (the type may contain dropped attributes). */
struct ResultType {
	TupleDesc desc;
	uint64 identifier;
	int columns; /* of `columns`: all, or the legacy ones */
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
ResultDescriptor(FunctionCallInfo fcinfo, const ResultColumn *columns, int count)
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
		if (columns[found].type != InvalidOid && att->atttypid != columns[found].type)
			ReportResultTypeAltered(type_id, NameStr(att->attname), att->atttypid, columns, count,
			                        found);
		attribute[found++] = i;
	}
	if (found != count && found != kLegacyColumns)
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
	cached->columns = found;
	memcpy(cached->attribute, attribute, sizeof(attribute));
	fcinfo->flinfo->fn_extra = cached;
	return cached;
}

/* The result row of `values` (one per column; NULL where `nulls` says so,
 * or nowhere when it is NULL), as many of them as the row type has. */
Datum
ResultRow(FunctionCallInfo fcinfo, Datum *values, const bool *nulls, const ResultColumn *columns,
          int count)
{
	const ResultType *type = ResultDescriptor(fcinfo, columns, count);
	int natts = type->desc->natts;
	Datum *row = static_cast<Datum *>(palloc0(sizeof(Datum) * natts));
	bool *row_nulls = static_cast<bool *>(palloc(sizeof(bool) * natts));
	/* Dropped attributes in between: NULL there. */
	memset(row_nulls, true, sizeof(bool) * natts);
	for (int i = 0; i < type->columns; i++) {
		row[type->attribute[i]] = values[i];
		row_nulls[type->attribute[i]] = nulls != NULL && nulls[i];
	}
	return HeapTupleGetDatum(heap_form_tuple(type->desc, row, row_nulls));
}

} /* namespace */

Datum
DecisionDatum(FunctionCallInfo fcinfo, const core::Decision &decision, const core::Limit &limit)
{
	Datum values[lengthof(kDecisionColumns)] = {
	    BoolGetDatum(decision.allowed), Float8GetDatum(decision.remaining),
	    Float8GetDatum(decision.retry_after), Float8GetDatum(decision.reset_after),
	    Float8GetDatum(limit.burst)};
	bool nulls[lengthof(kDecisionColumns)] = {false, false, false, false, false,
	                                          true,  true,  true,  true};
	return ResultRow(fcinfo, values, nulls, kDecisionColumns, lengthof(kDecisionColumns));
}

Datum
AllDecisionDatum(FunctionCallInfo fcinfo, const AllDecision &decision)
{
	Datum values[lengthof(kAllDecisionColumns)] = {
	    BoolGetDatum(decision.allowed), Float8GetDatum(decision.retry_after),
	    PointerGetDatum(decision.binding_name), PointerGetDatum(decision.binding_key),
	    PointerGetDatum(decision.remaining)};
	bool nulls[lengthof(kAllDecisionColumns)] = {false, false, false, false, false, true};
	return ResultRow(fcinfo, values, nulls, kAllDecisionColumns, lengthof(kAllDecisionColumns));
}

} /* namespace ratelimit::pg */

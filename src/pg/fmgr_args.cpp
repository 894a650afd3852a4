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

#include <cmath>

#include "pg/errors.hpp"
#include "pg/policies.hpp"
#include "pg/storage.hpp"

namespace ratelimit::pg {

namespace {

/* Hints of the NULL-argument errors: what may be NULL instead. */
constexpr const char *kKeyHint = "Use key '' for a limit shared by every caller.";
constexpr const char *kMaxReservedHint =
    "Only max_reserved may be NULL, meaning no cap on reserved debt.";
constexpr const char *kNoNullHint = "Every argument of this function needs a value.";
constexpr const char *kPerHint = "Only burst (meaning the rate), max_wait (meaning no reservation) "
                                 "and max_reserved (meaning no cap on reserved debt) may be NULL.";
constexpr const char *kBurstHint = "Only burst may be NULL, meaning the rate.";
constexpr const char *kWaitHint = "Only max_wait may be NULL, meaning no reservation.";
constexpr const char *kCostsWaitHint =
    "Only costs (meaning 1 each) and max_wait (meaning no reservation) may be NULL.";

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
constexpr ArgSpec kPerArgs[] = {
    {"name", kPerHint},
    {"key", kKeyHint},
    {"cost", kPerHint},
    {"rate", kPerHint},
    {"per", kPerHint},
    {"burst", kNullAllowed},
    {"max_wait", kNullAllowed},
    {"max_reserved", kNullAllowed},
};
constexpr ArgSpec kPolicyWaitArgs[] = {
    {"name", kWaitHint},
    {"key", kKeyHint},
    {"cost", kWaitHint},
    {"max_wait", kNullAllowed},
};
constexpr ArgSpec kRefundPerArgs[] = {
    {"name", kBurstHint},
    {"key", kKeyHint},
    {"amount", kBurstHint},
    {"rate", kBurstHint},
    {"per", kBurstHint},
    {"burst", kNullAllowed},
};
constexpr ArgSpec kTakeAllWaitArgs[] = {
    {"names", kCostsWaitHint},
    {"keys", kCostsWaitHint},
    {"costs", kNullAllowed},
    {"max_wait", kNullAllowed},
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
constexpr ArgSpec kPurgeArgs[] = {
    {"name", kNullAllowed},
    {"purged", kNullAllowed},
};
constexpr ArgSpec kResetLimitArgs[] = {
    {"name", "Pass the name of the limit whose buckets to reset."},
    {"reset", kNullAllowed},
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
const Signature kPurgeSignature = {"rate_limit_purge", kPurgeArgs, lengthof(kPurgeArgs)};
constexpr ArgSpec kBucketsArgs[] = {
    {"name", "Pass the name of the limit whose buckets to list."},
};
const Signature kBucketsSignature = {"rate_limit_buckets", kBucketsArgs, lengthof(kBucketsArgs)};
constexpr ArgSpec kStatsResetArgs[] = {
    {"name", kNullAllowed},
};
const Signature kStatsSignature = {"rate_limit_stats", NULL, 0};
const Signature kMemoryStatsSignature = {"rate_limit_memory_stats", NULL, 0};
const Signature kStatsResetSignature = {"rate_limit_stats_reset", kStatsResetArgs,
                                        lengthof(kStatsResetArgs)};
const Signature kResetLimitSignature = {"rate_limit_reset_limit", kResetLimitArgs,
                                        lengthof(kResetLimitArgs)};
const Signature kTakeAllSignature = {"rate_limit_take_all", kTakeAllArgs, lengthof(kTakeAllArgs)};
const Signature kTakePerSignature = {"rate_limit_take_explicit", kPerArgs, lengthof(kPerArgs)};
const Signature kCheckPerSignature = {"rate_limit_check_explicit", kPerArgs, lengthof(kPerArgs)};
const Signature kTakePolicyWaitSignature = {"rate_limit_take", kPolicyWaitArgs,
                                            lengthof(kPolicyWaitArgs)};
const Signature kCheckPolicyWaitSignature = {"rate_limit_check", kPolicyWaitArgs,
                                             lengthof(kPolicyWaitArgs)};
const Signature kRefundPerSignature = {"rate_limit_refund_explicit", kRefundPerArgs,
                                       lengthof(kRefundPerArgs)};
const Signature kLeaseSignature = {"rate_limit_lease", kPolicyCostArgs, lengthof(kPolicyCostArgs)};
const Signature kReleaseSignature = {"rate_limit_release", NULL, 0};
const Signature kTakeAllWaitSignature = {"rate_limit_take_all", kTakeAllWaitArgs,
                                         lengthof(kTakeAllWaitArgs)};

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

/* The length of `interval` in seconds, as date_part('epoch', ...) counts it
 * (30-day months, 365.25-day years): how rate_limit_define counts `per`.
 * Infinite intervals (PostgreSQL 17) last +-Infinity seconds. */
double
IntervalSeconds(Interval *interval)
{
	return DatumGetFloat8(DirectFunctionCall2(interval_part, CStringGetTextDatum("epoch"),
	                                          IntervalPGetDatum(interval)));
}

/* Argument `arg`, max_wait, in seconds: 0 (no reservation) when NULL,
 * +inf for an infinite interval (no time cap); 22023 when negative. */
double
MaxWaitArg(FunctionCallInfo fcinfo, int arg)
{
	if (PG_ARGISNULL(arg))
		return 0.0;
	Interval *given = PG_GETARG_INTERVAL_P(arg);
	double seconds = IntervalSeconds(given);
	if (!(seconds >= 0.0))
		ReportNegativeMaxWait(given);
	return seconds;
}

/* The limit of arguments rate, per and burst (NULL: the rate) from
 * argument `first` on, in tokens per second; its label into *label. */
core::Limit
PerPeriodLimit(FunctionCallInfo fcinfo, int first, LimitLabel *label)
{
	double rate = PG_GETARG_FLOAT8(first);
	Interval *per = PG_GETARG_INTERVAL_P(first + 1);
	double seconds = IntervalSeconds(per);
	if (!(std::isfinite(seconds) && std::round(seconds * 1e6) >= 1.0))
		ReportInvalidPeriod("per", per, seconds);
	core::Limit limit{rate, PG_ARGISNULL(first + 2) ? rate : PG_GETARG_FLOAT8(first + 2)};
	if (core::Validate(limit, core::Request::Plain(0.0)) == core::Status::kRateInvalid)
		ReportInvalidRequest(core::Status::kRateInvalid, limit, core::Request::Plain(0.0),
		                     CallForm::kPerPeriod, rate);
	limit.rate = rate / seconds;
	if (rate > 0.0 && !(limit.rate > 0.0 && std::isfinite(limit.rate)))
		ReportRateOutOfRange(rate, per);
	label->quota = rate;
	label->per = *per;
	return limit;
}

/* The limit of an explicit call from argument 3 on: rate per second and
 * burst (the 0.1.0 forms), or rate, per and burst; its label into *label.
 * Returns the form, for the messages of CheckRequest. */
CallForm
ExplicitLimit(FunctionCallInfo fcinfo, bool per_second, text *name, core::Limit *limit,
              LimitLabel *label)
{
	if (per_second) {
		*limit = core::Limit{PG_GETARG_FLOAT8(3), PG_GETARG_FLOAT8(4)};
		*label = PerSecondLabel(name, limit->rate);
		return CallForm::kPerSecond;
	}
	label->name = name;
	*limit = PerPeriodLimit(fcinfo, 3, label);
	return CallForm::kPerPeriod;
}

} /* namespace */

LimitLabel
PerSecondLabel(text *name, double rate)
{
	LimitLabel label;
	label.name = name;
	label.quota = rate;
	label.per.time = USECS_PER_SEC;
	label.per.day = 0;
	label.per.month = 0;
	return label;
}

BucketCall
DecodeBucketCall(FunctionCallInfo fcinfo, const Signature &signature)
{
	Assert(signature.args == kBucketArgs || signature.args == kPerArgs);
	BucketCall call;
	DecodeNameAndKey(fcinfo, signature, &call.name, &call.key);
	RefuseGovernedName(call.name, signature);
	const double cost = PG_GETARG_FLOAT8(2);
	const bool per_second = signature.args == kBucketArgs;
	const CallForm form = ExplicitLimit(fcinfo, per_second, call.name, &call.limit, &call.label);
	if (per_second) {
		call.request = core::Request::Plain(cost);
		call.request.reserve = PG_GETARG_BOOL(5);
	} else {
		call.request = core::Request::Within(cost, MaxWaitArg(fcinfo, 6));
	}
	call.request.debt_capped = !PG_ARGISNULL(signature.count - 1);
	call.request.max_reserved =
	    call.request.debt_capped ? PG_GETARG_FLOAT8(signature.count - 1) : 0.0;
	CheckRequest(call.limit, call.request, form);
	return call;
}

RefundCall
DecodeRefundCall(FunctionCallInfo fcinfo, const Signature &signature)
{
	Assert(signature.args == kRefundArgs || signature.args == kRefundPerArgs);
	RefundCall call;
	DecodeNameAndKey(fcinfo, signature, &call.name, &call.key);
	call.amount = PG_GETARG_FLOAT8(2);
	RefuseGovernedName(call.name, signature);
	const CallForm form =
	    ExplicitLimit(fcinfo, signature.args == kRefundArgs, call.name, &call.limit, &call.label);
	CheckRequest(call.limit, core::Request::Plain(0.0), form);
	CheckAmount(call.amount);
	return call;
}

PolicyCall
DecodePolicyCall(FunctionCallInfo fcinfo, const Signature &signature)
{
	Assert(signature.args == kPolicyCostArgs || signature.args == kPolicyWaitArgs);
	PolicyCall call;
	DecodeNameAndKey(fcinfo, signature, &call.name, &call.key);
	call.cost = PG_GETARG_FLOAT8(2);
	call.max_wait = signature.args == kPolicyWaitArgs ? MaxWaitArg(fcinfo, 3) : 0.0;
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

NameCall
DecodeNameCall(FunctionCallInfo fcinfo, const Signature &signature)
{
	Assert(signature.args == kPurgeArgs || signature.args == kResetLimitArgs ||
	       signature.args == kBucketsArgs || signature.args == kStatsResetArgs);
	CheckArgs(fcinfo, signature);
	NameCall call = {PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0)};
	if (call.name != NULL) {
		const int name_bytes = VARSIZE_ANY_EXHDR(call.name);
		if (name_bytes == 0)
			ReportEmptyName();
		if (name_bytes > kMaxNameBytes)
			ReportTooLong("name", name_bytes, kMaxNameBytes);
	}
	return call;
}

ResultSet
BeginResultSet(FunctionCallInfo fcinfo, const Signature &signature)
{
	ReturnSetInfo *rsinfo = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);
	if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo) ||
	    (rsinfo->allowedModes & SFRM_Materialize) == 0)
		ereport(ERROR,
		        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		         errmsg("%s() must be called where a set of rows is accepted", signature.function),
		         errhint("Call it in FROM: SELECT * FROM %s(...).", signature.function)));
	TupleDesc desc;
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "%s must return rows", signature.function);
	MemoryContext outer = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	ResultSet set = {tuplestore_begin_heap(true, false, work_mem), CreateTupleDescCopy(desc)};
	MemoryContextSwitchTo(outer);
	rsinfo->returnMode = SFRM_Materialize;
	rsinfo->setResult = set.store;
	rsinfo->setDesc = set.desc;
	return set;
}

Datum
CountResultDatum(FunctionCallInfo fcinfo, const Signature &signature, int64 count)
{
	TupleDesc desc;
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE || desc->natts != 1 ||
	    TupleDescAttr(desc, 0)->atttypid != INT8OID)
		elog(ERROR, "%s must return one bigint", signature.function);
	Datum value = Int64GetDatum(count);
	bool null = false;
	return HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), &value, &null));
}

TakeAllCall
DecodeTakeAllCall(FunctionCallInfo fcinfo, const Signature &signature)
{
	Assert(signature.args == kTakeAllArgs || signature.args == kTakeAllWaitArgs);
	CheckArgs(fcinfo, signature);
	TakeAllCall call;
	call.names = PG_GETARG_ARRAYTYPE_P(0);
	call.keys = PG_GETARG_ARRAYTYPE_P(1);
	call.costs = PG_ARGISNULL(2) ? NULL : PG_GETARG_ARRAYTYPE_P(2);
	call.max_wait = signature.args == kTakeAllWaitArgs ? MaxWaitArg(fcinfo, 3) : 0.0;
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
CheckRequest(const core::Limit &limit, const core::Request &request, CallForm form)
{
	core::Status status = core::Validate(limit, request);
	if (status != core::Status::kOk)
		ReportInvalidRequest(status, limit, request, form, limit.rate);
}

void
RequirePrimary(const Signature &signature)
{
	if (RecoveryInProgress())
		ReportRecovery(signature.function, BucketStateIsLogged());
}

void
RequireReadable(const Signature &signature)
{
	if (RecoveryInProgress() && !BucketStateIsLogged())
		ReportRecovery(signature.function, false);
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

void
RequireEngine(const BucketEngine &engine, const Signature &signature, bool writes)
{
	if (engine.writes_tables) {
		if (writes)
			RequireWritable(signature);
		else
			RequireReadable(signature);
	} else if (writes && IsInParallelMode()) {
		ReportParallelMode(signature.function);
	}
}

void
RequireHolds(const Signature &signature, text *name, bool take)
{
	if (RecoveryInProgress())
		ReportHoldRecovery(signature.function);
	if (!take)
		return;
	if (!IsTransactionBlock())
		ReportHoldOutsideBlock(signature.function, text_to_cstring(name));
	if (IsInParallelMode())
		ReportParallelMode(signature.function);
}

void
RequireLeaseWrite(const Signature &signature, bool release)
{
	if (RecoveryInProgress())
		ReportLeaseRecovery(signature.function);
	if (XactReadOnly)
		ReportLeaseReadOnly(signature.function, release);
	if (IsInParallelMode())
		ReportParallelMode(signature.function);
}

namespace {

constexpr ResultColumn kDecisionColumns[] = {
    {"allowed", BOOLOID},       {"remaining", FLOAT8OID}, {"retry_after", FLOAT8OID},
    {"reset_after", FLOAT8OID}, {"capacity", FLOAT8OID},  {"name", TEXTOID},
    {"quota", FLOAT8OID},       {"per", INTERVALOID},     {"refill_after", FLOAT8OID}};
constexpr ResultColumn kAllDecisionColumns[] = {
    {"allowed", BOOLOID},          {"retry_after", FLOAT8OID},
    {"binding_name", TEXTOID},     {"binding_key", TEXTOID},
    {"remaining", FLOAT8ARRAYOID}, {"decisions", InvalidOid, "rate_limit_decision[]"}};
/* The columns of the 0.1.0 and 0.2.0 row types, which a database not yet
 * updated still has: the first ones of each. */
constexpr int kLegacyColumns = 5;
constexpr ResultColumn kLeaseColumns[] = {
    {"allowed", BOOLOID},       {"remaining", FLOAT8OID},      {"retry_after", FLOAT8OID},
    {"reset_after", FLOAT8OID}, {"capacity", FLOAT8OID},       {"name", TEXTOID},
    {"quota", FLOAT8OID},       {"per", INTERVALOID},          {"refill_after", FLOAT8OID},
    {"lease", UUIDOID},         {"expires_at", TIMESTAMPTZOID}};
constexpr int kMaxResultColumns = 11;
static_assert(lengthof(kDecisionColumns) <= kMaxResultColumns &&
                  lengthof(kLeaseColumns) <= kMaxResultColumns &&
                  lengthof(kAllDecisionColumns) <= kMaxResultColumns,
              "kMaxResultColumns too small");

/* A composite type as checked against `columns`: a copy of its descriptor,
 * the type cache's identifier of the descriptor it was checked on, and the
 * attribute that holds each column (the type may contain dropped
 * attributes). */
struct RowShape {
	TupleDesc desc;
	uint64 identifier;
	int columns; /* of `columns`: all, or the legacy ones */
	int attribute[kMaxResultColumns];
};

/* A call site's result row type, and for rate_limit_all_decision with
 * decisions, the element type of that array. */
struct ResultType {
	RowShape row;
	bool has_element;
	RowShape element;
	int16 element_length;
	bool element_by_value;
	char element_align;
};

bool
ShapeCurrent(const RowShape &shape)
{
	return lookup_type_cache(shape.desc->tdtypeid, TYPECACHE_TUPDESC)->tupDesc_identifier ==
	       shape.identifier;
}

/* Checks composite type `type_id` against `columns` into *shape (its
 * descriptor copied into `context`). */
void
LoadShape(Oid type_id, const ResultColumn *columns, int count, MemoryContext context,
          RowShape *shape)
{
	TypeCacheEntry *entry = lookup_type_cache(type_id, TYPECACHE_TUPDESC);
	TupleDesc desc = entry->tupDesc;
	if (desc == NULL)
		ReportResultTypeAltered(type_id, NULL, InvalidOid, columns, count, 0);
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
		shape->attribute[found++] = i;
	}
	if (found != count && found != kLegacyColumns)
		ReportResultTypeAltered(type_id, NULL, InvalidOid, columns, count, found);
	MemoryContext old = MemoryContextSwitchTo(context);
	shape->desc = CreateTupleDescCopy(desc);
	MemoryContextSwitchTo(old);
	shape->identifier = entry->tupDesc_identifier;
	shape->columns = found;
}

/* Result types checked in this backend, by type and column table.  A call
 * site's own state lasts one execution of its statement: checking the type
 * again at each execution of a prepared statement would cost more than the
 * take itself. */
struct CheckedResultType {
	Oid type_id;
	const ResultColumn *columns;
	ResultType type;
};
constexpr int kCheckedResultTypes = 8;
CheckedResultType checked_result_types[kCheckedResultTypes];
int checked_result_type_count = 0;
int checked_result_type_next = 0; /* replaced next once all are taken */

/* The composite type the call returns. */
Oid
CallResultType(FunctionCallInfo fcinfo)
{
	/* The type the call's expression was planned with: no catalog lookup. */
	const Oid planned = get_fn_expr_rettype(fcinfo->flinfo);
	if (OidIsValid(planned) && planned != RECORDOID)
		return planned;
	Oid type_id;
	if (get_call_result_type(fcinfo, &type_id, NULL) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "rate limit function does not return a composite type");
	return type_id;
}

/* `type_id` checked against `columns` (and the element type of its last
 * column against `element_columns`), its descriptors copied into the
 * current memory context. */
ResultType
LoadResultType(Oid type_id, const ResultColumn *columns, int count,
               const ResultColumn *element_columns, int element_count)
{
	MemoryContext context = CurrentMemoryContext;
	ResultType loaded{};
	LoadShape(type_id, columns, count, context, &loaded.row);
	if (element_columns != NULL && loaded.row.columns == count) {
		/* The last column: an array of a composite type. */
		Form_pg_attribute att = TupleDescAttr(loaded.row.desc, loaded.row.attribute[count - 1]);
		Oid element_type = get_element_type(att->atttypid);
		if (!OidIsValid(element_type) || !type_is_rowtype(element_type))
			ReportResultTypeAltered(type_id, NameStr(att->attname), att->atttypid, columns, count,
			                        count - 1);
		LoadShape(element_type, element_columns, element_count, context, &loaded.element);
		loaded.has_element = true;
		get_typlenbyvalalign(element_type, &loaded.element_length, &loaded.element_by_value,
		                     &loaded.element_align);
	}
	return loaded;
}

/*
 * The result row type of the function, checked against `columns` (its owner
 * can ALTER TYPE it); with `element_columns`, the element type of its last
 * column's array, when the row type has it.  A checked type is kept for the
 * backend's life and used only while the type cache still holds the
 * descriptors it was checked on: an ALTER TYPE replaces a descriptor, also
 * under a call site that lives on, such as a PL/pgSQL expression evaluated
 * again in the same transaction.
 */
const ResultType *
ResultDescriptor(FunctionCallInfo fcinfo, const ResultColumn *columns, int count,
                 const ResultColumn *element_columns, int element_count)
{
	const Oid type_id = CallResultType(fcinfo);
	CheckedResultType *slot = NULL;
	for (int i = 0; i < checked_result_type_count; i++) {
		CheckedResultType &checked = checked_result_types[i];
		if (checked.type_id == type_id && checked.columns == columns) {
			if (ShapeCurrent(checked.type.row) &&
			    (!checked.type.has_element || ShapeCurrent(checked.type.element)))
				return &checked.type;
			slot = &checked;
			break;
		}
	}

	/* Checked before any entry changes: a type that fails leaves none. */
	ResultType loaded = LoadResultType(type_id, columns, count, element_columns, element_count);
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	loaded.row.desc = CreateTupleDescCopy(loaded.row.desc);
	if (loaded.has_element)
		loaded.element.desc = CreateTupleDescCopy(loaded.element.desc);
	MemoryContextSwitchTo(old);
	if (slot == NULL) {
		if (checked_result_type_count < kCheckedResultTypes) {
			slot = &checked_result_types[checked_result_type_count++];
		} else {
			slot = &checked_result_types[checked_result_type_next];
			checked_result_type_next = (checked_result_type_next + 1) % kCheckedResultTypes;
		}
	}
	if (slot->type.row.desc != NULL) {
		FreeTupleDesc(slot->type.row.desc);
		if (slot->type.has_element)
			FreeTupleDesc(slot->type.element.desc);
	}
	slot->type_id = type_id;
	slot->columns = columns;
	slot->type = loaded;
	return &slot->type;
}

/* The tuple of `values` (one per column; NULL where `nulls` says so) in
 * the shape of `shape`, as many of them as the type has. */
HeapTuple
ShapedTuple(const RowShape &shape, const Datum *values, const bool *nulls)
{
	int natts = shape.desc->natts;
	if (shape.columns == natts) /* no dropped attributes: the values as they are */
		return heap_form_tuple(shape.desc, const_cast<Datum *>(values), const_cast<bool *>(nulls));
	Datum *row = static_cast<Datum *>(palloc0(sizeof(Datum) * natts));
	bool *row_nulls = static_cast<bool *>(palloc(sizeof(bool) * natts));
	/* Dropped attributes in between: NULL there. */
	memset(row_nulls, true, sizeof(bool) * natts);
	for (int i = 0; i < shape.columns; i++) {
		row[shape.attribute[i]] = values[i];
		row_nulls[shape.attribute[i]] = nulls[i];
	}
	return heap_form_tuple(shape.desc, row, row_nulls);
}

/* The rate_limit_decision columns of one decision. */
void
DecisionValues(const core::Decision &decision, double capacity, const LimitLabel &label,
               Datum *values, bool *nulls)
{
	/* heap_form_tuple copies the interval: no copy of it is needed here. */
	Interval *per = const_cast<Interval *>(&label.per);
	Datum row[lengthof(kDecisionColumns)] = {BoolGetDatum(decision.allowed),
	                                         Float8GetDatum(decision.remaining),
	                                         Float8GetDatum(decision.retry_after),
	                                         Float8GetDatum(decision.reset_after),
	                                         Float8GetDatum(capacity),
	                                         PointerGetDatum(label.name),
	                                         Float8GetDatum(label.quota),
	                                         IntervalPGetDatum(per),
	                                         Float8GetDatum(decision.refill_after)};
	memcpy(values, row, sizeof(row));
	memset(nulls, false, sizeof(bool) * lengthof(kDecisionColumns));
	/* A wait nobody can know (a place held until a transaction ends): NULL. */
	nulls[2] = std::isnan(decision.retry_after);
	nulls[3] = std::isnan(decision.reset_after);
	nulls[8] = std::isnan(decision.refill_after);
}

} /* namespace */

Datum
DecisionDatum(FunctionCallInfo fcinfo, const core::Decision &decision, const core::Limit &limit,
              const LimitLabel &label)
{
	Datum values[lengthof(kDecisionColumns)];
	bool nulls[lengthof(kDecisionColumns)];
	DecisionValues(decision, limit.burst, label, values, nulls);
	const ResultType *type =
	    ResultDescriptor(fcinfo, kDecisionColumns, lengthof(kDecisionColumns), NULL, 0);
	return HeapTupleGetDatum(ShapedTuple(type->row, values, nulls));
}

Datum
AllDecisionDatum(FunctionCallInfo fcinfo, const AllDecision &decision)
{
	const ResultType *type =
	    ResultDescriptor(fcinfo, kAllDecisionColumns, lengthof(kAllDecisionColumns),
	                     kDecisionColumns, lengthof(kDecisionColumns));
	Datum values[lengthof(kAllDecisionColumns)] = {
	    BoolGetDatum(decision.allowed),         Float8GetDatum(decision.retry_after),
	    PointerGetDatum(decision.binding_name), PointerGetDatum(decision.binding_key),
	    PointerGetDatum(decision.remaining),    (Datum)0};
	bool nulls[lengthof(kAllDecisionColumns)] = {
	    false, std::isnan(decision.retry_after), false, false, false, true};
	if (type->has_element) {
		Datum *elements = static_cast<Datum *>(palloc(sizeof(Datum) * decision.count));
		for (int i = 0; i < decision.count; i++) {
			Datum fields[lengthof(kDecisionColumns)];
			bool field_nulls[lengthof(kDecisionColumns)];
			DecisionValues(decision.decisions[i], decision.capacities[i], decision.labels[i],
			               fields, field_nulls);
			elements[i] = HeapTupleGetDatum(ShapedTuple(type->element, fields, field_nulls));
		}
		values[lengthof(kAllDecisionColumns) - 1] = PointerGetDatum(
		    construct_array(elements, decision.count, type->element.desc->tdtypeid,
		                    type->element_length, type->element_by_value, type->element_align));
		nulls[lengthof(kAllDecisionColumns) - 1] = false;
	}
	return HeapTupleGetDatum(ShapedTuple(type->row, values, nulls));
}

Datum
LeaseDatum(FunctionCallInfo fcinfo, const core::Decision &decision, const core::Limit &limit,
           const LimitLabel &label, const pg_uuid_t *lease, TimestampTz expires_at)
{
	constexpr int kDecision = lengthof(kDecisionColumns);
	Datum values[lengthof(kLeaseColumns)];
	bool nulls[lengthof(kLeaseColumns)];
	DecisionValues(decision, limit.burst, label, values, nulls);
	values[kDecision] = lease != NULL ? UUIDPGetDatum(const_cast<pg_uuid_t *>(lease)) : (Datum)0;
	nulls[kDecision] = lease == NULL;
	values[kDecision + 1] = TimestampTzGetDatum(expires_at);
	nulls[kDecision + 1] = lease == NULL;
	const ResultType *type =
	    ResultDescriptor(fcinfo, kLeaseColumns, lengthof(kLeaseColumns), NULL, 0);
	return HeapTupleGetDatum(ShapedTuple(type->row, values, nulls));
}

} /* namespace ratelimit::pg */

/*
 * src/pg/policies.cpp
 *
 * The policy cache.  A backend-local hash table maps a policy name to its
 * limit, or to "not defined".  Triggers on ratelimit.policies send a
 * relcache invalidation for the table, which PostgreSQL delivers to every
 * backend when the changing transaction commits (and to the changing backend
 * at its next command); the callback only marks the cache stale, and the next
 * lookup, which first accepts pending invalidations, starts afresh.  So a
 * policy change is used by every call that starts after it commits.
 *
 * The triggers are ENABLE ALWAYS, and the one for INSERT, UPDATE and DELETE
 * fires for each row, so that they also fire under session_replication_role
 * = replica and in the logical replication apply worker (which fires row
 * triggers only).  Disabling or enabling a trigger itself sends a relcache
 * invalidation.  While the triggers are not all there and ENABLE ALWAYS
 * (pg_restore --disable-triggers re-enables them as ordinary triggers),
 * nothing is cached: every lookup reads the table.
 *
 * A miss reads the row through the primary key with SnapshotSelf: the latest
 * committed definition, whatever the caller's snapshot, and no SSI predicate
 * lock (reading a policy never makes a SERIALIZABLE caller fail).  Columns
 * are found by name and their types checked, so that a changed table raises
 * 55000 rather than being misread.  A database without the table (an
 * extension not yet updated to 0.2.0) has no policies.
 */
#include "pg/policies.hpp"

#include "pg/bucket_keys.hpp"
#include "pg/errors.hpp"
#include "pg/storage.hpp"

namespace ratelimit::pg {

namespace {

constexpr const char *kPolicyTable = "policies";
constexpr const char *kPolicyIndex = "policies_pkey";

/* Columns of ratelimit.policies that the limiter reads, found by name. */
enum PolicyColumn {
	kName,
	kRate,
	kPer,
	kBurst,
	kTokensPerSecond,
	kInitial,
	kJitter,
	kFixedWindow,
	kWindowUs,
	kWindowStartUs,
	kFloorPerSecond,
	kShards,
	kMaxReserved,
	kPenaltyUs,
	kStorage,
	kEnforce,
	kKind,
	kLeaseUs,
	kPolicyColumns
};

struct ColumnSpec {
	const char *name;
	Oid type;
	bool nullable;
	bool optional; /* absent in a database not yet updated: its default */
};

constexpr ColumnSpec kColumns[kPolicyColumns] = {{"name", TEXTOID, false},
                                                 {"rate", FLOAT8OID, false},
                                                 {"per", INTERVALOID, false},
                                                 {"burst", FLOAT8OID, false},
                                                 {"tokens_per_second", FLOAT8OID, false},
                                                 {"initial", FLOAT8OID, true},
                                                 {"jitter", FLOAT8OID, false},
                                                 {"fixed_window", BOOLOID, false},
                                                 {"window_us", INT8OID, false},
                                                 {"window_start_us", INT8OID, true},
                                                 {"floor_per_second", FLOAT8OID, false},
                                                 {"shards", INT4OID, false},
                                                 {"max_reserved", FLOAT8OID, false, true},
                                                 {"penalty_us", INT8OID, true, true},
                                                 {"storage", TEXTOID, false, true},
                                                 {"enforce", BOOLOID, false, true},
                                                 {"kind", TEXTOID, false, true},
                                                 {"lease_us", INT8OID, true, true}};

/* The engine a storage column's value names, or NULL. */
const BucketEngine *
EngineOfRow(Datum storage)
{
	text *value = DatumGetTextPP(storage);
	return EngineNamed(VARDATA_ANY(value), VARSIZE_ANY_EXHDR(value));
}

/* Whether the kind column's value `kind` is `expected`. */
bool
PolicyKindIs(Datum kind, const char *expected)
{
	text *value = DatumGetTextPP(kind);
	const int bytes = VARSIZE_ANY_EXHDR(value);
	return bytes == static_cast<int>(strlen(expected)) &&
	       memcmp(VARDATA_ANY(value), expected, bytes) == 0;
}

/* Most names cached as not defined; then the cache starts afresh, so that
 * calls with ever new names cannot grow it without bound. */
constexpr long kMaxMisses = 1024;

struct PolicyEntry {
	char name[kMaxNameBytes + 1]; /* hash key: the policy name */
	bool defined;
	Policy policy; /* if defined */
};

HTAB *policy_cache = NULL;
bool policy_cache_stale = true;
long policy_cache_misses = 0;
Oid policies_relid = InvalidOid;

void
InvalidatePolicies(Datum, Oid relid)
{
	if (!OidIsValid(relid) || relid == policies_relid)
		policy_cache_stale = true;
}

void
ResetPolicyCache()
{
	if (policy_cache != NULL)
		hash_destroy(policy_cache);
	HASHCTL ctl;
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = kMaxNameBytes + 1;
	ctl.entrysize = sizeof(PolicyEntry);
	ctl.hcxt = TopMemoryContext;
	policy_cache =
	    hash_create("ratelimit policies", 64, &ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	policy_cache_misses = 0;
}

/* The attribute numbers of the columns the limiter reads, by name. */
void
FindColumns(Relation rel, AttrNumber *attnums)
{
	TupleDesc desc = RelationGetDescr(rel);
	for (int c = 0; c < kPolicyColumns; c++)
		attnums[c] = InvalidAttrNumber;
	for (int i = 0; i < desc->natts; i++) {
		Form_pg_attribute att = TupleDescAttr(desc, i);
		if (att->attisdropped)
			continue;
		for (int c = 0; c < kPolicyColumns; c++) {
			if (strcmp(NameStr(att->attname), kColumns[c].name) != 0)
				continue;
			if (att->atttypid != kColumns[c].type)
				ReportStateTableAltered(kPolicyTable, TableChange::kColumnType, kColumns[c].name,
				                        kColumns[c].type);
			attnums[c] = att->attnum;
		}
	}
	for (int c = 0; c < kPolicyColumns; c++)
		if (attnums[c] == InvalidAttrNumber && !kColumns[c].optional)
			ReportStateTableAltered(kPolicyTable, TableChange::kColumnMissing, kColumns[c].name,
			                        kColumns[c].type);
}

/* The primary key must be a plain unique btree index on name alone. */
void
CheckPolicyIndex(Oid index_oid, Oid relid, AttrNumber name_attnum)
{
	if (!OidIsValid(index_oid))
		ReportStateTableAltered(kPolicyTable, TableChange::kPrimaryKey);
	Relation index = index_open(index_oid, AccessShareLock);
	Form_pg_index form = index->rd_index;
	bool ok = index->rd_rel->relam == BTREE_AM_OID && form->indrelid == relid &&
	          form->indisunique && form->indisvalid && form->indnkeyatts == 1 &&
	          form->indkey.values[0] == name_attnum &&
	          index->rd_indcollation[0] == C_COLLATION_OID &&
	          RelationGetIndexExpressions(index) == NIL && RelationGetIndexPredicate(index) == NIL;
	index_close(index, AccessShareLock);
	if (!ok)
		ReportStateTableAltered(kPolicyTable, TableChange::kPrimaryKey);
}

/* Whether the triggers that invalidate policy caches fire for every change
 * to `rel`, whoever makes it: INSERT, UPDATE and DELETE for each row and
 * TRUNCATE, all ENABLE ALWAYS. */
bool
InvalidatedOnEveryChange(Relation rel)
{
	TriggerDesc *triggers = rel->trigdesc;
	if (triggers == NULL)
		return false;
	/* ratelimit.policies_changed(), looked up without a privilege check. */
	Oid function = GetSysCacheOid3(
	    PROCNAMEARGSNSP, Anum_pg_proc_oid, CStringGetDatum("policies_changed"),
	    PointerGetDatum(buildoidvector(NULL, 0)), ObjectIdGetDatum(RelationGetNamespace(rel)));
	int16 row_events = 0;
	bool on_truncate = false;
	for (int i = 0; i < triggers->numtriggers; i++) {
		const Trigger &trigger = triggers->triggers[i];
		if (trigger.tgfoid != function || trigger.tgenabled != TRIGGER_FIRES_ALWAYS)
			continue;
		if (TRIGGER_FOR_ROW(trigger.tgtype))
			row_events |=
			    trigger.tgtype & (TRIGGER_TYPE_INSERT | TRIGGER_TYPE_UPDATE | TRIGGER_TYPE_DELETE);
		else if (TRIGGER_FOR_TRUNCATE(trigger.tgtype))
			on_truncate = true;
	}
	return on_truncate &&
	       row_events == (TRIGGER_TYPE_INSERT | TRIGGER_TYPE_UPDATE | TRIGGER_TYPE_DELETE);
}

/* Reads policy `name` from the table into *policy; false if it is not
 * defined.  *cacheable: whether a change to it would invalidate the cache. */
bool
ReadPolicy(text *name, Policy *policy, bool *cacheable)
{
	*cacheable = false;
	Oid relid = StateRelationOid(kPolicyTable);
	if (!OidIsValid(relid))
		return false;
	policies_relid = relid;

	Relation rel = table_open(relid, AccessShareLock);
	AttrNumber att[kPolicyColumns];
	FindColumns(rel, att);
	CheckPolicyIndex(StateRelationOid(kPolicyIndex), relid, att[kName]);
	*cacheable = InvalidatedOnEveryChange(rel);

	ScanKeyData key;
	ScanKeyInit(&key, att[kName], BTEqualStrategyNumber, F_TEXTEQ, PointerGetDatum(name));
	SysScanDesc scan =
	    systable_beginscan(rel, StateRelationOid(kPolicyIndex), true, SnapshotSelf, 1, &key);
	HeapTuple tuple = systable_getnext(scan);
	bool found = HeapTupleIsValid(tuple);
	if (found) {
		TupleDesc desc = RelationGetDescr(rel);
		Datum value[kPolicyColumns];
		bool null[kPolicyColumns];
		for (int c = 0; c < kPolicyColumns; c++) {
			if (att[c] == InvalidAttrNumber) { /* optional and absent: NULL here */
				value[c] = (Datum)0;
				null[c] = true;
				continue;
			}
			value[c] = heap_getattr(tuple, att[c], desc, &null[c]);
			if (null[c] && !kColumns[c].nullable)
				ReportStateTableAltered(kPolicyTable, TableChange::kNullValue, kColumns[c].name);
		}
		policy->rate = DatumGetFloat8(value[kRate]);
		policy->per = *DatumGetIntervalP(value[kPer]);
		/* No column (0.2.0): no reservation. */
		policy->max_reserved = null[kMaxReserved] ? 0.0 : DatumGetFloat8(value[kMaxReserved]);
		policy->limit.burst = DatumGetFloat8(value[kBurst]);
		policy->limit.rate = DatumGetFloat8(value[kTokensPerSecond]);
		policy->limit.floor_rate = DatumGetFloat8(value[kFloorPerSecond]);
		/* No column (0.2.0) or NULL: no penalty box. */
		policy->limit.penalty_us = null[kPenaltyUs] ? 0 : DatumGetInt64(value[kPenaltyUs]);
		policy->limit.has_initial = !null[kInitial];
		policy->limit.initial = null[kInitial] ? 0.0 : DatumGetFloat8(value[kInitial]);
		policy->jitter = DatumGetFloat8(value[kJitter]);
		policy->fixed_window = DatumGetBool(value[kFixedWindow]);
		policy->window_us = DatumGetInt64(value[kWindowUs]);
		policy->has_window_start = !null[kWindowStartUs];
		policy->window_start_us = null[kWindowStartUs] ? 0 : DatumGetInt64(value[kWindowStartUs]);
		policy->shards = DatumGetInt32(value[kShards]);
		if (policy->shards < 1 || policy->shards > kMaxShards)
			ReportStateTableAltered(kPolicyTable, TableChange::kBadValue, "shards");
		/* No column (before 0.3.0): the table. */
		policy->engine = null[kStorage] ? &kTableEngine : EngineOfRow(value[kStorage]);
		if (policy->engine == NULL)
			ReportStateTableAltered(kPolicyTable, TableChange::kBadValue, "storage");
		if (!policy->engine->can_shard && policy->shards > 1)
			ReportStateTableAltered(kPolicyTable, TableChange::kBadValue, "shards");
		if (policy->fixed_window && policy->window_us <= 0)
			ReportStateTableAltered(kPolicyTable, TableChange::kBadValue, "window_us");
		/* No column (before 0.4.0): enforced.  A report-only policy never
		 * starts a penalty box: a box would refuse nothing, and its
		 * would-be denials would then be the box's, not the bucket's. */
		policy->enforce = null[kEnforce] || DatumGetBool(value[kEnforce]);
		if (!policy->enforce)
			policy->limit.penalty_us = 0;
		/* No column (before 0.4.0): a token bucket. */
		policy->max_held = 0;
		policy->lease_us = 0;
		if (!null[kKind] && PolicyKindIs(value[kKind], "sliding")) {
			/* At most burst in any window of per, windows aligned on the
			 * Unix epoch (policies_kind_check keeps the other options at
			 * their defaults). */
			if (policy->window_us <= 0 || policy->shards != 1 || policy->fixed_window)
				ReportStateTableAltered(kPolicyTable, TableChange::kBadValue, "window_us");
			policy->limit.sliding = true;
			policy->limit.window_us = policy->window_us;
			policy->limit.phase_us =
			    -static_cast<int64>(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;
			policy->limit.penalty_us = 0;
			policy->limit.has_initial = false;
		} else if (!null[kKind] && !PolicyKindIs(value[kKind], "bucket")) {
			if (!PolicyKindIs(value[kKind], "concurrency"))
				ReportStateTableAltered(kPolicyTable, TableChange::kBadValue, "kind");
			const double places = policy->limit.burst;
			if (!(places >= 1.0 && places <= kMaxHeld && places == floor(places)) ||
			    policy->shards != 1)
				ReportStateTableAltered(kPolicyTable, TableChange::kBadValue, "burst");
			policy->max_held = static_cast<int>(places);
			policy->lease_us = null[kLeaseUs] ? 0 : DatumGetInt64(value[kLeaseUs]);
			/* Restored from a dump of a version that keeps them. */
			if (policy->engine->hold == NULL || policy->lease_us < 0)
				ReportStateTableAltered(kPolicyTable, TableChange::kBadValue,
				                        policy->lease_us < 0 ? "lease_us" : "storage");
		}
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return found;
}

} /* namespace */

void
RegisterPolicyCallbacks()
{
	CacheRegisterRelcacheCallback(InvalidatePolicies, (Datum)0);
}

core::Limit
PolicyLimit(const Policy &policy, text *name, text *key)
{
	core::Limit limit = policy.limit;
	if (!policy.fixed_window)
		return limit;
	limit.window_us = policy.window_us;
	if (policy.has_window_start) {
		limit.phase_us = policy.window_start_us % policy.window_us;
	} else {
		uint64 hash = BucketHash(name, key, kWindowSeed);
		limit.phase_us = static_cast<int64>(hash % static_cast<uint64>(policy.window_us));
	}
	return limit;
}

core::Request
PolicyRequest(const Policy &policy, double cost, double max_wait)
{
	core::Request request = core::Request::Within(cost, max_wait);
	request.debt_capped = true;
	request.max_reserved = policy.max_reserved;
	return request;
}

int
CheckPlaces(text *name, double cost, int max_held)
{
	/* NaN fails every comparison. */
	if (!(cost >= 0.0 && cost <= max_held && cost == floor(cost)))
		ReportBadPlaces(text_to_cstring(name), cost, max_held);
	return static_cast<int>(cost);
}

int
PolicyPlaces(const Policy &policy, text *name, double cost)
{
	return CheckPlaces(name, cost, policy.max_held);
}

bool
ReportOnly(const Policy &policy, core::Decision *decision)
{
	if (policy.enforce || decision->allowed)
		return false;
	decision->allowed = true;
	return true;
}

LimitLabel
PolicyLabel(const Policy &policy, text *name)
{
	LimitLabel label;
	label.name = name;
	label.quota = policy.rate;
	label.per = policy.per;
	return label;
}

void
PoliciesChanged(Oid relid)
{
	CacheInvalidateRelcacheByRelid(relid);
}

namespace {

/* The columns of ratelimit.policies a bucket's limit and start follow
 * (enforce: a report-only policy's limit has no penalty box). */
constexpr const char *kLimitColumns[] = {
    "tokens_per_second", "burst",      "initial", "window_us", "fixed_window", "window_start_us",
    "floor_per_second",  "penalty_us", "storage", "enforce",   "kind",         "lease_us"};

/* Whether `old_row` and `new_row` give their buckets the same limit. */
bool
SameLimitColumns(TupleDesc desc, HeapTuple old_row, HeapTuple new_row)
{
	for (const char *column : kLimitColumns) {
		const int number = SPI_fnumber(desc, column);
		if (number <= 0)
			continue;
		bool old_null;
		bool new_null;
		const Datum old_value = heap_getattr(old_row, number, desc, &old_null);
		const Datum new_value = heap_getattr(new_row, number, desc, &new_null);
		if (old_null != new_null)
			return false;
		Form_pg_attribute att = TupleDescAttr(desc, number - 1);
		if (!old_null && !datumIsEqual(old_value, new_value, att->attbyval, att->attlen))
			return false;
	}
	return true;
}

} /* namespace */

void
PolicyWritten(TupleDesc desc, HeapTuple old_row, HeapTuple new_row)
{
	const int name_column = SPI_fnumber(desc, "name");
	const int storage_column = SPI_fnumber(desc, "storage");
	if (name_column <= 0 || storage_column <= 0)
		return; /* before 0.3.0: every policy in the table */
	bool name_null;
	bool storage_null;
	const Datum name = heap_getattr(new_row, name_column, desc, &name_null);
	const Datum storage = heap_getattr(new_row, storage_column, desc, &storage_null);
	if (name_null || storage_null)
		return;
	const BucketEngine *engine = EngineOfRow(storage);
	if (engine == NULL || engine->policy_written == NULL)
		return;
	if (old_row != NULL && SameLimitColumns(desc, old_row, new_row))
		return;
	text *name_text = DatumGetTextPP(name);
	engine->policy_written(VARDATA_ANY(name_text), VARSIZE_ANY_EXHDR(name_text));
}

const BucketEngine &
EngineOfName(text *name)
{
	Policy policy;
	return FindPolicy(name, &policy) ? *policy.engine : kTableEngine;
}

Policy
LookupPolicy(text *name)
{
	Policy policy;
	if (!FindPolicy(name, &policy)) {
		char shown[kMaxNameBytes + 1];
		int length = VARSIZE_ANY_EXHDR(name);
		memcpy(shown, VARDATA_ANY(name), length);
		shown[length] = '\0';
		ReportUndefinedPolicy(shown, OidIsValid(StateRelationOid(kPolicyTable)));
	}
	return policy;
}

bool
FindPolicy(text *name, Policy *policy)
{
	char key[kMaxNameBytes + 1];
	int length = VARSIZE_ANY_EXHDR(name);
	memset(key, 0, sizeof(key));
	memcpy(key, VARDATA_ANY(name), length);

	for (;;) {
		/* Changes committed since this backend last looked count now. */
		AcceptInvalidationMessages();
		if (policy_cache_stale) {
			ResetPolicyCache();
			policy_cache_stale = false;
		}
		bool found;
		PolicyEntry *entry =
		    static_cast<PolicyEntry *>(hash_search(policy_cache, key, HASH_FIND, &found));
		if (found) {
			if (entry->defined)
				*policy = entry->policy;
			return entry->defined;
		}

		bool cacheable;
		bool defined = ReadPolicy(name, policy, &cacheable);
		if (policy_cache_stale)
			continue; /* the table changed while we read it: read again */
		if (!cacheable)
			return defined;
		if (!defined && ++policy_cache_misses > kMaxMisses)
			ResetPolicyCache();
		entry = static_cast<PolicyEntry *>(hash_search(policy_cache, key, HASH_ENTER, &found));
		entry->defined = defined;
		if (defined)
			entry->policy = *policy;
		return defined;
	}
}

} /* namespace ratelimit::pg */

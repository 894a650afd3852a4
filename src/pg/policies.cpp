/*
 * src/pg/policies.cpp
 *
 * The policy cache.  A backend-local hash table maps a policy name to its
 * limit.  A statement-level trigger on ratelimit.policies sends a relcache
 * invalidation for the table, which PostgreSQL delivers to every backend
 * when the changing transaction commits (and to the changing backend at its
 * next command); the callback only marks the cache stale, and the next
 * lookup, which first accepts pending invalidations, starts afresh.  So a
 * policy change is used by every call that starts after it commits.
 *
 * A miss reads the row through the primary key with SnapshotSelf: the latest
 * committed definition, whatever the caller's snapshot, and no SSI predicate
 * lock (reading a policy never makes a SERIALIZABLE caller fail).
 */
#include "pg/policies.hpp"

#include "pg/errors.hpp"
#include "pg/storage.hpp"

namespace ratelimit::pg {

namespace {

constexpr const char *kPolicyTable = "policies";
constexpr const char *kPolicyIndex = "policies_pkey";

/* Columns of ratelimit.policies that the limiter reads. */
constexpr AttrNumber kPolicyName = 1;
constexpr AttrNumber kPolicyBurst = 4;
constexpr AttrNumber kPolicyTokensPerSecond = 5;
constexpr AttrNumber kPolicyInitial = 6;
constexpr AttrNumber kPolicyJitter = 7;
constexpr AttrNumber kPolicyFixedWindow = 8;
constexpr AttrNumber kPolicyWindowUs = 10;
constexpr AttrNumber kPolicyWindowStartUs = 11;
constexpr AttrNumber kPolicyFloorPerSecond = 13;
constexpr AttrNumber kPolicyShards = 14;

/* Seed of the hash that spreads keys' windows, distinct from the others. */
constexpr uint64 kWindowSeed = 0x77696E646F77ULL;

struct PolicyEntry {
	char name[kMaxNameBytes + 1]; /* hash key: the policy name */
	Policy policy;
};

HTAB *policy_cache = NULL;
bool policy_cache_stale = true;
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
}

/* Reads policy `name` from the table; false if it is not defined. */
bool
ReadPolicy(text *name, Policy *policy)
{
	Oid relid = StateRelationOid(kPolicyTable);
	Oid index_oid = StateRelationOid(kPolicyIndex);
	if (!OidIsValid(relid) || !OidIsValid(index_oid))
		ReportStateTableMissing(kPolicyTable);
	policies_relid = relid;

	Relation rel = table_open(relid, AccessShareLock);
	ScanKeyData key;
	ScanKeyInit(&key, kPolicyName, BTEqualStrategyNumber, F_TEXTEQ, PointerGetDatum(name));
	SysScanDesc scan = systable_beginscan(rel, index_oid, true, SnapshotSelf, 1, &key);
	HeapTuple tuple = systable_getnext(scan);
	bool found = HeapTupleIsValid(tuple);
	if (found) {
		TupleDesc desc = RelationGetDescr(rel);
		bool burst_null, rate_null, initial_null, jitter_null;
		Datum burst = heap_getattr(tuple, kPolicyBurst, desc, &burst_null);
		Datum rate = heap_getattr(tuple, kPolicyTokensPerSecond, desc, &rate_null);
		Datum initial = heap_getattr(tuple, kPolicyInitial, desc, &initial_null);
		Datum jitter = heap_getattr(tuple, kPolicyJitter, desc, &jitter_null);
		if (burst_null || rate_null || jitter_null)
			ReportStateTableAltered("has a policy without rate, burst or jitter");
		policy->limit.burst = DatumGetFloat8(burst);
		policy->limit.rate = DatumGetFloat8(rate);
		policy->has_initial = !initial_null;
		policy->initial = initial_null ? 0.0 : DatumGetFloat8(initial);
		policy->jitter = DatumGetFloat8(jitter);
		bool fixed_null, window_null, start_null;
		Datum fixed = heap_getattr(tuple, kPolicyFixedWindow, desc, &fixed_null);
		Datum window = heap_getattr(tuple, kPolicyWindowUs, desc, &window_null);
		Datum start = heap_getattr(tuple, kPolicyWindowStartUs, desc, &start_null);
		bool floor_null;
		Datum floor_rate = heap_getattr(tuple, kPolicyFloorPerSecond, desc, &floor_null);
		bool shards_null;
		Datum shards = heap_getattr(tuple, kPolicyShards, desc, &shards_null);
		policy->shards = shards_null ? 1 : DatumGetInt32(shards);
		if (fixed_null || window_null || floor_null || shards_null || policy->shards < 1)
			ReportStateTableAltered("has a policy without its window or floor rate");
		policy->limit.floor_rate = DatumGetFloat8(floor_rate);
		policy->fixed_window = DatumGetBool(fixed);
		policy->window_us = DatumGetInt64(window);
		policy->has_window_start = !start_null;
		policy->window_start_us = start_null ? 0 : DatumGetInt64(start);
		if (policy->fixed_window && policy->window_us <= 0)
			ReportStateTableAltered("has a fixed-window policy without a positive window");
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

void
PoliciesChanged(Oid relid)
{
	CacheInvalidateRelcacheByRelid(relid);
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
		ReportUndefinedPolicy(shown);
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
			*policy = entry->policy;
			return true;
		}

		bool defined = ReadPolicy(name, policy);
		if (policy_cache_stale)
			continue; /* the table changed while we read it: read again */
		if (!defined)
			return false;
		entry = static_cast<PolicyEntry *>(hash_search(policy_cache, key, HASH_ENTER, &found));
		entry->policy = *policy;
		return true;
	}
}

} /* namespace ratelimit::pg */

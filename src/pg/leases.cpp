/*
 * src/pg/leases.cpp
 *
 * Leases (see leases.hpp) in ratelimit.leases, read and written as the table
 * engine reads and writes buckets (storage.cpp): through the indexes and the
 * heap with a dirty snapshot, no SPI and no executor.
 *
 * Exactness without serialization failures: a take holds an exclusive
 * advisory lock on a hash of (name, key) (lock class kLeaseLockClass) only
 * while it counts the key's leases in force and inserts its own, and
 * releases it at once.  It counts every lease a dirty snapshot sees with
 * expires_at after the clock: committed ones, and those other transactions
 * are inserting (each inserted under the same lock, so none can be missed)
 * or deleting (a release still in flight: a denial too many, never a grant
 * too many).  The caller's snapshot is never used, so the answer is the
 * same at every isolation level and raises no 40001; the lock is held by no
 * one who waits for anything else, so no 40P01 (but with a drop: below).
 * A lease inserted by a transaction that rolls back was never committed and
 * counts no more.
 *
 * A drop of the policy deletes its leases, whatever the snapshot, holding
 * a lock on a hash of the name (class kLeaseNameLockClass) exclusively
 * until its transaction ends.  A take of a lease holds the same lock shared
 * until its own transaction ends, taken once the call has found its policy
 * to be a lease policy, which it then looks up again (LookupPolicyToTake):
 * everything the call decides and answers goes by that second lookup.  So a
 * drop waits for every lease of the name being written to commit or roll
 * back, and deletes the committed ones; a take that comes while a drop is
 * open waits for it, and then finds no policy once the drop has committed
 * (42704), or takes by the definition the drop's transaction made.  No
 * lease of a dropped policy is left behind to count against one defined
 * again under the name.  That wait is the only one a take makes, and a
 * drop the only thing it waits for: a transaction that drops a policy
 * while it holds what a lease taker of it then needs (a bucket's row, the
 * lock of another policy it dropped) deadlocks with that taker (40P01), and
 * a drop waits for open transactions that took leases of the policy, new
 * takes queued behind it.
 *
 * An expired lease is free the moment its expires_at passes, whatever its
 * row: the count scans only index entries after the clock.  A release
 * deletes the row (waiting for another transaction deleting it: then it was
 * released by that one).  A purge deletes expired rows that no transaction
 * is writing, without waiting.
 *
 * The direct path bypasses triggers, constraints and RLS, so the table's
 * shape is checked on every open (a few comparisons).
 */
#include "pg/leases.hpp"

#include "pg/bucket_keys.hpp"
#include "pg/clock.hpp"
#include "pg/errors.hpp"
#include "pg/policies.hpp"
#include "pg/storage.hpp"

namespace ratelimit::pg {

namespace {

constexpr const char *kLeaseTable = "leases";

/* Columns of ratelimit.leases. */
constexpr AttrNumber kAttId = 1;
constexpr AttrNumber kAttName = 2;
constexpr AttrNumber kAttKey = 3;
constexpr AttrNumber kAttPlaces = 4;
constexpr AttrNumber kAttExpiresAt = 5;
constexpr int kNatts = 5;
constexpr int kMaxIndexes = 8;

/* Advisory lock class (LOCKTAG field4) of the count-and-insert lock, next to
 * the table engine's first-insert lock (0x524C). */
constexpr uint16 kLeaseLockClass = 0x524D;
/* The seed of the lock's hash of (name, key). */
constexpr uint64 kLeaseSeed = 0x6C6561736573ULL;
/* Advisory lock class of the lock a drop holds exclusively and a take of a
 * lease shared, on a hash of the name alone. */
constexpr uint16 kLeaseNameLockClass = 0x524E;
/* The seed of that hash of the name. */
constexpr uint64 kLeaseNameSeed = 0x6C6E616D6573ULL;

struct LeaseRelations {
	Relation heap;
	int nindexes;
	Relation indexes[kMaxIndexes];
	Relation by_key; /* (name, key, expires_at) */
	Relation by_id;  /* (id), unique */
};

/* Whether `index` is a plain btree on exactly `atts` (count columns), in
 * the "C" collation for text columns. */
bool
IndexOn(Relation index, const AttrNumber *atts, int count)
{
	Form_pg_index form = index->rd_index;
	if (index->rd_rel->relam != BTREE_AM_OID || form->indnkeyatts != count ||
	    form->indnatts != count || RelationGetIndexExpressions(index) != NIL ||
	    RelationGetIndexPredicate(index) != NIL)
		return false;
	for (int i = 0; i < count; i++) {
		if (form->indkey.values[i] != atts[i])
			return false;
		if ((atts[i] == kAttName || atts[i] == kAttKey) &&
		    index->rd_indcollation[i] != C_COLLATION_OID)
			return false;
	}
	return true;
}

void
CheckLeaseTable(Relation heap)
{
	static const Oid kTypes[kNatts] = {UUIDOID, TEXTOID, TEXTOID, INT4OID, TIMESTAMPTZOID};
	TupleDesc desc = RelationGetDescr(heap);
	CheckDirectAccess(heap, kLeaseTable);
	if (desc->natts != kNatts)
		ReportStateTableAltered(kLeaseTable, TableChange::kColumns);
	for (int i = 0; i < kNatts; i++) {
		Form_pg_attribute att = TupleDescAttr(desc, i);
		if (att->attisdropped || att->atttypid != kTypes[i] || !att->attnotnull ||
		    (att->atttypid == TEXTOID && att->attcollation != C_COLLATION_OID))
			ReportStateTableAltered(kLeaseTable, TableChange::kColumns);
	}
}

/* Opens ratelimit.leases and its indexes in `mode`, held to the end of the
 * transaction. */
void
OpenLeases(LOCKMODE mode, LeaseRelations *rels)
{
	static const AttrNumber kByKey[] = {kAttName, kAttKey, kAttExpiresAt};
	static const AttrNumber kById[] = {kAttId};
	const Oid heap_oid = StateRelationOid(kLeaseTable);
	if (!OidIsValid(heap_oid))
		ReportStateTableMissing(kLeaseTable);
	rels->heap = table_open(heap_oid, mode);
	CheckLeaseTable(rels->heap);
	List *index_oids = RelationGetIndexList(rels->heap);
	if (list_length(index_oids) > kMaxIndexes)
		ReportStateTableAltered(kLeaseTable, TableChange::kIndexes);
	rels->nindexes = 0;
	rels->by_key = NULL;
	rels->by_id = NULL;
	ListCell *cell;
	foreach (cell, index_oids) {
		Relation index = index_open(lfirst_oid(cell), mode);
		rels->indexes[rels->nindexes++] = index;
		const bool ready = index->rd_index->indisvalid && index->rd_index->indisready &&
		                   index->rd_index->indislive;
		if (IndexOn(index, kByKey, lengthof(kByKey))) {
			if (ready && rels->by_key == NULL)
				rels->by_key = index;
		} else if (IndexOn(index, kById, lengthof(kById)) && index->rd_index->indisunique) {
			if (ready && (rels->by_id == NULL || index->rd_index->indisprimary))
				rels->by_id = index;
		} else {
			ReportStateTableAltered(kLeaseTable, TableChange::kIndexes);
		}
	}
	list_free(index_oids);
	if (rels->by_id == NULL)
		ReportStateTableAltered(kLeaseTable, TableChange::kPrimaryKey);
	if (rels->by_key == NULL)
		ReportStateTableAltered(kLeaseTable, TableChange::kIndexes);
}

void
CloseLeases(LeaseRelations *rels)
{
	for (int i = 0; i < rels->nindexes; i++)
		index_close(rels->indexes[i], NoLock);
	table_close(rels->heap, NoLock);
}

/* Adds the entries of the row at `tid` to every index ready for inserts. */
void
InsertLeaseEntries(const LeaseRelations &rels, const Datum *row, ItemPointer tid)
{
	for (int i = 0; i < rels.nindexes; i++) {
		Relation index = rels.indexes[i];
		if (!index->rd_index->indisready)
			continue;
		IndexInfo *info = BuildIndexInfo(index);
		Datum values[INDEX_MAX_KEYS];
		bool nulls[INDEX_MAX_KEYS];
		for (int c = 0; c < info->ii_NumIndexAttrs; c++) {
			values[c] = row[info->ii_IndexAttrNumbers[c] - 1];
			nulls[c] = false;
		}
		(void)RlIndexInsert(index, values, nulls, tid, rels.heap,
		                    index->rd_index->indisunique ? UNIQUE_CHECK_YES : UNIQUE_CHECK_NO,
		                    false, info);
		RlIndexInsertCleanup(index, info);
	}
}

/* The leases in force of one key, earliest expiry first. */
struct LeasesInForce {
	int count;
	int capacity;
	TimestampTz *expires_at;
	int *places;
	int64 held; /* places, summed */
};

void
AddLease(LeasesInForce *found, TimestampTz expires_at, int places)
{
	if (found->count == found->capacity) {
		found->capacity *= 2;
		found->expires_at = static_cast<TimestampTz *>(
		    repalloc(found->expires_at, sizeof(TimestampTz) * found->capacity));
		found->places = static_cast<int *>(repalloc(found->places, sizeof(int) * found->capacity));
	}
	/* Kept in order of expiry (the scan's order; a new lease may come
	 * before leases of a longer lease defined earlier). */
	int at = found->count;
	while (at > 0 && found->expires_at[at - 1] > expires_at) {
		found->expires_at[at] = found->expires_at[at - 1];
		found->places[at] = found->places[at - 1];
		at--;
	}
	found->expires_at[at] = expires_at;
	found->places[at] = places;
	found->count++;
	found->held += places;
}

/* Every lease of (name, key) a dirty snapshot sees that expires after
 * `now`. */
LeasesInForce
FindLeases(const LeaseRelations &rels, text *name, text *key, TimestampTz now)
{
	LeasesInForce found{0, 8, NULL, NULL, 0};
	found.expires_at = static_cast<TimestampTz *>(palloc(sizeof(TimestampTz) * found.capacity));
	found.places = static_cast<int *>(palloc(sizeof(int) * found.capacity));
	ScanKeyData keys[3];
	ScanKeyEntryInitialize(&keys[0], 0, 1, BTEqualStrategyNumber, InvalidOid, C_COLLATION_OID,
	                       F_TEXTEQ, PointerGetDatum(name));
	ScanKeyEntryInitialize(&keys[1], 0, 2, BTEqualStrategyNumber, InvalidOid, C_COLLATION_OID,
	                       F_TEXTEQ, PointerGetDatum(key));
	ScanKeyEntryInitialize(&keys[2], 0, 3, BTGreaterStrategyNumber, InvalidOid, InvalidOid,
	                       RL_F_TIMESTAMPTZ_GT, TimestampTzGetDatum(now));
	SnapshotData dirty;
	InitDirtySnapshot(dirty);
	TupleTableSlot *slot = table_slot_create(rels.heap, NULL);
	IndexScanDesc scan = RlIndexBeginScan(rels.heap, rels.by_key, &dirty, 3);
	index_rescan(scan, keys, 3, NULL, 0);
	while (index_getnext_slot(scan, ForwardScanDirection, slot)) {
		bool isnull;
		const TimestampTz expires_at =
		    DatumGetTimestampTz(slot_getattr(slot, kAttExpiresAt, &isnull));
		const int places = DatumGetInt32(slot_getattr(slot, kAttPlaces, &isnull));
		/* The index may hold entries of older versions: the row decides. */
		if (expires_at > now && places > 0)
			AddLease(&found, expires_at, places);
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	return found;
}

double
SecondsUntil(TimestampTz at, TimestampTz now)
{
	return at > now ? static_cast<double>(at - now) / USECS_PER_SEC : 0.0;
}

/* A new lease id: a random (version 4) UUID. */
void
NewLeaseId(pg_uuid_t *id)
{
	if (!pg_strong_random(id->data, UUID_LEN))
		ereport(ERROR,
		        (errcode(ERRCODE_INTERNAL_ERROR), errmsg("could not generate a random lease id")));
	id->data[6] = static_cast<unsigned char>((id->data[6] & 0x0F) | 0x40);
	id->data[8] = static_cast<unsigned char>((id->data[8] & 0x3F) | 0x80);
}

void
InsertLease(const LeaseRelations &rels, text *name, text *key, int places, TimestampTz expires_at,
            pg_uuid_t *id)
{
	NewLeaseId(id);
	Datum row[kNatts] = {UUIDPGetDatum(id), PointerGetDatum(name), PointerGetDatum(key),
	                     Int32GetDatum(places), TimestampTzGetDatum(expires_at)};
	bool nulls[kNatts] = {false, false, false, false, false};
	HeapTuple tuple = heap_form_tuple(RelationGetDescr(rels.heap), row, nulls);
	heap_insert(rels.heap, tuple, GetCurrentCommandId(true), 0, NULL);
	InsertLeaseEntries(rels, row, &tuple->t_self);
	heap_freetuple(tuple);
}

/* Locks the leases of policy `name` in `mode` until the transaction ends:
 * ShareLock to take one, ExclusiveLock to drop them all. */
void
LockLeaseName(text *name, LOCKMODE mode)
{
	const uint64 hash = NameHash(name, kLeaseNameSeed);
	LOCKTAG tag;
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, static_cast<uint32>(hash >> 32),
	                     static_cast<uint32>(hash), kLeaseNameLockClass);
	(void)LockAcquire(&tag, mode, false, false);
}

} /* namespace */

core::Decision
LeasePlaces(text *name, text *key, int max_held, int places, int64 lease_us, bool take,
            LeaseGrant *grant)
{
	if (grant != NULL)
		grant->written = false;
	const bool writes = take && places > 0;
	LeaseRelations rels;
	OpenLeases(writes ? RowExclusiveLock : AccessShareLock, &rels);
	LOCKTAG tag;
	if (writes) {
		/* The name's lease lock is held: the caller found the policy with
		 * LookupPolicyToTake. */
		const uint64 hash = BucketHash(name, key, kLeaseSeed);
		SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, static_cast<uint32>(hash >> 32),
		                     static_cast<uint32>(hash), kLeaseLockClass);
		(void)LockAcquire(&tag, ExclusiveLock, false, false);
	}
	/* Read after any wait. */
	const TimestampTz now = ClockNow();
	LeasesInForce found = FindLeases(rels, name, key, now);
	const bool allowed = max_held - found.held >= places;
	if (allowed && places > 0) {
		/* Past the last timestamptz: the last one (no lease is that long). */
		TimestampTz expires_at;
		if (pg_add_s64_overflow(now, lease_us, &expires_at) || expires_at >= END_TIMESTAMP)
			expires_at = END_TIMESTAMP - 1;
		if (writes) {
			pg_uuid_t id;
			InsertLease(rels, name, key, places, expires_at, &id);
			if (grant != NULL) {
				grant->written = true;
				grant->id = id;
				grant->expires_at = expires_at;
			}
		}
		/* A check answers as the take would: with its lease. */
		AddLease(&found, expires_at, places);
	}
	if (writes) {
		LockRelease(&tag, ExclusiveLock, false);
		CommandCounterIncrement();
	}
	CloseLeases(&rels);

	core::Decision decision{};
	decision.allowed = allowed;
	decision.write = false;
	/* max_held lowered below the places leased: none left, not fewer. */
	decision.remaining = static_cast<double>(Max(max_held - found.held, 0));
	decision.retry_after = 0.0;
	if (!allowed) {
		/* Until enough of the earliest leases expire (a release may come
		 * sooner). */
		int64 free = max_held - found.held;
		for (int i = 0; i < found.count && free < places; i++) {
			free += found.places[i];
			decision.retry_after = SecondsUntil(found.expires_at[i], now);
		}
	}
	decision.reset_after =
	    found.count > 0 ? SecondsUntil(found.expires_at[found.count - 1], now) : 0.0;
	decision.refill_after = found.count > 0 ? SecondsUntil(found.expires_at[0], now) : 0.0;
	pfree(found.expires_at);
	pfree(found.places);
	return decision;
}

bool
ReleaseLease(const pg_uuid_t *id)
{
	LeaseRelations rels;
	OpenLeases(RowExclusiveLock, &rels);
	ScanKeyData scan_key;
	ScanKeyInit(&scan_key, 1, BTEqualStrategyNumber, F_UUID_EQ, UUIDPGetDatum(id));
	SnapshotData dirty;
	InitDirtySnapshot(dirty);
	TupleTableSlot *slot = table_slot_create(rels.heap, NULL);
	bool released = false;
	for (;;) {
		IndexScanDesc scan = RlIndexBeginScan(rels.heap, rels.by_id, &dirty, 1);
		index_rescan(scan, &scan_key, 1, NULL, 0);
		const bool found = index_getnext_slot(scan, ForwardScanDirection, slot);
		index_endscan(scan);
		/* Not there, or not committed yet by the transaction writing it
		 * (whose id nobody else can know). */
		if (!found || TransactionIdIsValid(dirty.xmin))
			break;
		bool isnull;
		const TimestampTz expires_at =
		    DatumGetTimestampTz(slot_getattr(slot, kAttExpiresAt, &isnull));
		/* Read after the lookup, which may have followed a wait. */
		if (expires_at <= ClockNow())
			break;
		ItemPointerData tid = slot->tts_tid;
		TM_FailureData tmfd;
		const TM_Result result = heap_delete(rels.heap, &tid, GetCurrentCommandId(true),
		                                     InvalidSnapshot, true, &tmfd, false);
		if (result == TM_Ok) {
			released = true;
			break;
		}
		/* Deleted meanwhile (by a release or a purge that committed), or
		 * already by this transaction: not this call's to release. */
		if (result == TM_Deleted || result == TM_SelfModified || result == TM_Updated)
			break;
		elog(ERROR, "could not delete rate limit lease: result %d", static_cast<int>(result));
	}
	ExecDropSingleTupleTableSlot(slot);
	if (released)
		CommandCounterIncrement();
	CloseLeases(&rels);
	return released;
}

int64
PurgeLeases(text *name)
{
	/* A database not yet updated to 0.4.0 has no table of leases, hence no
	 * lease to purge: its purge forgets buckets as before. */
	if (!OidIsValid(StateRelationOid(kLeaseTable)))
		return 0;
	LeaseRelations rels;
	OpenLeases(RowExclusiveLock, &rels);
	const TimestampTz now = ClockNow();
	const CommandId cid = GetCurrentCommandId(true);
	int64 purged = 0;
	TableScanDesc scan = table_beginscan(rels.heap, GetActiveSnapshot(), 0, NULL);
	TupleTableSlot *slot = table_slot_create(rels.heap, NULL);
	while (table_scan_getnextslot(scan, ForwardScanDirection, slot)) {
		bool isnull;
		if (DatumGetTimestampTz(slot_getattr(slot, kAttExpiresAt, &isnull)) > now)
			continue;
		if (name != NULL &&
		    CompareText(DatumGetTextPP(slot_getattr(slot, kAttName, &isnull)), name) != 0)
			continue;
		ItemPointerData tid = slot->tts_tid;
		TM_FailureData tmfd;
		/* A row some transaction is deleting is left to it. */
		if (heap_delete(rels.heap, &tid, cid, InvalidSnapshot, false, &tmfd, false) == TM_Ok)
			purged++;
	}
	ExecDropSingleTupleTableSlot(slot);
	table_endscan(scan);
	if (purged > 0)
		CommandCounterIncrement();
	CloseLeases(&rels);
	return purged;
}

int64
DropLeases(text *name)
{
	LockLeaseName(name, ExclusiveLock);
	LeaseRelations rels;
	OpenLeases(RowExclusiveLock, &rels);
	ScanKeyData scan_key;
	ScanKeyEntryInitialize(&scan_key, 0, 1, BTEqualStrategyNumber, InvalidOid, C_COLLATION_OID,
	                       F_TEXTEQ, PointerGetDatum(name));
	const CommandId cid = GetCurrentCommandId(true);
	int64 dropped = 0;
	SnapshotData dirty;
	InitDirtySnapshot(dirty);
	TupleTableSlot *slot = table_slot_create(rels.heap, NULL);
	IndexScanDesc scan = RlIndexBeginScan(rels.heap, rels.by_key, &dirty, 1);
	index_rescan(scan, &scan_key, 1, NULL, 0);
	while (index_getnext_slot(scan, ForwardScanDirection, slot)) {
		/* Every transaction that took a lease of the name has ended (each
		 * held the lock this one holds now), so none is still inserting
		 * one; a release in flight is waited for. */
		ItemPointerData tid = slot->tts_tid;
		TM_FailureData tmfd;
		const TM_Result result =
		    heap_delete(rels.heap, &tid, cid, InvalidSnapshot, true, &tmfd, false);
		if (result == TM_Ok)
			dropped++;
		/* Released meanwhile by a transaction that committed, or already
		 * by this one: gone all the same. */
		else if (result != TM_Deleted && result != TM_SelfModified && result != TM_Updated)
			elog(ERROR, "could not delete rate limit lease: result %d", static_cast<int>(result));
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	if (dropped > 0)
		CommandCounterIncrement();
	CloseLeases(&rels);
	return dropped;
}

Policy
LookupPolicyToTake(text *name, bool take)
{
	Policy policy = LookupPolicy(name);
	if (take && policy.lease_us > 0) {
		LockLeaseName(name, ShareLock);
		/* After any wait for a drop; the lookup accepts the invalidations
		 * it sent before it let the lock go. */
		policy = LookupPolicy(name);
	}
	return policy;
}

} /* namespace ratelimit::pg */

/*
 * src/pg/storage.cpp
 *
 * Bucket state in ratelimit.buckets, accessed the way logical replication's
 * apply worker accesses tables: a primary-key lookup with a dirty snapshot,
 * heap_update()/heap_insert()/heap_delete() and index_insert() by hand.  No
 * SPI and no executor: that is both what makes a call cheap and what keeps
 * it free of serialization failures at REPEATABLE READ and SERIALIZABLE,
 * because every call works on the latest committed version of its row,
 * never on the caller's snapshot.
 *
 * Locking rules
 * - Relations: a check takes AccessShareLock, a take or reset
 *   RowExclusiveLock, on the table and its indexes, held to transaction end.
 * - A call decides on the latest committed version.  A denial is final at
 *   once, without locking or writing: any in-flight writer can only leave
 *   fewer tokens, or, if it resets or refunds, be ordered after this call.
 *   (Under a policy with a penalty box, a take's denial starts the box, so
 *   it is written as a grant is, after waiting for an in-flight writer.)
 * - A grant that sees an in-flight writer of its row (a check or cost-0 look
 *   too, so that it answers what a take would) waits for that writer's
 *   transaction to end, queued behind other waiters on the heavyweight tuple
 *   lock of the version it saw (LockTuple, as heapam queues), and decides
 *   again on what is then the latest version, with the clock read after the
 *   wait.  Only the writer's transaction is waited for: nothing is written
 *   and no row is locked before the decision is final, so a take that waited
 *   and was then denied leaves no lock behind.
 * - A grant replaces the version it was decided on with heap_update(): the
 *   new version belongs to the caller's (sub)transaction, so ROLLBACK refunds
 *   and the next taker of the key waits for this transaction to end.  (In the
 *   rare race where another writer slips in between the decision and the
 *   update, heap_update waits for it and the call decides again.)
 * - A refund is written like a grant; a reset locks the latest version, then
 *   deletes it.  A reset that must not wait (rate_limit_reset_limit's first
 *   pass) leaves a key alone when a transaction is writing or locking it.
 * - A key's first row is inserted under an exclusive advisory lock on
 *   hash(name, key) (lock class kNewKeyLockClass, shown in pg_locks as
 *   objsubid 21068), re-checked after the lock is granted: two first calls
 *   never race into a unique violation.  The lock is released as soon as the
 *   row is in the heap and the indexes, as soon as the key turns out to
 *   exist, and before waiting for another transaction's first insert of the
 *   key: a single take never waits while holding it.  (rate_limit_take_all
 *   holds the locks of its absent keys while it locks the rows that follow
 *   them in canonical order, which keeps it deadlock-free among callers that
 *   take keys in that order.)
 * - rate_limit_take_all decides first on the latest committed versions,
 *   without locking: a denial there is final (under a penalty box, each
 *   limit that denied then decides again alone, as a single take would,
 *   and stores only a denial that starts its box).  Otherwise it locks all its
 *   rows in one canonical order (name, then key, bytewise) inside a
 *   subtransaction, waiting for their writers, and decides again only once
 *   it holds every lock: two overlapping calls wait for each other instead
 *   of deadlocking, and a denial rolls the subtransaction (and so the
 *   locks) back, leaving only the transaction id it took.
 * - The memory engine keeps here the keys it has no room for
 *   (DecideInTableOr): a key the table holds is decided as above; one it
 *   does not hold is offered to the memory engine (Placement), by a call
 *   that writes only once it holds the key's new-key lock and has looked
 *   again, so that no row of the key is inserted while the memory engine
 *   places it; only a key it has no room for is inserted here.
 * - After any write, CommandCounterIncrement() so that the next call in the
 *   same statement sees, and can lock, the new version.
 * - Every index that is ready for inserts receives the new entries, as the
 *   executor does, so REINDEX CONCURRENTLY can run under load; lookups use a
 *   valid one, the primary key when it is.
 * - The latest version this transaction wrote of a key is remembered by TID
 *   (LatestVersion), so N takes of one key in one transaction do not walk
 *   the N versions it created on every lookup.
 * - On a standby (logged state only: rate_limit_set_logged) nothing is
 *   written and nothing waits: a check answers on what the primary has
 *   committed, as a peek does, and a first insert still in flight there
 *   counts as no bucket yet.
 * - A sweep (SweepBuckets: rate_limit_purge) reads a range of heap blocks
 *   with a dirty snapshot, skips every row a transaction is writing, locks
 *   each row it would delete without waiting (a row locked or replaced
 *   meanwhile is skipped) and deletes the version it decided on.  It never
 *   waits for a row lock, so it cannot deadlock, and it holds only the rows
 *   it deleted, until its transaction ends.
 * The direct path bypasses triggers, constraints, RLS and other indexes, so
 * the table's shape is verified once per relcache generation.
 */
#include "pg/storage.hpp"

#include "pg/clock.hpp"
#include "pg/errors.hpp"
#include "pg/holds.hpp"

namespace ratelimit::pg {

namespace {

/* What ResetBucketUnlessBusy did. */
enum class ResetOutcome {
	kAbsent,  /* no such bucket */
	kDeleted, /* deleted in the caller's transaction */
	kBusy     /* another transaction writes or locks it: left alone */
};

/* How far a sweep got. */
struct SweepProgress {
	BlockNumber next_block; /* where the next batch starts */
	bool finished;          /* no block of the table lies beyond this batch */
	int64 deleted;
};

constexpr const char *kStateSchema = "ratelimit";
constexpr const char *kStateTable = "buckets";

/* Column numbers of ratelimit.buckets. */
constexpr AttrNumber kAttName = 1;
constexpr AttrNumber kAttKey = 2;
constexpr AttrNumber kAttTokens = 3;
constexpr AttrNumber kAttStamp = 4;
constexpr AttrNumber kAttFullAt = 5;       /* from 0.3.0 */
constexpr AttrNumber kAttBlockedUntil = 6; /* from 0.3.0 */
constexpr AttrNumber kAttPrevious = 7;     /* from 0.4.0 */
constexpr int kNatts = 7;
/* A database not yet updated from 0.2.0 or before has no full_at, one not
 * yet updated from 0.3.0 no previous (and no sliding window). */
constexpr int kNattsBefore030 = 4;
constexpr int kNattsBefore040 = 6;

/* Advisory lock class (LOCKTAG field4) private to the extension: "RL". */
constexpr uint16 kNewKeyLockClass = 0x524C;

/* The heavyweight tuple lock that queues waiters, as heapam's for
 * LockTupleNoKeyExclusive. */
constexpr LOCKMODE kTupleQueueLock = ExclusiveLock;

/* Indexes the table may have: its primary key, and for a while the copies
 * that REINDEX CONCURRENTLY builds beside it. */
constexpr int kMaxIndexes = 8;

/* Relation OIDs and the indexes' IndexInfo, valid until a relcache
 * invalidation touches the table or one of its indexes. */
struct StateRelations {
	bool valid;
	uint64 invalidations; /* counts the invalidations that touched them */
	Oid heap_oid;
	int nindexes;
	Oid index_oids[kMaxIndexes];
	IndexInfo *index_info[kMaxIndexes]; /* allocated in context */
	int lookup;                         /* position of the index lookups use */
	bool logged;                        /* relpersistence is permanent */
	FmgrInfo key_equal;                 /* texteq, for the lookup's scan keys */
	MemoryContext context;
};

StateRelations state_relations = {false, 0, InvalidOid, 0, {}, {}, 0, false, {}, NULL};

/* The table and its indexes, open for one call. */
struct OpenRelations {
	Relation heap;
	Relation index; /* the lookup index */
	int nindexes;
	Relation indexes[kMaxIndexes];
};

/*
 * The latest version of a key written by this transaction, by TID.  A
 * direct-mapped table keyed by the key's hash; an entry is trusted only
 * after the version at its TID is fetched and found to be this
 * transaction's own, live, and of the same key (FindRemembered).
 */
struct LatestVersion {
	uint64 hash;
	TransactionId xid; /* the (sub)transaction that wrote it */
	ItemPointerData tid;
};
constexpr int kLatestVersions = 256;
LatestVersion latest_versions[kLatestVersions];

/* BucketWaitMicros: the clock is read only around waits. */
int64 wait_micros = 0;

/* Counts the time from `started` (GetCurrentTimestamp) as waiting. */
void
CountWait(TimestampTz started)
{
	const TimestampTz ended = GetCurrentTimestamp();
	if (ended > started)
		wait_micros += ended - started;
}

void
ForgetLatestVersions()
{
	for (int i = 0; i < kLatestVersions; i++)
		latest_versions[i].xid = InvalidTransactionId;
}

void
InvalidateStateRelations(Datum, Oid relid)
{
	bool ours = !OidIsValid(relid) || relid == state_relations.heap_oid;
	for (int i = 0; i < state_relations.nindexes; i++)
		ours = ours || relid == state_relations.index_oids[i];
	if (ours) {
		state_relations.valid = false;
		state_relations.invalidations++;
		/* A rewrite (TRUNCATE, VACUUM FULL) moves every TID. */
		ForgetLatestVersions();
	}
}

/* Verifies what the direct path relies on; returns the table's indexes. */
List *
CheckStateTable(Relation heap)
{
	static const Oid kTypes[kNatts] = {TEXTOID,        TEXTOID,        FLOAT8OID, TIMESTAMPTZOID,
	                                   TIMESTAMPTZOID, TIMESTAMPTZOID, FLOAT8OID};
	TupleDesc desc = RelationGetDescr(heap);

	CheckDirectAccess(heap, kStateTable);
	if (desc->natts != kNatts && desc->natts != kNattsBefore040 && desc->natts != kNattsBefore030)
		ReportStateTableAltered(kStateTable, TableChange::kColumns);
	for (int i = 0; i < desc->natts; i++) {
		Form_pg_attribute att = TupleDescAttr(desc, i);
		if (att->attisdropped || att->atttypid != kTypes[i] || !att->attnotnull ||
		    (att->atttypid == TEXTOID && att->attcollation != C_COLLATION_OID))
			ReportStateTableAltered(kStateTable, TableChange::kColumns);
	}

	List *indexes = RelationGetIndexList(heap);
	if (indexes == NIL)
		ReportStateTableAltered(kStateTable, TableChange::kPrimaryKey);
	if (list_length(indexes) > kMaxIndexes)
		ReportStateTableAltered(kStateTable, TableChange::kIndexes);
	return indexes;
}

/* Every index must have the primary key's shape: a unique btree on (name,
 * key) in the "C" collation.  Copies of it (REINDEX CONCURRENTLY, or a
 * unique index built concurrently to replace it) are kept up to date too. */
void
CheckStateIndex(Relation index)
{
	Form_pg_index form = index->rd_index;
	if (index->rd_rel->relam != BTREE_AM_OID || !form->indisunique || !form->indimmediate ||
	    form->indnatts != 2 || form->indnkeyatts != 2 || form->indkey.values[0] != kAttName ||
	    form->indkey.values[1] != kAttKey || index->rd_indcollation[0] != C_COLLATION_OID ||
	    index->rd_indcollation[1] != C_COLLATION_OID || RelationGetIndexExpressions(index) != NIL ||
	    RelationGetIndexPredicate(index) != NIL)
		ReportStateTableAltered(kStateTable, TableChange::kIndexes);
}

/* May lookups use this index: does it hold an entry for every row? */
bool
IndexServesLookups(Relation index)
{
	Form_pg_index form = index->rd_index;
	return form->indisvalid && form->indisready && form->indislive;
}

/* Looks the relations up by name, verifies them and caches what calls need. */
void
LoadStateRelations(LOCKMODE mode)
{
	Oid heap_oid = StateRelationOid(kStateTable);
	if (!OidIsValid(heap_oid))
		ReportStateTableMissing(kStateTable);

	Relation heap = table_open(heap_oid, mode);
	/* Opening the indexes may process an invalidation of the table or of an
	 * index already read, making what was read stale: then this load is not
	 * trusted, and the caller loads again. */
	state_relations.heap_oid = heap_oid;
	uint64 invalidations = state_relations.invalidations;
	List *index_oids = CheckStateTable(heap);

	if (state_relations.context == NULL)
		state_relations.context = AllocSetContextCreate(
		    TopMemoryContext, "ratelimit state relations", ALLOCSET_SMALL_SIZES);
	else
		MemoryContextReset(state_relations.context);

	int nindexes = 0;
	int lookup = -1;
	ListCell *cell;
	foreach (cell, index_oids) {
		Relation index = index_open(lfirst_oid(cell), mode);
		CheckStateIndex(index);
		if (IndexServesLookups(index) && (lookup < 0 || index->rd_index->indisprimary))
			lookup = nindexes;
		MemoryContext old = MemoryContextSwitchTo(state_relations.context);
		state_relations.index_info[nindexes] = BuildIndexInfo(index);
		MemoryContextSwitchTo(old);
		state_relations.index_oids[nindexes++] = RelationGetRelid(index);
		index_close(index, NoLock);
	}
	list_free(index_oids);
	if (lookup < 0)
		ReportStateTableAltered(kStateTable, TableChange::kPrimaryKey);
	fmgr_info_cxt(F_TEXTEQ, &state_relations.key_equal, state_relations.context);

	state_relations.nindexes = nindexes;
	state_relations.lookup = lookup;
	state_relations.logged = heap->rd_rel->relpersistence == RELPERSISTENCE_PERMANENT;
	state_relations.valid = state_relations.invalidations == invalidations;
	table_close(heap, NoLock);
}

/*
 * Opens the table and its indexes, (re)validating them if anything changed.
 * Waiting for the table's lock (behind ALTER TABLE swapping in a new primary
 * key, or DROP EXTENSION) may reveal that the cached OIDs are gone: they are
 * used only once the lock is held and the cache is still valid.
 */
void
OpenStateRelations(LOCKMODE mode, OpenRelations *rels)
{
	for (;;) {
		if (!state_relations.valid)
			LoadStateRelations(mode);
		rels->heap = try_relation_open(state_relations.heap_oid, mode);
		if (rels->heap == NULL) {
			state_relations.valid = false; /* dropped meanwhile: look it up again */
			continue;
		}
		if (!state_relations.valid) {
			/* Locking the table accepted an invalidation: an index cached
			 * before it may be gone.  Reload under the table's lock. */
			table_close(rels->heap, NoLock);
			continue;
		}
		rels->nindexes = state_relations.nindexes;
		for (int i = 0; i < rels->nindexes; i++)
			rels->indexes[i] = index_open(state_relations.index_oids[i], mode);
		rels->index = rels->indexes[state_relations.lookup];
		/* Taking the locks may have processed an invalidation: re-verify. */
		if (state_relations.valid)
			return;
		for (int i = 0; i < rels->nindexes; i++)
			index_close(rels->indexes[i], NoLock);
		table_close(rels->heap, NoLock);
	}
}

void
CloseStateRelations(OpenRelations *rels)
{
	for (int i = 0; i < rels->nindexes; i++)
		index_close(rels->indexes[i], NoLock);
	table_close(rels->heap, NoLock);
}

/* A scan key for `value` of column `att` (name or key) of the primary key,
 * with the equality function looked up once per relcache generation rather
 * than per call. */
void
InitEqualKey(ScanKeyData *scan_key, AttrNumber att, text *value)
{
	ScanKeyEntryInitializeWithInfo(scan_key, 0, att, BTEqualStrategyNumber, InvalidOid,
	                               C_COLLATION_OID, &state_relations.key_equal,
	                               PointerGetDatum(value));
}

/* Scan keys for (name, key). */
void
InitBucketKeys(ScanKeyData *keys, text *name, text *key)
{
	InitEqualKey(&keys[0], kAttName, name);
	InitEqualKey(&keys[1], kAttKey, key);
}

/*
 * Visits the index entries of the key that come after the version found, as
 * an executor's index scan does: each heap page visited is pruned if it can
 * be (heap_page_prune_opt), and an entry whose versions are all dead is
 * marked so that later scans skip it.  A non-HOT update that moved the row
 * to a page whose entry comes first (one VACUUM emptied) leaves the old page
 * full of dead versions, reachable only through the entry after the row's:
 * without this, no take would ever prune it, and its space would wait for
 * VACUUM while the table grows.  The rest of the found version's HOT chain
 * is on the page already visited and is skipped.  What is found is not
 * used, and the dirty snapshot's report on the version found is kept.
 */
void
VisitRemainingEntries(IndexScanDesc scan, Relation heap, Snapshot dirty)
{
	scan->xs_heap_continue = false;
	if (index_getnext_tid(scan, ForwardScanDirection) == NULL)
		return; /* the usual case: no other entry */
	const TransactionId xmin = dirty->xmin;
	const TransactionId xmax = dirty->xmax;
	const uint32 speculative_token = dirty->speculativeToken;
	TupleTableSlot *other = table_slot_create(heap, NULL);
	(void)index_fetch_heap(scan, other);
	while (index_getnext_slot(scan, ForwardScanDirection, other))
		;
	ExecDropSingleTupleTableSlot(other);
	dirty->xmin = xmin;
	dirty->xmax = xmax;
	dirty->speculativeToken = speculative_token;
}

/* Finds the row's version visible to a dirty snapshot: the latest committed
 * one, or one being inserted (dirty->xmin set) or replaced (dirty->xmax set)
 * by a transaction still in progress, or our own latest.  With
 * `committed_only`, versions still being inserted are passed over: during a
 * non-HOT update the new version may come first in the index.  (A standby
 * prunes nothing: there the scan stops at the version found.) */
bool
FindBucket(Relation heap, Relation index, ScanKeyData *keys, Snapshot dirty, TupleTableSlot *slot,
           bool committed_only = false)
{
	IndexScanDesc scan = RlIndexBeginScan(heap, index, dirty, 2);
	index_rescan(scan, keys, 2, NULL, 0);
	bool found = index_getnext_slot(scan, ForwardScanDirection, slot);
	while (found && committed_only && TransactionIdIsValid(dirty->xmin))
		found = index_getnext_slot(scan, ForwardScanDirection, slot);
	if (found && !RecoveryInProgress())
		VisitRemainingEntries(scan, heap, dirty);
	index_endscan(scan);
	return found;
}

/* How often a lookup that missed is repeated because the key was seen to
 * move: each repeat needs another concurrent non-HOT update to miss again. */
constexpr int kMissRetries = 16;

/*
 * True if some version of (name, key) was replaced by an update: the key
 * exists, even if a lookup just missed it.  A dirty-snapshot btree scan
 * copies a leaf page's matching entries first and visits the heap later; a
 * non-HOT update committed in between adds its entry after the copy and
 * leaves the copied chain dead, so the scan finds nothing.  A delete (reset)
 * leaves t_ctid pointing at the version itself and does not count.
 */
bool
KeyMovedAway(Relation heap, Relation index, ScanKeyData *keys, TupleTableSlot *slot)
{
	IndexScanDesc scan = RlIndexBeginScan(heap, index, SnapshotAny, 2);
	index_rescan(scan, keys, 2, NULL, 0);
	bool moved = false;
	while (!moved && index_getnext_slot(scan, ForwardScanDirection, slot)) {
		BufferHeapTupleTableSlot *bslot = reinterpret_cast<BufferHeapTupleTableSlot *>(slot);
		HeapTuple tuple = bslot->base.tuple;
		LockBuffer(bslot->buffer, BUFFER_LOCK_SHARE);
		HeapTupleHeader header = tuple->t_data;
		moved = !(header->t_infomask & HEAP_XMAX_INVALID) &&
		        !HEAP_XMAX_IS_LOCKED_ONLY(header->t_infomask) &&
		        !ItemPointerEquals(&tuple->t_self, &header->t_ctid);
		LockBuffer(bslot->buffer, BUFFER_LOCK_UNLOCK);
	}
	index_endscan(scan);
	ExecClearTuple(slot);
	return moved;
}

/* The advisory lock that serialises first inserts of a key. */
struct NewKeyLock {
	bool held;
	LOCKTAG tag;
};

void
AcquireNewKeyLock(NewKeyLock *lock, uint64 key_hash)
{
	SET_LOCKTAG_ADVISORY(lock->tag, MyDatabaseId, static_cast<uint32>(key_hash >> 32),
	                     static_cast<uint32>(key_hash), kNewKeyLockClass);
	/* Another first insert of the key holds it only briefly; count a wait. */
	if (LockAcquire(&lock->tag, ExclusiveLock, false, true) == LOCKACQUIRE_NOT_AVAIL) {
		const TimestampTz started = GetCurrentTimestamp();
		(void)LockAcquire(&lock->tag, ExclusiveLock, false, false);
		CountWait(started);
	}
	lock->held = true;
}

void
ReleaseNewKeyLock(NewKeyLock *lock)
{
	if (lock->held)
		LockRelease(&lock->tag, ExclusiveLock, false);
	lock->held = false;
}

/* The heavyweight tuple lock a waiter queues on (at most one at a time). */
struct TupleQueue {
	bool held;
	ItemPointerData tid;
};

/* Waits for transaction `xid`, an in-flight writer of the version at `tid`,
 * first queueing behind earlier waiters on that version. */
void
WaitForWriter(Relation heap, TupleQueue *queue, ItemPointer tid, TransactionId xid)
{
	if (!queue->held || !ItemPointerEquals(&queue->tid, tid)) {
		if (queue->held)
			UnlockTuple(heap, &queue->tid, kTupleQueueLock);
		LockTuple(heap, tid, kTupleQueueLock);
		queue->held = true;
		queue->tid = *tid;
	}
	XactLockTableWait(xid, heap, tid, XLTW_Update);
}

void
LeaveTupleQueue(Relation heap, TupleQueue *queue)
{
	if (queue->held)
		UnlockTuple(heap, &queue->tid, kTupleQueueLock);
	queue->held = false;
}

LatestVersion *
LatestVersionSlot(uint64 key_hash)
{
	return &latest_versions[key_hash % kLatestVersions];
}

void
RememberLatestVersion(uint64 key_hash, ItemPointer tid)
{
	LatestVersion *entry = LatestVersionSlot(key_hash);
	entry->hash = key_hash;
	entry->xid = GetCurrentTransactionIdIfAny();
	entry->tid = *tid;
}

/*
 * The version of (name, key) this transaction wrote last, if it is still the
 * latest: fetched by its remembered TID and trusted only if it is live to a
 * dirty snapshot, was created by this transaction (not by a subtransaction
 * since rolled back) and holds the same key.  Nobody else can have replaced
 * a version this transaction created while it is in progress.
 */
bool
FindRemembered(Relation heap, uint64 key_hash, text *name, text *key, Snapshot dirty,
               TupleTableSlot *slot)
{
	/* The writer must be this transaction or a subtransaction of it still
	 * alive: a rolled-back one has released the relation lock that kept
	 * the table from being truncated under the remembered TID. */
	LatestVersion *entry = LatestVersionSlot(key_hash);
	if (entry->hash != key_hash || !TransactionIdIsValid(entry->xid) ||
	    !TransactionIdIsCurrentTransactionId(entry->xid))
		return false;
	ItemPointerData tid = entry->tid;
	if (!table_tuple_fetch_row_version(heap, &tid, dirty, slot))
		return false;
	HeapTuple tuple = reinterpret_cast<BufferHeapTupleTableSlot *>(slot)->base.tuple;
	bool isnull;
	bool ours = TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(tuple->t_data)) &&
	            !TransactionIdIsValid(dirty->xmin) && !TransactionIdIsValid(dirty->xmax) &&
	            CompareText(DatumGetTextPP(slot_getattr(slot, kAttName, &isnull)), name) == 0 &&
	            CompareText(DatumGetTextPP(slot_getattr(slot, kAttKey, &isnull)), key) == 0;
	if (!ours)
		ExecClearTuple(slot);
	return ours;
}

/* What a lookup knows of the key it looks for. */
struct BucketLookup {
	text *name;
	text *key;
	uint64 hash; /* BucketHash(name, key, kNewKeySeed) */
	ScanKeyData keys[2];
};

void
InitLookup(BucketLookup *lookup, text *name, text *key)
{
	lookup->name = name;
	lookup->key = key;
	lookup->hash = BucketHash(name, key, kNewKeySeed);
	InitBucketKeys(lookup->keys, name, key);
}

/*
 * The latest version of the key in `slot`: this transaction's own last
 * write when it is still the latest, otherwise through the index.  Waits out
 * another transaction's uncommitted first insert of the key, whose outcome
 * decides ours, and looks again; `new_key` (if given) is released first, so
 * that whoever holds a new-key lock never waits.  With `sure`, a miss is
 * trusted only once no version of the key was seen to move (KeyMovedAway);
 * without it a miss may be a race, which is fine for a caller that will look
 * again before acting.
 */
bool
FindLatest(const OpenRelations &rels, BucketLookup *lookup, Snapshot dirty, TupleTableSlot *slot,
           bool sure, NewKeyLock *new_key, bool peek = false)
{
	if (FindRemembered(rels.heap, lookup->hash, lookup->name, lookup->key, dirty, slot))
		return true;
	/* A standby answers on what the primary committed, without waiting, and
	 * so does a peek: a version still being inserted is passed over. */
	const bool committed_only = peek || RecoveryInProgress();
	for (int moves = 0;;) {
		CHECK_FOR_INTERRUPTS();
		if (FindBucket(rels.heap, rels.index, lookup->keys, dirty, slot, committed_only)) {
			if (!TransactionIdIsValid(dirty->xmin))
				return true;
			if (new_key != NULL)
				ReleaseNewKeyLock(new_key);
			/* Wait holding no buffer pin, so the page can be pruned. */
			ItemPointerData tid = slot->tts_tid;
			ExecClearTuple(slot);
			const TimestampTz started = GetCurrentTimestamp();
			XactLockTableWait(dirty->xmin, rels.heap, &tid, XLTW_None);
			CountWait(started);
			continue;
		}
		if (!sure || moves++ >= kMissRetries ||
		    !KeyMovedAway(rels.heap, rels.index, lookup->keys, slot))
			return false;
	}
}

core::Bucket
ReadBucket(TupleTableSlot *slot)
{
	bool isnull;
	double tokens = DatumGetFloat8(slot_getattr(slot, kAttTokens, &isnull));
	TimestampTz stamp = DatumGetTimestampTz(slot_getattr(slot, kAttStamp, &isnull));
	/* -infinity (DT_NOBEGIN) is core::kNotBlocked; a 0.2.0 table has no box. */
	TimestampTz blocked = slot->tts_tupleDescriptor->natts >= kAttBlockedUntil
	                          ? DatumGetTimestampTz(slot_getattr(slot, kAttBlockedUntil, &isnull))
	                          : core::kNotBlocked;
	/* Before 0.4.0 no sliding window: nothing before. */
	double previous = slot->tts_tupleDescriptor->natts >= kAttPrevious
	                      ? DatumGetFloat8(slot_getattr(slot, kAttPrevious, &isnull))
	                      : 0.0;
	return core::Bucket{tokens, stamp, blocked, previous};
}

/* The whole row in `slot`; full_at is unknown (DT_NOEND) in a database not
 * yet updated to 0.3.0. */
StoredBucket
ReadStoredBucket(Relation heap, TupleTableSlot *slot)
{
	bool isnull;
	StoredBucket row;
	row.name = DatumGetTextPP(slot_getattr(slot, kAttName, &isnull));
	row.key = DatumGetTextPP(slot_getattr(slot, kAttKey, &isnull));
	row.bucket = ReadBucket(slot);
	row.full_at = RelationGetDescr(heap)->natts >= kAttFullAt
	                  ? DatumGetTimestampTz(slot_getattr(slot, kAttFullAt, &isnull))
	                  : DT_NOEND;
	return row;
}

/* `at` as a valid timestamptz: beyond the last one, infinity. */
TimestampTz
StorableTime(int64 at)
{
	return at > END_TIMESTAMP ? DT_NOEND : at;
}

/* The row of a bucket that a decision made at `now` stored. */
HeapTuple
FormBucketTuple(Relation heap, text *name, text *key, const core::Decision &decision,
                TimestampTz now)
{
	Datum values[kNatts] = {PointerGetDatum(name),
	                        PointerGetDatum(key),
	                        Float8GetDatum(decision.next.tokens),
	                        TimestampTzGetDatum(decision.next.stamp_us),
	                        TimestampTzGetDatum(StorableTime(core::FullAtMicros(decision, now))),
	                        TimestampTzGetDatum(StorableTime(decision.next.blocked_until_us)),
	                        Float8GetDatum(decision.next.previous)};
	bool nulls[kNatts] = {false, false, false, false, false, false, false};
	/* Forms as many columns as the table has (CheckStateTable). */
	return heap_form_tuple(RelationGetDescr(heap), values, nulls);
}

/*
 * Adds the entry of the version at `tid` to every index ready for inserts.
 * A new key is checked for uniqueness; a non-HOT update is not: its key is
 * the one of the version it replaced, which this transaction holds, and a
 * check would visit every earlier version of the key.
 */
void
InsertIndexEntries(const OpenRelations &rels, text *name, text *key, ItemPointer tid,
                   bool replaces_version)
{
	Datum values[2] = {PointerGetDatum(name), PointerGetDatum(key)};
	bool nulls[2] = {false, false};
	IndexUniqueCheck check = replaces_version ? UNIQUE_CHECK_NO : UNIQUE_CHECK_YES;
	for (int i = 0; i < rels.nindexes; i++) {
		IndexInfo *info = state_relations.index_info[i];
		if (!info->ii_ReadyForInserts)
			continue;
		(void)RlIndexInsert(rels.indexes[i], values, nulls, tid, rels.heap, check, replaces_version,
		                    info);
		RlIndexInsertCleanup(rels.indexes[i], info);
	}
}

void
InsertBucket(const OpenRelations &rels, const BucketLookup &lookup, const core::Decision &decision,
             TimestampTz now)
{
	HeapTuple tuple = FormBucketTuple(rels.heap, lookup.name, lookup.key, decision, now);
	heap_insert(rels.heap, tuple, GetCurrentCommandId(true), 0, NULL);
	InsertIndexEntries(rels, lookup.name, lookup.key, &tuple->t_self, false);
	RememberLatestVersion(lookup.hash, &tuple->t_self);
	heap_freetuple(tuple);
}

/*
 * Replaces the version at `tid` by what `decision` (made at `now`) stores, waiting for any
 * transaction that holds or is changing it.  TM_Ok, or TM_Updated / TM_Deleted when that
 * transaction replaced or deleted the version meanwhile: nothing was written
 * and the caller decides again on the latest version.
 */
TM_Result
UpdateBucket(const OpenRelations &rels, const BucketLookup &lookup, ItemPointer tid, CommandId cid,
             const core::Decision &decision, TimestampTz now)
{
	HeapTuple tuple = FormBucketTuple(rels.heap, lookup.name, lookup.key, decision, now);
	TM_FailureData tmfd;
	bool needs_index = false;
	TM_Result result = RlHeapUpdate(rels.heap, tid, tuple, cid, true, &tmfd, &needs_index);
	if (result == TM_Ok) {
		/* Not HOT (the page was full): the key is unchanged, which lets btree
		 * delete the older duplicates bottom-up. */
		if (needs_index)
			InsertIndexEntries(rels, lookup.name, lookup.key, &tuple->t_self, true);
		RememberLatestVersion(lookup.hash, &tuple->t_self);
	} else if (result != TM_Updated && result != TM_Deleted) {
		elog(ERROR, "could not update rate limit bucket: result %d", static_cast<int>(result));
	}
	heap_freetuple(tuple);
	return result;
}

/* Locks the latest version of the row found in `slot`, waiting for any
 * in-flight writer; on success `slot` holds the locked version.  False when
 * the row went away meanwhile: the caller starts over. */
bool
LockLatestVersion(Relation heap, TupleTableSlot *slot, Snapshot dirty, CommandId cid)
{
	ItemPointerData tid = slot->tts_tid;
	TM_FailureData tmfd;
	/* heapam ignores the snapshot here; FIND_LAST_VERSION follows the chain. */
	TM_Result result = table_tuple_lock(heap, &tid, dirty, slot, cid, LockTupleNoKeyExclusive,
	                                    LockWaitBlock, TUPLE_LOCK_FLAG_FIND_LAST_VERSION, &tmfd);
	if (result == TM_Ok)
		return true;
	if (result == TM_Updated || result == TM_Deleted)
		return false;
	elog(ERROR, "could not lock rate limit bucket: result %d", static_cast<int>(result));
	pg_unreachable();
}

bool
Writes(const Operation &operation)
{
	return operation.kind == Operation::kTake || operation.kind == Operation::kRefund ||
	       operation.kind == Operation::kRecordNew || operation.kind == Operation::kPenalize;
}

void
RegisterStorageCallbacks()
{
	CacheRegisterRelcacheCallback(InvalidateStateRelations, (Datum)0);
}

bool
AlwaysAvailable()
{
	return true;
}

void
NothingRequired()
{
}

/* Applies `operation` to the latest committed state of (name, key); a
 * take or refund stores its result in the caller's transaction.  A denial
 * leaves no lock and writes nothing, except that a take of a key never seen
 * before records it when it starts below a full bucket (StartsBelowFull).
 * With `placement`, a key the table does not hold is offered to it first,
 * under the key's new-key lock when the call writes (so that no row of the
 * key can be inserted meanwhile); only a key it does not take is stored in
 * the table, and only outside a read-only transaction. */
core::Decision
DecideRow(text *name, text *key, const core::Limit &limit, const Operation &operation,
          const Placement *placement)
{
	const bool writes = Writes(operation);
	OpenRelations rels;
	OpenStateRelations(writes ? RowExclusiveLock : AccessShareLock, &rels);

	BucketLookup lookup;
	InitLookup(&lookup, name, key);
	SnapshotData dirty;
	InitDirtySnapshot(dirty);
	TupleTableSlot *slot = table_slot_create(rels.heap, NULL);
	NewKeyLock new_key = {false, {}};
	TupleQueue queue = {false, {}};
	/* A miss must be sure before it is acted on; a write's first miss is
	 * only acted on after it looks again under the new-key lock. */
	bool sure = !writes;
	bool wrote = false;
	core::Decision decision{};
	TimestampTz now = 0;

	for (;;) {
		if (!FindLatest(rels, &lookup, &dirty, slot, sure, &new_key,
		                operation.kind == Operation::kPeek)) {
			/* A new key: stored only if this call consumes or refunds, or
			 * if its first sighting must be remembered (or, with a
			 * placement, if it writes: the placement decides). */
			now = ClockNow();
			decision = core::Apply(operation, core::NewBucket(limit, now), limit, now);
			bool store =
			    writes && (placement != NULL || decision.write || core::StartsBelowFull(limit));
			if (!sure) {
				if (store)
					AcquireNewKeyLock(&new_key, lookup.hash);
				sure = true;
				continue; /* inserted meanwhile, or a race? look again */
			}
			if (store && !new_key.held) { /* the key went away while we looked again */
				AcquireNewKeyLock(&new_key, lookup.hash);
				continue;
			}
			if (placement != NULL && placement->place(placement->context, &decision))
				break;
			if (!store || (!decision.write && !core::StartsBelowFull(limit)))
				break;
			if (placement != NULL && XactReadOnly)
				ReportMemoryTableReadOnly(true);
			InsertBucket(rels, lookup, decision, now);
			wrote = true;
			break;
		}
		ReleaseNewKeyLock(&new_key); /* found: the row speaks for the key */
		if (operation.kind == Operation::kRecordNew)
			break; /* the key is known already */

		now = ClockNow();
		decision = core::Apply(operation, ReadBucket(slot), limit, now);
		if (!decision.allowed && (!writes || !decision.write))
			break; /* lock-free denial on the latest committed version */
		/* A standby (checks only) answers without waiting, as a peek. */
		if (TransactionIdIsValid(dirty.xmax) && operation.kind != Operation::kPeek &&
		    !RecoveryInProgress()) {
			/* Granted only if an in-flight writer leaves enough: wait for it
			 * (queued, holding nothing) and decide again. */
			ItemPointerData tid = slot->tts_tid;
			ExecClearTuple(slot); /* no buffer pin while waiting: the page can be pruned */
			const TimestampTz started = GetCurrentTimestamp();
			WaitForWriter(rels.heap, &queue, &tid, dirty.xmax);
			CountWait(started);
			continue;
		}
		if (!writes || !decision.write)
			break;
		if (placement != NULL && XactReadOnly)
			ReportMemoryTableReadOnly(false);
		TM_Result result =
		    UpdateBucket(rels, lookup, &slot->tts_tid, GetCurrentCommandId(true), decision, now);
		if (result == TM_Ok) {
			wrote = true;
			break;
		}
		/* Replaced or deleted meanwhile: decide again on the latest. */
	}

	ReleaseNewKeyLock(&new_key); /* inserted: the row now speaks for the key */
	LeaveTupleQueue(rels.heap, &queue);
	ExecDropSingleTupleTableSlot(slot);
	CloseStateRelations(&rels);
	if (wrote)
		CommandCounterIncrement();
	return decision;
}

/* kTableEngine's decide. */
core::Decision
DecideBucket(text *name, text *key, const core::Limit &limit, const Operation &operation)
{
	return DecideRow(name, key, limit, operation, NULL);
}

ResetOutcome ResetBucketUnlessBusy(text *name, text *key, bool wait);

/* Deletes the bucket so that its next use starts full.  True if it existed. */
bool
ResetBucket(text *name, text *key)
{
	return ResetBucketUnlessBusy(name, key, true) == ResetOutcome::kDeleted;
}

/* ResetBucket, waiting for the bucket's writer only when `wait`; without it,
 * a bucket some transaction writes or locks is kBusy. */
ResetOutcome
ResetBucketUnlessBusy(text *name, text *key, bool wait)
{
	OpenRelations rels;
	OpenStateRelations(RowExclusiveLock, &rels);

	BucketLookup lookup;
	InitLookup(&lookup, name, key);
	SnapshotData dirty;
	InitDirtySnapshot(dirty);
	TupleTableSlot *slot = table_slot_create(rels.heap, NULL);
	ResetOutcome outcome = ResetOutcome::kAbsent;

	for (int moves = 0;;) {
		CHECK_FOR_INTERRUPTS();
		bool found;
		if (wait) {
			found = FindLatest(rels, &lookup, &dirty, slot, true, NULL);
		} else {
			found = FindBucket(rels.heap, rels.index, lookup.keys, &dirty, slot);
			if (found && (TransactionIdIsValid(dirty.xmin) || TransactionIdIsValid(dirty.xmax))) {
				outcome = ResetOutcome::kBusy;
				break;
			}
			if (!found && moves++ < kMissRetries &&
			    KeyMovedAway(rels.heap, rels.index, lookup.keys, slot))
				continue;
		}
		if (!found)
			break;
		CommandId cid = GetCurrentCommandId(true);
		ItemPointerData tid = slot->tts_tid;
		TM_FailureData tmfd;
		TM_Result locked = table_tuple_lock(
		    rels.heap, &tid, &dirty, slot, cid, LockTupleNoKeyExclusive,
		    wait ? LockWaitBlock : LockWaitSkip, TUPLE_LOCK_FLAG_FIND_LAST_VERSION, &tmfd);
		if (locked == TM_WouldBlock) {
			outcome = ResetOutcome::kBusy;
			break;
		}
		if (locked == TM_Updated || locked == TM_Deleted)
			continue; /* gone meanwhile: look again */
		if (locked != TM_Ok)
			elog(ERROR, "could not lock rate limit bucket: result %d", static_cast<int>(locked));
		TM_Result result =
		    heap_delete(rels.heap, &slot->tts_tid, cid, InvalidSnapshot, true, &tmfd, false);
		if (result != TM_Ok)
			elog(ERROR, "could not delete locked rate limit bucket: result %d",
			     static_cast<int>(result));
		outcome = ResetOutcome::kDeleted;
		break;
	}

	ExecDropSingleTupleTableSlot(slot);
	CloseStateRelations(&rels);
	if (outcome == ResetOutcome::kDeleted)
		CommandCounterIncrement();
	return outcome;
}

/* Visits every bucket of `name` in key order, as a take would see it: the
 * latest committed version (or this transaction's own).  Reads through the
 * primary key with a dirty snapshot: it never waits, and takes no SSI
 * predicate lock, so a SERIALIZABLE reader makes no later take fail.  It
 * is a live read, not a snapshot: a bucket written meanwhile may show its
 * state before or after that write. */
void
VisitBuckets(text *name, BucketVisitor visit, void *context)
{
	OpenRelations rels;
	OpenStateRelations(AccessShareLock, &rels);
	ScanKeyData scan_key;
	InitEqualKey(&scan_key, kAttName, name);
	SnapshotData dirty;
	InitDirtySnapshot(dirty);
	TupleTableSlot *slot = table_slot_create(rels.heap, NULL);
	IndexScanDesc scan = RlIndexBeginScan(rels.heap, rels.index, &dirty, 1);
	index_rescan(scan, &scan_key, 1, NULL, 0);
	while (index_getnext_slot(scan, ForwardScanDirection, slot)) {
		CHECK_FOR_INTERRUPTS();
		/* Another transaction's uncommitted insert or new version: its
		 * committed predecessor, if any, is the one shown. */
		if (TransactionIdIsValid(dirty.xmin))
			continue;
		visit(ReadStoredBucket(rels.heap, slot), context);
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	CloseStateRelations(&rels);
}

/* Up to `max_keys` distinct row keys of `name` after `after` (NULL: from the
 * first), in key order, as the primary key holds them: every version, dead
 * ones too, so that a key a concurrent update moves is still listed.
 * Returns how many; each key is palloc'd. */
int
ListBucketKeys(text *name, text *after, text **keys, int max_keys)
{
	OpenRelations rels;
	OpenStateRelations(AccessShareLock, &rels);
	ScanKeyData scan_keys[2];
	InitEqualKey(&scan_keys[0], kAttName, name);
	const int nkeys = after == NULL ? 1 : 2;
	if (after != NULL)
		ScanKeyEntryInitialize(&scan_keys[1], 0, kAttKey, BTGreaterStrategyNumber, InvalidOid,
		                       C_COLLATION_OID, F_TEXT_GT, PointerGetDatum(after));
	TupleTableSlot *slot = table_slot_create(rels.heap, NULL);
	IndexScanDesc scan = RlIndexBeginScan(rels.heap, rels.index, SnapshotAny, nkeys);
	index_rescan(scan, scan_keys, nkeys, NULL, 0);
	int count = 0;
	while (count < max_keys && index_getnext_slot(scan, ForwardScanDirection, slot)) {
		bool isnull;
		text *key = DatumGetTextPP(slot_getattr(slot, kAttKey, &isnull));
		/* Versions of one key are consecutive in key order. */
		if (count > 0 && CompareText(keys[count - 1], key) == 0)
			continue;
		keys[count++] = CopyText(key);
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	CloseStateRelations(&rels);
	return count;
}

/* What a multi-take knows of one row. */
struct TakeRow {
	BucketLookup lookup;
	core::Bucket state;
	bool exists;
	ItemPointerData tid;
	NewKeyLock new_key; /* absent: we hold its new-key lock */
};

/* Lock-free look at the latest committed version of every row, with one
 * clock reading: whether all would be granted. */
bool
LookAtAll(const OpenRelations &rels, BucketTake *takes, TakeRow *rows, int count, Snapshot dirty,
          TupleTableSlot *slot)
{
	TimestampTz now = ClockNow();
	bool all_allowed = true;
	for (int i = 0; i < count; i++) {
		rows[i].exists = FindLatest(rels, &rows[i].lookup, dirty, slot, true, NULL);
		rows[i].state = rows[i].exists ? ReadBucket(slot) : core::NewBucket(takes[i].limit, now);
		takes[i].decision = core::Decide(rows[i].state, takes[i].limit, takes[i].request, now);
		all_allowed = all_allowed && takes[i].decision.allowed;
	}
	ExecClearTuple(slot);
	return all_allowed;
}

/*
 * With every row locked in canonical order, decides on what is locked (one
 * clock reading after the waits) and writes every grant.  Runs inside the
 * caller's subtransaction; returns whether all were granted.
 */
bool
LockAndTakeAll(const OpenRelations &rels, BucketTake *takes, TakeRow *rows, int count,
               Snapshot dirty, TupleTableSlot *slot)
{
	CommandId cid = GetCurrentCommandId(true);
	for (int i = 0; i < count; i++) {
		for (;;) {
			if (FindLatest(rels, &rows[i].lookup, dirty, slot, true, &rows[i].new_key)) {
				const TimestampTz started = GetCurrentTimestamp();
				const bool locked = LockLatestVersion(rels.heap, slot, dirty, cid);
				CountWait(started);
				if (!locked)
					continue;
				rows[i].exists = true;
				rows[i].tid = slot->tts_tid;
				rows[i].state = ReadBucket(slot);
				break;
			}
			if (!rows[i].new_key.held) {
				AcquireNewKeyLock(&rows[i].new_key, rows[i].lookup.hash);
				continue; /* inserted meanwhile? look again */
			}
			rows[i].exists = false;
			break;
		}
	}
	ExecClearTuple(slot);

	TimestampTz now = ClockNow();
	bool all_allowed = true;
	for (int i = 0; i < count; i++) {
		if (!rows[i].exists)
			rows[i].state = core::NewBucket(takes[i].limit, now);
		takes[i].decision = core::Decide(rows[i].state, takes[i].limit, takes[i].request, now);
		all_allowed = all_allowed && takes[i].decision.allowed;
	}
	if (all_allowed) {
		for (int i = 0; i < count; i++) {
			/* A new key that starts below full is stored even when nothing
			 * is taken from it, as DecideBucket stores it: its first
			 * sighting counts. */
			const bool first_sighting = !rows[i].exists && core::StartsBelowFull(takes[i].limit);
			if (!takes[i].decision.write && !first_sighting)
				continue;
			if (!rows[i].exists) {
				InsertBucket(rels, rows[i].lookup, takes[i].decision, now);
				continue;
			}
			/* The row is locked by this subtransaction: the update cannot
			 * find another writer. */
			if (UpdateBucket(rels, rows[i].lookup, &rows[i].tid, cid, takes[i].decision, now) !=
			    TM_Ok)
				elog(ERROR, "could not update locked rate limit bucket");
		}
	}
	for (int i = 0; i < count; i++)
		ReleaseNewKeyLock(&rows[i].new_key);
	return all_allowed;
}

/* What LockAndTakeAll works on. */
struct AllTakes {
	const OpenRelations *rels;
	BucketTake *takes;
	TakeRow *rows;
	int count;
	Snapshot dirty;
	TupleTableSlot *slot;
};

bool
LockAndTakeAllIn(void *context)
{
	const AllTakes *all = static_cast<const AllTakes *>(context);
	return LockAndTakeAll(*all->rels, all->takes, all->rows, all->count, all->dirty, all->slot);
}

/* kTableEngine's take_all: rows are locked in the order of `takes`
 * (canonical), so overlapping calls cannot deadlock.  A denial leaves no
 * lock and no new version behind. */
bool
TakeAll(BucketTake *takes, int count)
{
	OpenRelations rels;
	OpenStateRelations(RowExclusiveLock, &rels);
	TupleTableSlot *slot = table_slot_create(rels.heap, NULL);
	SnapshotData dirty;
	InitDirtySnapshot(dirty);
	TakeRow *rows = static_cast<TakeRow *>(palloc0(sizeof(TakeRow) * count));
	for (int i = 0; i < count; i++)
		InitLookup(&rows[i].lookup, takes[i].name, takes[i].key);

	/* A denial on the latest committed versions is final, with nothing
	 * locked; a grant is decided again once every row is locked. */
	bool all_allowed = LookAtAll(rels, takes, rows, count, &dirty, slot);
	bool wrote = false;
	if (all_allowed) {
		/* Lock and write in a subtransaction, so that a denial found only
		 * once the rows are locked takes its locks back. */
		AllTakes all{&rels, takes, rows, count, &dirty, slot};
		all_allowed = InSubtransaction(LockAndTakeAllIn, &all);
		wrote = all_allowed;
	}

	if (!all_allowed) {
		/* Nothing was taken, so every bucket reports what it holds; one that
		 * would have granted alone still says so, and how long its reserved
		 * work would have waited. */
		TimestampTz now = ClockNow();
		const core::Request look = core::Request::Plain(0.0);
		for (int i = 0; i < count; i++) {
			if (!takes[i].decision.allowed)
				continue;
			const double wait = takes[i].decision.retry_after;
			takes[i].decision = core::Decide(rows[i].state, takes[i].limit, look, now);
			takes[i].decision.allowed = true;
			takes[i].decision.retry_after = wait;
		}
	}
	ExecDropSingleTupleTableSlot(slot);
	CloseStateRelations(&rels);
	if (wrote)
		CommandCounterIncrement();
	pfree(rows);
	return all_allowed;
}

/* Deletes, from heap blocks [first, first + count), the rows `filter`
 * accepts, in the caller's transaction.  A row some transaction is writing,
 * or that is locked or replaced before it is locked here, is left alone
 * without waiting: the writer wins.  A row is deleted only in the version
 * the filter accepted, locked first. */
SweepProgress
SweepBuckets(BlockNumber first, BlockNumber count, SweepFilter filter, void *context)
{
	OpenRelations rels;
	OpenStateRelations(RowExclusiveLock, &rels);
	SweepProgress progress = {first, true, 0};
	const BlockNumber nblocks = RelationGetNumberOfBlocks(rels.heap);
	if (first >= nblocks) {
		CloseStateRelations(&rels);
		return progress;
	}
	const BlockNumber blocks = Min(count, nblocks - first);
	progress.next_block = first + blocks;
	progress.finished = progress.next_block >= nblocks;

	/* Neither a synchronized scan (it would start elsewhere) nor an MVCC
	 * snapshot (it would take SSI predicate locks). */
	SnapshotData dirty;
	InitDirtySnapshot(dirty);
	TableScanDesc scan = table_beginscan_strat(rels.heap, &dirty, 0, NULL, true, false);
	heap_setscanlimits(scan, first, blocks);
	TupleTableSlot *slot = table_slot_create(rels.heap, NULL);
	TupleTableSlot *locked = table_slot_create(rels.heap, NULL);
	const TimestampTz now = ClockNow();
	const CommandId cid = GetCurrentCommandId(true);

	while (table_scan_getnextslot(scan, ForwardScanDirection, slot)) {
		CHECK_FOR_INTERRUPTS();
		/* Being inserted, replaced or deleted: whatever the writer leaves
		 * speaks for the key. */
		if (TransactionIdIsValid(dirty.xmin) || TransactionIdIsValid(dirty.xmax))
			continue;
		StoredBucket row = ReadStoredBucket(rels.heap, slot);
		if (!filter(row, now, context))
			continue;

		/* Without FIND_LAST_VERSION: a version replaced since it was read
		 * is not locked (TM_Updated), and the taker's row stays. */
		ItemPointerData tid = slot->tts_tid;
		TM_FailureData tmfd;
		if (table_tuple_lock(rels.heap, &tid, &dirty, locked, cid, LockTupleExclusive, LockWaitSkip,
		                     0, &tmfd) != TM_Ok)
			continue;
		ExecClearTuple(locked);
		TM_Result result = heap_delete(rels.heap, &tid, cid, InvalidSnapshot, true, &tmfd, false);
		if (result != TM_Ok)
			elog(ERROR, "could not delete locked rate limit bucket: result %d",
			     static_cast<int>(result));
		progress.deleted++;
	}

	table_endscan(scan);
	ExecDropSingleTupleTableSlot(locked);
	ExecDropSingleTupleTableSlot(slot);
	CloseStateRelations(&rels);
	if (progress.deleted > 0)
		CommandCounterIncrement();
	return progress;
}

/* rate_limit_purge: sweeps the whole table, kPurgeBatchBlocks heap pages
 * a batch (`filter` looks at the names). */
int64
PurgeTable(text *, SweepFilter filter, void *context, const Batches &batches)
{
	int64 purged = 0;
	for (BlockNumber next = 0;;) {
		batches.begin(batches.context);
		const SweepProgress progress = SweepBuckets(next, kPurgeBatchBlocks, filter, context);
		batches.commit(batches.context);
		purged += progress.deleted;
		next = progress.next_block;
		if (progress.finished)
			return purged;
	}
}

/* rate_limit_reset_limit: first, in key order, kResetBatchKeys keys a
 * batch, every bucket of `name` no transaction is writing or locking; then
 * each of the others in a batch of its own, waiting for its writer while
 * holding no other row, so that it cannot deadlock with a caller that holds
 * several keys of the limit. */
int64
ResetTableLimit(text *name, const Batches &batches)
{
	MemoryContext procedure_context = CurrentMemoryContext;
	List *busy = NIL;
	text *after = NULL;
	int64 reset = 0;
	for (;;) {
		batches.begin(batches.context);
		text **keys = static_cast<text **>(palloc(sizeof(text *) * kResetBatchKeys));
		const int count = ListBucketKeys(name, after, keys, kResetBatchKeys);
		for (int i = 0; i < count; i++) {
			const ResetOutcome outcome = ResetBucketUnlessBusy(name, keys[i], false);
			if (outcome == ResetOutcome::kDeleted)
				reset++;
			if (outcome == ResetOutcome::kBusy) {
				MemoryContext inner = MemoryContextSwitchTo(procedure_context);
				busy = lappend(busy, CopyText(keys[i]));
				MemoryContextSwitchTo(inner);
			}
		}
		if (count > 0) {
			MemoryContext inner = MemoryContextSwitchTo(procedure_context);
			if (after != NULL)
				pfree(after);
			after = CopyText(keys[count - 1]);
			MemoryContextSwitchTo(inner);
		}
		batches.commit(batches.context);
		if (count < kResetBatchKeys)
			break;
	}
	ListCell *cell;
	foreach (cell, busy) {
		batches.begin(batches.context);
		if (ResetBucket(name, static_cast<text *>(lfirst(cell))))
			reset++;
		batches.commit(batches.context);
	}
	return reset;
}

} /* namespace */

int64
BucketWaitMicros()
{
	return wait_micros;
}

bool
BucketStateIsLogged()
{
	while (!state_relations.valid)
		LoadStateRelations(AccessShareLock);
	return state_relations.logged;
}

Oid
StateRelationOid(const char *relname)
{
	Oid schema = get_namespace_oid(kStateSchema, true);
	return OidIsValid(schema) ? get_relname_relid(relname, schema) : InvalidOid;
}

bool
TableHoldsLimit(text *name)
{
	text *key;
	return ListBucketKeys(name, NULL, &key, 1) > 0;
}

core::Decision
DecideInTableOr(text *name, text *key, const core::Limit &limit, const Operation &operation,
                const Placement &placement)
{
	return DecideRow(name, key, limit, operation, &placement);
}

const BucketEngine kTableEngine = {
    "table",
    "the table",
    true, /* can_shard */
    true, /* writes_tables */
    RegisterStorageCallbacks,
    AlwaysAvailable,
    NothingRequired,
    DecideBucket,
    TakeAll,
    ResetBucket,
    ResetTableLimit,
    VisitBuckets,
    PurgeTable,
    NULL, /* policy_written: a row judges itself by the policy at every call */
    HoldPlaces,
};

void
CheckDirectAccess(Relation heap, const char *table)
{
	TupleDesc desc = RelationGetDescr(heap);
	if (heap->rd_rel->relkind != RELKIND_RELATION || heap->rd_rel->relam != HEAP_TABLE_AM_OID)
		ReportStateTableAltered(table, TableChange::kNotPlainTable);
	if (heap->trigdesc != NULL)
		ReportStateTableAltered(table, TableChange::kTrigger, heap->trigdesc->triggers[0].tgname);
	if (heap->rd_rel->relrowsecurity)
		ReportStateTableAltered(table, TableChange::kRowSecurity);
	if (desc->constr != NULL && desc->constr->num_check > 0)
		ReportStateTableAltered(table, TableChange::kCheckConstraint,
		                        desc->constr->check[0].ccname);
}

} /* namespace ratelimit::pg */

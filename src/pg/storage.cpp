/*
 * src/pg/storage.cpp
 *
 * Bucket state in ratelimit.buckets, accessed the way logical replication's
 * apply worker accesses tables: a primary-key lookup with a dirty snapshot,
 * table_tuple_lock() on the latest version, heap_update()/heap_insert()/
 * heap_delete() and index_insert() by hand.  No SPI and no executor: that is
 * both what makes a call cheap and what keeps it free of serialization
 * failures at REPEATABLE READ and SERIALIZABLE, because every call works on
 * the latest committed version of its row, never on the caller's snapshot.
 *
 * Locking rules
 * - Relations: a check takes AccessShareLock, a take or reset
 *   RowExclusiveLock, on the table and its index, held to transaction end.
 * - A grant replaces the version it was decided on with heap_update(), not
 *   waiting: that succeeds only if the version is still the latest and
 *   nobody holds or is changing it.  Otherwise (and for a reset) it locks the
 *   row's latest version with LockTupleNoKeyExclusive and
 *   TUPLE_LOCK_FLAG_FIND_LAST_VERSION, waiting for any in-flight writer,
 *   then reads the clock and decides again on what it locked.  The new
 *   version (and the lock) belong to the caller's (sub)transaction, so
 *   ROLLBACK refunds and a second taker waits for the first to end.
 * - A refund is written like a grant.
 * - A denial is decided on the latest committed version without locking or
 *   writing: any in-flight writer can only leave fewer tokens, or, if it
 *   resets the bucket, be ordered after this call.  A check or a cost-0 look
 *   that would be granted waits for an in-flight writer first, so it answers
 *   what a take would.
 * - A key's first row is inserted under an exclusive advisory lock on
 *   hash(name, key) (lock class kNewKeyLockClass, shown in pg_locks as
 *   objsubid 21068), re-checked after the lock is granted: two first calls
 *   never race into a unique violation.  The lock is released as soon as the
 *   row is in the heap and the index: from then on the row's uncommitted
 *   xmin makes later callers wait, so a transaction creating many keys does
 *   not fill the shared lock table.
 * - rate_limit_take_all locks all its rows in one canonical order (name, then
 *   key, bytewise), deciding only once it holds every lock: two overlapping
 *   calls wait for each other instead of deadlocking.
 * - After any write, CommandCounterIncrement() so that the next call in the
 *   same statement sees, and can lock, the new version.
 * The direct path bypasses triggers, constraints, RLS and other indexes, so
 * the table's shape is verified once per relcache generation.
 */
#include "pg/storage.hpp"

#include "pg/clock.hpp"
#include "pg/errors.hpp"

namespace ratelimit::pg {

namespace {

constexpr const char *kStateSchema = "ratelimit";
constexpr const char *kStateTable = "buckets";

/* Column numbers of ratelimit.buckets. */
constexpr AttrNumber kAttName = 1;
constexpr AttrNumber kAttKey = 2;
constexpr AttrNumber kAttTokens = 3;
constexpr AttrNumber kAttStamp = 4;
constexpr int kNatts = 4;

/* Advisory lock class (LOCKTAG field4) private to the extension: "RL". */
constexpr uint16 kNewKeyLockClass = 0x524C;

/* Relation OIDs and the index's IndexInfo, valid until a relcache
 * invalidation touches either relation. */
struct StateRelations {
	bool valid;
	Oid heap_oid;
	Oid index_oid;
	IndexInfo *index_info; /* allocated in context */
	FmgrInfo key_equal;    /* texteq, for the lookup's scan keys */
	MemoryContext context;
};

StateRelations state_relations = {false, InvalidOid, InvalidOid, NULL, {}, NULL};

void
InvalidateStateRelations(Datum, Oid relid)
{
	if (!OidIsValid(relid) || relid == state_relations.heap_oid ||
	    relid == state_relations.index_oid)
		state_relations.valid = false;
}

/* Verifies what the direct path relies on; returns the primary key's OID. */
Oid
CheckStateTable(Relation heap)
{
	static const Oid kTypes[kNatts] = {TEXTOID, TEXTOID, FLOAT8OID, TIMESTAMPTZOID};
	TupleDesc desc = RelationGetDescr(heap);

	if (heap->rd_rel->relkind != RELKIND_RELATION || heap->rd_rel->relam != HEAP_TABLE_AM_OID)
		ReportStateTableAltered(kStateTable, TableChange::kNotPlainTable);
	if (heap->trigdesc != NULL)
		ReportStateTableAltered(kStateTable, TableChange::kTrigger,
		                        heap->trigdesc->triggers[0].tgname);
	if (heap->rd_rel->relrowsecurity)
		ReportStateTableAltered(kStateTable, TableChange::kRowSecurity);
	if (desc->constr != NULL && desc->constr->num_check > 0)
		ReportStateTableAltered(kStateTable, TableChange::kCheckConstraint,
		                        desc->constr->check[0].ccname);
	if (desc->natts != kNatts)
		ReportStateTableAltered(kStateTable, TableChange::kColumns);
	for (int i = 0; i < kNatts; i++) {
		Form_pg_attribute att = TupleDescAttr(desc, i);
		if (att->attisdropped || att->atttypid != kTypes[i] || !att->attnotnull ||
		    (att->atttypid == TEXTOID && att->attcollation != C_COLLATION_OID))
			ReportStateTableAltered(kStateTable, TableChange::kColumns);
	}

	List *indexes = RelationGetIndexList(heap);
	if (list_length(indexes) != 1)
		ReportStateTableAltered(kStateTable,
		                        indexes == NIL ? TableChange::kPrimaryKey : TableChange::kIndexes);
	Oid index_oid = linitial_oid(indexes);
	list_free(indexes);
	return index_oid;
}

void
CheckStateIndex(Relation index)
{
	Form_pg_index form = index->rd_index;
	if (index->rd_rel->relam != BTREE_AM_OID || !form->indisunique || !form->indimmediate ||
	    !form->indisvalid || form->indnatts != 2 || form->indnkeyatts != 2 ||
	    form->indkey.values[0] != kAttName || form->indkey.values[1] != kAttKey ||
	    index->rd_indcollation[0] != C_COLLATION_OID ||
	    index->rd_indcollation[1] != C_COLLATION_OID || RelationGetIndexExpressions(index) != NIL ||
	    RelationGetIndexPredicate(index) != NIL)
		ReportStateTableAltered(kStateTable, TableChange::kPrimaryKey);
}

/* Looks the relations up by name, verifies them and caches what calls need. */
void
LoadStateRelations(LOCKMODE mode)
{
	Oid heap_oid = StateRelationOid(kStateTable);
	if (!OidIsValid(heap_oid))
		ReportStateTableMissing(kStateTable);

	Relation heap = table_open(heap_oid, mode);
	Oid index_oid = CheckStateTable(heap);
	Relation index = index_open(index_oid, mode);
	CheckStateIndex(index);

	if (state_relations.context == NULL)
		state_relations.context = AllocSetContextCreate(
		    TopMemoryContext, "ratelimit state relations", ALLOCSET_SMALL_SIZES);
	else
		MemoryContextReset(state_relations.context);
	MemoryContext old = MemoryContextSwitchTo(state_relations.context);
	state_relations.index_info = BuildIndexInfo(index);
	MemoryContextSwitchTo(old);
	fmgr_info_cxt(F_TEXTEQ, &state_relations.key_equal, state_relations.context);

	state_relations.heap_oid = heap_oid;
	state_relations.index_oid = index_oid;
	state_relations.valid = true;
	index_close(index, NoLock);
	table_close(heap, NoLock);
}

/* Opens the table and its index, (re)validating them if anything changed. */
void
OpenStateRelations(LOCKMODE mode, Relation *heap, Relation *index)
{
	for (;;) {
		if (!state_relations.valid)
			LoadStateRelations(mode);
		*heap = table_open(state_relations.heap_oid, mode);
		*index = index_open(state_relations.index_oid, mode);
		/* Taking the locks may have processed an invalidation: re-verify. */
		if (state_relations.valid)
			return;
		index_close(*index, NoLock);
		table_close(*heap, NoLock);
	}
}

void
CloseStateRelations(Relation heap, Relation index)
{
	index_close(index, NoLock);
	table_close(heap, NoLock);
}

/* Scan keys for (name, key), with the equality function looked up once per
 * relcache generation rather than per call. */
void
InitBucketKeys(ScanKeyData *keys, text *name, text *key)
{
	ScanKeyEntryInitializeWithInfo(&keys[0], 0, kAttName, BTEqualStrategyNumber, InvalidOid,
	                               C_COLLATION_OID, &state_relations.key_equal,
	                               PointerGetDatum(name));
	ScanKeyEntryInitializeWithInfo(&keys[1], 0, kAttKey, BTEqualStrategyNumber, InvalidOid,
	                               C_COLLATION_OID, &state_relations.key_equal,
	                               PointerGetDatum(key));
}

/* Finds the row's version visible to a dirty snapshot: the latest committed
 * one, or one being inserted (dirty->xmin set) or replaced (dirty->xmax set)
 * by a transaction still in progress, or our own latest. */
bool
FindBucket(Relation heap, Relation index, ScanKeyData *keys, Snapshot dirty, TupleTableSlot *slot)
{
	IndexScanDesc scan = RlIndexBeginScan(heap, index, dirty, 2);
	index_rescan(scan, keys, 2, NULL, 0);
	bool found = index_getnext_slot(scan, ForwardScanDirection, slot);
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

/*
 * The latest version of (name, key) in `slot`: waits out another
 * transaction's uncommitted first insert of the key, whose outcome decides
 * ours, and looks again.  With `sure`, a miss is trusted only once no version
 * of the key was seen to move (KeyMovedAway); without it a miss may be a
 * race, which is fine for a caller that will look again before acting.
 */
bool
FindLatest(Relation heap, Relation index, ScanKeyData *keys, Snapshot dirty, TupleTableSlot *slot,
           bool sure)
{
	for (int moves = 0;;) {
		CHECK_FOR_INTERRUPTS();
		if (FindBucket(heap, index, keys, dirty, slot)) {
			if (!TransactionIdIsValid(dirty->xmin))
				return true;
			XactLockTableWait(dirty->xmin, heap, &slot->tts_tid, XLTW_None);
			continue;
		}
		if (!sure || moves++ >= kMissRetries || !KeyMovedAway(heap, index, keys, slot))
			return false;
	}
}

/* A bucket seen for the first time: full, or at its policy's initial balance. */
core::Bucket
NewBucket(const core::Limit &limit, bool has_initial, double initial, TimestampTz now)
{
	core::Bucket fresh = core::FullBucket(limit, now);
	if (has_initial)
		fresh.tokens = initial;
	return fresh;
}

core::Bucket
ReadBucket(TupleTableSlot *slot)
{
	bool isnull;
	double tokens = DatumGetFloat8(slot_getattr(slot, kAttTokens, &isnull));
	TimestampTz stamp = DatumGetTimestampTz(slot_getattr(slot, kAttStamp, &isnull));
	return core::Bucket{tokens, stamp};
}

HeapTuple
FormBucketTuple(Relation heap, text *name, text *key, const core::Bucket &bucket)
{
	Datum values[kNatts] = {PointerGetDatum(name), PointerGetDatum(key),
	                        Float8GetDatum(bucket.tokens), TimestampTzGetDatum(bucket.stamp_us)};
	bool nulls[kNatts] = {false, false, false, false};
	return heap_form_tuple(RelationGetDescr(heap), values, nulls);
}

void
InsertIndexEntry(Relation heap, Relation index, text *name, text *key, ItemPointer tid,
                 bool unchanged)
{
	Datum values[2] = {PointerGetDatum(name), PointerGetDatum(key)};
	bool nulls[2] = {false, false};
	(void)RlIndexInsert(index, values, nulls, tid, heap, unchanged, state_relations.index_info);
	RlIndexInsertCleanup(index, state_relations.index_info);
}

void
InsertBucket(Relation heap, Relation index, text *name, text *key, const core::Bucket &bucket)
{
	HeapTuple tuple = FormBucketTuple(heap, name, key, bucket);
	heap_insert(heap, tuple, GetCurrentCommandId(true), 0, NULL);
	InsertIndexEntry(heap, index, name, key, &tuple->t_self, false);
	heap_freetuple(tuple);
}

/*
 * Replaces the version at `tid` by `bucket`.  With `wait` false it gives up,
 * changing nothing, if another transaction holds or is changing the version
 * (TM_BeingModified) or has replaced it (TM_Updated, TM_Deleted); with `wait`
 * true the caller must hold the row lock, and anything but TM_Ok is a bug.
 */
TM_Result
UpdateBucket(Relation heap, Relation index, ItemPointer tid, CommandId cid, bool wait, text *name,
             text *key, const core::Bucket &bucket)
{
	HeapTuple tuple = FormBucketTuple(heap, name, key, bucket);
	TM_FailureData tmfd;
	bool needs_index = false;
	TM_Result result = RlHeapUpdate(heap, tid, tuple, cid, wait, &tmfd, &needs_index);
	if (result == TM_Ok) {
		/* Not HOT (the page was full): the key is unchanged, which lets btree
		 * delete the older duplicates bottom-up. */
		if (needs_index)
			InsertIndexEntry(heap, index, name, key, &tuple->t_self, true);
	} else if (wait ||
	           (result != TM_BeingModified && result != TM_Updated && result != TM_Deleted)) {
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

/* The advisory lock that serialises first inserts of (name, key). */
void
SetNewKeyLockTag(LOCKTAG *tag, text *name, text *key)
{
	uint64 hash = BucketHash(name, key, 0);
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, static_cast<uint32>(hash >> 32),
	                     static_cast<uint32>(hash), kNewKeyLockClass);
}

/* The core's answer for `operation` on `bucket` at `now`. */
core::Decision
Evaluate(const Operation &operation, const core::Bucket &bucket, const core::Limit &limit,
         TimestampTz now)
{
	if (operation.kind == Operation::kRefund)
		return core::Refund(bucket, limit, operation.amount, now);
	return core::Decide(bucket, limit, operation.request, now);
}

} /* namespace */

uint64
BucketHash(text *name, text *key, uint64 seed)
{
	uint64 hash = hash_bytes_extended(reinterpret_cast<const unsigned char *>(VARDATA_ANY(name)),
	                                  VARSIZE_ANY_EXHDR(name), seed);
	return hash_bytes_extended(reinterpret_cast<const unsigned char *>(VARDATA_ANY(key)),
	                           VARSIZE_ANY_EXHDR(key), hash);
}

Oid
StateRelationOid(const char *relname)
{
	Oid schema = get_namespace_oid(kStateSchema, true);
	return OidIsValid(schema) ? get_relname_relid(relname, schema) : InvalidOid;
}

void
RegisterStorageCallbacks()
{
	CacheRegisterRelcacheCallback(InvalidateStateRelations, (Datum)0);
}

core::Decision
DecideBucket(text *name, text *key, const core::Limit &limit, const Operation &operation)
{
	const bool take = (operation.kind == Operation::kTake || operation.kind == Operation::kRefund);
	Relation heap;
	Relation index;
	OpenStateRelations(take ? RowExclusiveLock : AccessShareLock, &heap, &index);

	ScanKeyData keys[2];
	InitBucketKeys(keys, name, key);
	SnapshotData dirty;
	InitDirtySnapshot(dirty);
	TupleTableSlot *slot = table_slot_create(heap, NULL);
	LOCKTAG new_key_tag;
	bool key_locked = false;
	/* A miss must be sure before it is acted on; a take's first miss is
	 * only acted on after it looks again under the new-key lock. */
	bool sure = !take;
	bool wrote = false;
	core::Decision decision;

	for (;;) {
		if (!FindLatest(heap, index, keys, &dirty, slot, sure)) {
			/* A new key; store it only if this call consumes. */
			TimestampTz now = ClockNow();
			decision =
			    Evaluate(operation, NewBucket(limit, operation.has_initial, operation.initial, now),
			             limit, now);
			if (!sure) {
				if (decision.write) {
					SetNewKeyLockTag(&new_key_tag, name, key);
					(void)LockAcquire(&new_key_tag, ExclusiveLock, false, false);
					key_locked = true;
				}
				sure = true;
				continue; /* inserted meanwhile, or a race? look again */
			}
			if (!take || !decision.write)
				break;
			if (!key_locked) { /* the key went away while we looked again */
				SetNewKeyLockTag(&new_key_tag, name, key);
				(void)LockAcquire(&new_key_tag, ExclusiveLock, false, false);
				key_locked = true;
				continue;
			}
			InsertBucket(heap, index, name, key, decision.next);
			wrote = true;
			break;
		}

		decision = Evaluate(operation, ReadBucket(slot), limit, ClockNow());
		if (!decision.allowed)
			break; /* lock-free denial on the latest committed version */
		if (!take || !decision.write) {
			if (TransactionIdIsValid(dirty.xmax) && operation.kind != Operation::kPeek) {
				/* Granted only if an in-flight writer leaves enough: wait. */
				XactLockTableWait(dirty.xmax, heap, &slot->tts_tid, XLTW_None);
				continue;
			}
			break;
		}

		CommandId cid = GetCurrentCommandId(true);
		if (!TransactionIdIsValid(dirty.xmax)) {
			/* Nobody was changing the row: replace the very version decided
			 * on, without waiting.  Success means it was still the latest and
			 * unlocked, so the decision and the clock reading stand. */
			TM_Result result =
			    UpdateBucket(heap, index, &slot->tts_tid, cid, false, name, key, decision.next);
			if (result == TM_Ok) {
				wrote = true;
				break;
			}
			if (result != TM_BeingModified)
				continue; /* replaced or deleted meanwhile: look again */
		}
		/* Contended: lock the latest version, waiting for its writer, and
		 * decide again on it with the clock read after the wait. */
		if (!LockLatestVersion(heap, slot, &dirty, cid))
			continue;
		decision = Evaluate(operation, ReadBucket(slot), limit, ClockNow());
		if (decision.write) {
			(void)UpdateBucket(heap, index, &slot->tts_tid, cid, true, name, key, decision.next);
			wrote = true;
		}
		break;
	}

	/* Inserted (or found after all): the row now speaks for the key. */
	if (key_locked)
		LockRelease(&new_key_tag, ExclusiveLock, false);
	ExecDropSingleTupleTableSlot(slot);
	CloseStateRelations(heap, index);
	if (wrote)
		CommandCounterIncrement();
	return decision;
}

bool
ResetBucket(text *name, text *key)
{
	Relation heap;
	Relation index;
	OpenStateRelations(RowExclusiveLock, &heap, &index);

	ScanKeyData keys[2];
	InitBucketKeys(keys, name, key);
	SnapshotData dirty;
	InitDirtySnapshot(dirty);
	TupleTableSlot *slot = table_slot_create(heap, NULL);
	bool deleted = false;

	for (;;) {
		if (!FindLatest(heap, index, keys, &dirty, slot, true))
			break;
		CommandId cid = GetCurrentCommandId(true);
		if (!LockLatestVersion(heap, slot, &dirty, cid))
			continue;
		TM_FailureData tmfd;
		TM_Result result =
		    heap_delete(heap, &slot->tts_tid, cid, InvalidSnapshot, true, &tmfd, false);
		if (result != TM_Ok)
			elog(ERROR, "could not delete locked rate limit bucket: result %d",
			     static_cast<int>(result));
		deleted = true;
		break;
	}

	ExecDropSingleTupleTableSlot(slot);
	CloseStateRelations(heap, index);
	if (deleted)
		CommandCounterIncrement();
	return deleted;
}

} /* namespace ratelimit::pg */

namespace ratelimit::pg {

namespace {

int
CompareText(text *a, text *b)
{
	int a_len = VARSIZE_ANY_EXHDR(a);
	int b_len = VARSIZE_ANY_EXHDR(b);
	int cmp = memcmp(VARDATA_ANY(a), VARDATA_ANY(b), Min(a_len, b_len));
	return cmp != 0 ? cmp : (a_len > b_len) - (a_len < b_len);
}

/* What a multi-take knows of one row while it holds the locks. */
struct LockedRow {
	bool exists;
	ItemPointerData tid;
	bool key_locked; /* absent: we hold its new-key lock */
	LOCKTAG tag;
};

} /* namespace */

int
TakeOrder(const void *a, const void *b)
{
	const BucketTake *x = static_cast<const BucketTake *>(a);
	const BucketTake *y = static_cast<const BucketTake *>(b);
	int cmp = CompareText(x->name, y->name);
	return cmp != 0 ? cmp : CompareText(x->key, y->key);
}

bool
TakeAll(BucketTake *takes, int count)
{
	Relation heap;
	Relation index;
	OpenStateRelations(RowExclusiveLock, &heap, &index);
	TupleTableSlot *slot = table_slot_create(heap, NULL);
	SnapshotData dirty;
	InitDirtySnapshot(dirty);
	ScanKeyData keys[2];
	bool all_allowed = true;

	/* First a lock-free look at the latest committed versions: if any
	 * bucket denies, the whole call is denied and nothing is locked. */
	TimestampTz now = ClockNow();
	core::Bucket *states = static_cast<core::Bucket *>(palloc(sizeof(core::Bucket) * count));
	for (int i = 0; i < count; i++) {
		InitBucketKeys(keys, takes[i].name, takes[i].key);
		states[i] = FindLatest(heap, index, keys, &dirty, slot, true)
		                ? ReadBucket(slot)
		                : NewBucket(takes[i].limit, takes[i].has_initial, takes[i].initial, now);
		takes[i].decision = core::Decide(states[i], takes[i].limit, takes[i].request, now);
		if (!takes[i].decision.allowed)
			all_allowed = false;
	}

	bool wrote = false;
	LockedRow *rows = static_cast<LockedRow *>(palloc0(sizeof(LockedRow) * count));
	if (all_allowed) {
		/* Lock every row in canonical order, waiting for writers. */
		CommandId cid = GetCurrentCommandId(true);
		for (int i = 0; i < count; i++) {
			InitBucketKeys(keys, takes[i].name, takes[i].key);
			for (;;) {
				if (FindLatest(heap, index, keys, &dirty, slot, true)) {
					if (!LockLatestVersion(heap, slot, &dirty, cid))
						continue;
					rows[i].exists = true;
					rows[i].tid = slot->tts_tid;
					states[i] = ReadBucket(slot);
					break;
				}
				if (!rows[i].key_locked) {
					SetNewKeyLockTag(&rows[i].tag, takes[i].name, takes[i].key);
					(void)LockAcquire(&rows[i].tag, ExclusiveLock, false, false);
					rows[i].key_locked = true;
					continue; /* inserted meanwhile? look again */
				}
				rows[i].exists = false;
				break;
			}
		}

		/* Decide on what is locked, with one clock reading after the waits. */
		now = ClockNow();
		for (int i = 0; i < count; i++) {
			if (!rows[i].exists)
				states[i] = NewBucket(takes[i].limit, takes[i].has_initial, takes[i].initial, now);
			takes[i].decision = core::Decide(states[i], takes[i].limit, takes[i].request, now);
			if (!takes[i].decision.allowed)
				all_allowed = false;
		}
		if (all_allowed) {
			for (int i = 0; i < count; i++) {
				if (!takes[i].decision.write)
					continue;
				if (rows[i].exists)
					(void)UpdateBucket(heap, index, &rows[i].tid, cid, true, takes[i].name,
					                   takes[i].key, takes[i].decision.next);
				else
					InsertBucket(heap, index, takes[i].name, takes[i].key, takes[i].decision.next);
				wrote = true;
			}
		}
		for (int i = 0; i < count; i++)
			if (rows[i].key_locked)
				LockRelease(&rows[i].tag, ExclusiveLock, false);
	}

	/* Denied: nothing was taken, so every bucket reports what it holds. */
	if (!all_allowed) {
		const core::Request look{0.0, false, false, 0.0};
		for (int i = 0; i < count; i++)
			if (takes[i].decision.allowed)
				takes[i].decision = core::Decide(states[i], takes[i].limit, look, now);
	}
	pfree(rows);
	pfree(states);
	ExecDropSingleTupleTableSlot(slot);
	CloseStateRelations(heap, index);
	if (wrote)
		CommandCounterIncrement();
	return all_allowed;
}

} /* namespace ratelimit::pg */

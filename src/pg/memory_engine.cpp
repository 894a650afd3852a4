/*
 * src/pg/memory_engine.cpp
 *
 * The memory engine (kMemoryEngine, defined at the end): policies with
 * storage => 'memory' keep their buckets in shared memory (the table of
 * memory_table.cpp) with escrow accounting, whose arithmetic is the core's
 * (src/core/escrow.hpp).  This file finds a bucket's slot, copies its
 * escrow state in and out of core::Decide under the set's spinlock, and
 * keeps what the core records in the caller's (sub)transaction
 * (memory_undo.cpp), which finishes it at commit and undoes it at abort.
 *
 * A slot holds the bucket as committed transactions left it and the sum of
 * the costs of takes not yet committed (pending).  A take decides on the
 * committed bucket refilled to now, less what is pending, as if the
 * pending takes were spent, and adds its cost to pending; a commit moves
 * the cost into the committed bucket, an abort only removes it from
 * pending.  Refunds and resets take effect when their transaction commits;
 * a penalty box, and the first sighting of a key that starts below full,
 * are stored at once and undone by an abort.  Nobody ever waits, and no
 * transaction id is taken.
 *
 * Locking rules
 * - A call reads the clock and makes room for its undo record before it
 *   takes its set's spinlock, and under it only finds the slot, decides
 *   (core::Decide), claims a slot for a new key and keeps the record;
 *   nothing under it can raise an error or allocate.  A new key that finds
 *   no slot free or forgettable is refused with 53400 if the call grants
 *   (a denial is returned without storing what it would have stored).
 * - A slot is judged by the limit of its last recorded call; a call under
 *   another limit unmarks it kept.  A call that stores a bucket new, or
 *   judges it by another limit, while a write of its policy is open marks
 *   it kept with that write's mark (BeingRedefined, under the set's
 *   spinlock); a call that finds none looks its policy up again once the
 *   spinlock is released, its undo record holding the slot: if the policy
 *   gives another limit now, the call read it before a commit whose write
 *   has left the redefinitions since, and the slot is kept for good.
 * - Listing and purge copy a set's slots out under its spinlock and work
 *   on the copies; purge frees a slot only if its generation and version
 *   are still those it judged and no transaction holds it.  A reset of a
 *   whole limit forgets its buckets at once under each set's spinlock.
 */
#include "pg/engine.hpp"

#include "pg/bucket_keys.hpp"
#include "pg/clock.hpp"
#include "pg/errors.hpp"
#include "pg/memory_table.hpp"
#include "pg/memory_undo.hpp"
#include "pg/policies.hpp"

namespace ratelimit::pg {

namespace {

using namespace memory;

/* After a call stored bucket (name, key) new at way `way` of set `set`,
 * or judged it by another limit, under `limit`, with no write of its policy
 * open: if the policy now gives the key another limit, the call read it
 * before a redefinition committed whose writer has left the redefinitions
 * since, and the bucket is kept as that writer would have kept it.  The
 * call's undo record holds the slot meanwhile, so nothing evicts it
 * before. */
void
KeepIfReplaced(MemoryTable *table, text *name, text *key, const core::Limit &limit, int set,
               int way, uint32 generation, uint32 limit_epoch)
{
	/* The writer left after sending its invalidation: this looks after
	 * both. */
	pg_memory_barrier();
	Policy policy;
	if (!FindPolicy(name, &policy) || policy.engine != &kMemoryEngine)
		return;
	if (PolicyLimit(policy, name, key) == limit)
		return;
	Set *s = &table->set[set];
	SpinLockAcquire(&s->mutex);
	Slot &slot = s->slots[way];
	if (slot.used && slot.generation == generation && slot.escrow.limit_epoch == limit_epoch &&
	    !slot.kept) {
		slot.kept = true;
		slot.kept_by = 0;
	}
	SpinLockRelease(&s->mutex);
}

/* kMemoryEngine's init: registers the transaction callbacks and, when the
 * library is being preloaded, defines ratelimit.memory_buckets and sets
 * the table aside. */
void
DefineMemorySettings()
{
	RegisterMemoryCallbacks();
	/* The size of shared memory set aside at server start: only then. */
	if (process_shared_preload_libraries_in_progress)
		DefineMemoryTable();
}

/* Whether the engine has its shared memory (attaching to it, from
 * PostgreSQL 17 without preloading, if it must). */
bool
HasMemoryEngine()
{
	return Table() != NULL;
}

void
RequireMemoryEngine()
{
	(void)RequireTable();
}

/* kMemoryEngine's decide: `operation` on memory bucket (name, key).  A take
 * or refund belongs to the caller's (sub)transaction: its abort undoes it.
 * Raises 55000 without shared memory (before PostgreSQL 17, without
 * preloading) and 53400 when a new key finds no room. */
core::Decision
DecideMemoryBucket(text *name, text *key, const core::Limit &limit, const Operation &operation)
{
	MemoryTable *table = RequireTable();
	ReserveUndo();
	const BucketName id = NameOf(table, name, key);
	const TimestampTz now = ClockNow();
	Set *set = &table->set[id.set];

	SpinLockAcquire(&set->mutex);
	int way = FindWay(table, id);
	Slot *slot = way >= 0 ? &set->slots[way] : NULL;
	/* A key not held is decided on as never seen, and stored only if the
	 * call is recorded. */
	core::EscrowState unseen;
	core::EscrowState &state = slot != NULL ? slot->escrow : (unseen = core::UnseenEscrow(limit));
	const core::EscrowStep step = core::Decide(state, operation, limit, now);
	if (!step.recorded) {
		SpinLockRelease(&set->mutex);
		return step.decision;
	}
	const core::EscrowRecord &record = step.record;
	if (slot == NULL) {
		way = ClaimWay(set, now);
		if (way < 0) {
			SpinLockRelease(&set->mutex);
			/* Only a grant needs the room; a denial is answered without
			 * storing what it would have. */
			if (record.takes || record.refunds)
				ReportMemoryFull(table->capacity);
			return step.decision;
		}
		slot = &set->slots[way];
		slot->used = true;
		slot->kept = false;
		slot->kept_by = 0;
		slot->generation++;
		slot->hash = id.hash.hash;
		slot->check = id.hash.check;
		slot->database = MyDatabaseId;
		slot->name_bytes = id.name_bytes;
		slot->key_bytes = id.key_bytes;
		slot->escrow = unseen;
		char *text = TextOf(table, id.set, way);
		memcpy(text, id.name, id.name_bytes);
		memcpy(text + id.name_bytes, id.key, id.key_bytes);
	}
	if (record.relimits) {
		slot->kept = false; /* judged under the new definition from now on */
		slot->kept_by = 0;
	}
	/* Stored new, or judged by another limit, while a write of its policy
	 * is open: the call read the definition that write replaces (or the
	 * write's own, which may never commit), so the bucket is kept as the
	 * write keeps those it found. */
	const bool judged = record.created || record.relimits;
	uint64 mark;
	const bool marked = judged && BeingRedefined(table, id.name, id.name_bytes, &mark);
	if (marked && !slot->kept) {
		slot->kept = true;
		slot->kept_by = mark;
	}
	Assert(core::InvariantsHold(slot->escrow));
	const uint32 generation = slot->generation;
	const uint32 limit_epoch = slot->escrow.limit_epoch;
	PushUndo(table, id.set, way, limit, record);
	SpinLockRelease(&set->mutex);
	if (judged && !marked)
		KeepIfReplaced(table, name, key, limit, id.set, way, generation, limit_epoch);
	return step.decision;
}

/* `kind` of takes[i]'s request on its memory bucket. */
core::Decision
MemoryTake(const BucketTake &take, Operation::Kind kind, const core::Request &request)
{
	Operation operation{kind, request, 0.0};
	return DecideMemoryBucket(take.name, take.key, take.limit, operation);
}

/* kMemoryEngine's take_all: takes from every bucket or from none. */
bool
TakeAllMemory(BucketTake *takes, int count)
{
	/* Denied on the buckets as they stand: final, as for the table. */
	bool allowed = true;
	for (int i = 0; i < count; i++) {
		takes[i].decision = MemoryTake(takes[i], Operation::kCheck, takes[i].request);
		allowed = allowed && takes[i].decision.allowed;
	}
	if (allowed) {
		const int64 mark = UndoCount();
		int taken = 0;
		for (; taken < count; taken++) {
			takes[taken].decision =
			    MemoryTake(takes[taken], Operation::kTake, takes[taken].request);
			if (!takes[taken].decision.allowed)
				break;
		}
		if (taken == count)
			return true;
		/* Another caller took meanwhile: give back what this call took, and
		 * decide again on what is left. */
		UndoSince(mark);
		for (int i = 0; i < count; i++)
			takes[i].decision = MemoryTake(takes[i], Operation::kCheck, takes[i].request);
	}
	/* Nothing was taken, so every bucket reports what it holds; one that
	 * would have granted alone still says so, and how long its reserved
	 * work would have waited. */
	for (int i = 0; i < count; i++) {
		if (!takes[i].decision.allowed)
			continue;
		const double wait = takes[i].decision.retry_after;
		takes[i].decision = MemoryTake(takes[i], Operation::kCheck, core::Request::Plain(0.0));
		takes[i].decision.allowed = true;
		takes[i].decision.retry_after = wait;
	}
	return false;
}

/* Forgets memory bucket (name, key) in the caller's transaction (its abort
 * brings it back).  True if it existed. */
bool
ResetMemoryBucket(text *name, text *key)
{
	MemoryTable *table = RequireTable();
	ReserveUndo();
	const BucketName id = NameOf(table, name, key);
	Set *set = &table->set[id.set];
	SpinLockAcquire(&set->mutex);
	const int way = FindWay(table, id);
	if (way < 0 || set->slots[way].escrow.absent) {
		SpinLockRelease(&set->mutex);
		return false;
	}
	/* Forgotten when this transaction commits. */
	Slot &slot = set->slots[way];
	const core::EscrowRecord record = core::RecordReset(slot.escrow);
	Assert(core::InvariantsHold(slot.escrow));
	PushUndo(table, id.set, way, slot.escrow.limit, record);
	SpinLockRelease(&set->mutex);
	return true;
}

/* Forgets every memory bucket of `name` of this database, at once;
 * returns how many. */
int64
ResetMemoryLimit(text *name)
{
	int64 reset = 0;
	ForEachSlotOf(RequireTable(), VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name), [&](Slot &slot) {
		/* A bucket an open transaction holds stays, forgotten, until that
		 * transaction ends; its pending takes still count. */
		if (core::Forget(slot.escrow))
			slot.used = false;
		Assert(core::InvariantsHold(slot.escrow));
		reset++;
	});
	return reset;
}

/* kMemoryEngine's policy_written: limit `name` of this database was
 * defined or redefined.  Its buckets stay (are neither evicted nor left
 * unsaved) until a call under the new definition judges them, and so do
 * those that calls store, or judge by another limit, until the caller's
 * transaction has ended.  If the caller's (sub)transaction aborts, the
 * buckets it marked so are as they were. */
void
KeepMemoryBuckets(const char *name, int name_bytes)
{
	MemoryTable *table = Table();
	if (table == NULL)
		return;
	MarkBucketsKept(table, name, name_bytes);
}

/* A copied slot as a sweep or a listing sees it (texts palloc'd): its
 * balance refilled to now, pending takes spent. */
StoredBucket
StoredOf(const SlotCopy &copy, TimestampTz now)
{
	StoredBucket row;
	row.name = cstring_to_text_with_len(copy.text, copy.slot.name_bytes);
	row.key = cstring_to_text_with_len(copy.text + copy.slot.name_bytes, copy.slot.key_bytes);
	row.bucket = core::Listed(copy.slot.escrow, now);
	const core::Decision look =
	    core::Decide(row.bucket, copy.slot.escrow.limit, core::Request::Plain(0.0), now);
	row.full_at = core::FullAtMicros(look, now);
	return row;
}

int
CompareStoredKeys(const void *a, const void *b)
{
	return CompareText(static_cast<const StoredBucket *>(a)->key,
	                   static_cast<const StoredBucket *>(b)->key);
}

/* Visits the memory buckets of `name` of this database, in key order, as
 * takes see them now. */
void
VisitMemoryBuckets(text *name, BucketVisitor visit, void *context)
{
	MemoryTable *table = RequireTable();
	const TimestampTz now = ClockNow();
	int capacity = 64;
	int count = 0;
	StoredBucket *rows = static_cast<StoredBucket *>(palloc(sizeof(StoredBucket) * capacity));
	SlotCopy *copies = static_cast<SlotCopy *>(palloc(sizeof(SlotCopy) * kWays));
	for (int s = 0; s < table->sets; s++) {
		const int copied = CopySlots(table, s, name, copies);
		for (int i = 0; i < copied; i++) {
			if (copies[i].slot.escrow.absent)
				continue;
			if (count == capacity) {
				capacity *= 2;
				rows = static_cast<StoredBucket *>(repalloc(rows, sizeof(StoredBucket) * capacity));
			}
			rows[count++] = StoredOf(copies[i], now);
		}
		CHECK_FOR_INTERRUPTS();
	}
	qsort(rows, count, sizeof(StoredBucket), CompareStoredKeys);
	for (int i = 0; i < count; i++)
		visit(rows[i], context);
}

/* Forgets the memory buckets (of `name`, or of every name, of this
 * database) that `filter` accepts and that no open transaction has taken
 * from.  Returns how many. */
int64
PurgeMemoryBuckets(text *name, SweepFilter filter, void *context)
{
	MemoryTable *table = RequireTable();
	const TimestampTz now = ClockNow();
	SlotCopy *copies = static_cast<SlotCopy *>(palloc(sizeof(SlotCopy) * kWays));
	int64 purged = 0;
	for (int s = 0; s < table->sets; s++) {
		Set *set = &table->set[s];
		const int copied = CopySlots(table, s, name, copies);
		for (int i = 0; i < copied; i++) {
			const Slot &copy = copies[i].slot;
			if (copy.escrow.holds > 0 || core::Remembered(copy.escrow))
				continue;
			if (!copy.escrow.absent && !filter(StoredOf(copies[i], now), now, context))
				continue;
			SpinLockAcquire(&set->mutex);
			Slot &slot = set->slots[copies[i].way];
			if (slot.used && slot.escrow.holds == 0 && slot.generation == copy.generation &&
			    slot.escrow.version == copy.escrow.version) {
				slot.used = false;
				purged += !copy.escrow.absent;
			}
			SpinLockRelease(&set->mutex);
		}
		CHECK_FOR_INTERRUPTS();
	}
	return purged;
}

/* Every memory bucket of `name` is forgotten at once: no batch is needed. */
int64
ResetMemoryLimitNow(text *name, const Batches &)
{
	return ResetMemoryLimit(name);
}

/* One batch: the purge only copies slots and frees those it judged. */
int64
PurgeMemory(text *name, SweepFilter filter, void *context, const Batches &batches)
{
	batches.begin(batches.context);
	const int64 purged = PurgeMemoryBuckets(name, filter, context);
	batches.commit(batches.context);
	return purged;
}

} /* namespace */

const BucketEngine kMemoryEngine = {
    "memory",
    "memory",
    false, /* can_shard: no row lock to queue on, nothing for shards to spread */
    false, /* writes_tables: works on standbys and in read-only transactions */
    DefineMemorySettings,
    HasMemoryEngine,
    RequireMemoryEngine,
    DecideMemoryBucket,
    TakeAllMemory,
    ResetMemoryBucket,
    ResetMemoryLimitNow,
    VisitMemoryBuckets,
    PurgeMemory,
    KeepMemoryBuckets,
};

} /* namespace ratelimit::pg */

/*
 * src/pg/memory_engine.cpp
 *
 * The memory engine (kMemoryEngine, defined at the end): policies with
 * storage => 'memory' keep their buckets in shared memory (the table of
 * memory_table.cpp) with escrow accounting, whose arithmetic is the core's
 * (src/core/escrow.hpp).  This file finds a bucket's slot, copies its
 * escrow state in and out of core::Decide under the set's spinlock
 * (EscrowOf, StoreEscrow), and
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
 * A key the engine has no room for (no slot free or forgettable within its
 * policy's and database's shares, no room for a long name and key, or no
 * entry for its limit among those new keys may take) is
 * kept in ratelimit.buckets by the table engine instead (on a primary: a
 * standby refuses a grant to it with 53400), and decided there, with the
 * table's locking, while its row is there: it is never in both places.
 * A call that finds its key in memory never looks at the table.  One that
 * misses looks there first (DecideInTableOr) when its key's set has noted
 * an overflow of its policy and the policy may have keys there; and one
 * that must store a new key does so only under the key's new-key lock,
 * with the table found to hold no version of it: in memory if there is
 * room (PlaceInMemory), else in the table, the overflow noted first.
 *
 * Locking rules
 * - A call reads the clock and makes room for its undo record before it
 *   takes its set's spinlock, and under it only finds the slot, decides
 *   (core::Decide) on a copy of its escrow, stores the copy back, claims a
 *   slot for a new key (and an entry for its limit) and keeps the record;
 *   nothing under it can raise an error or allocate.  A bucket held that
 *   cannot keep what the call decided (no entry for a new limit, or 2^32 - 1
 *   records open on it) is left as it was, and the call raises its error
 *   once the spinlock is released.  A call that misses
 *   looks its policy up outside the spinlock, then takes it again.
 * - An overflow is noted (its policy's table_gen and storing, the set's
 *   bit) under the set's spinlock at which the call found no room, and
 *   read under it by every call that misses in that set, so that two calls
 *   of one key agree on where it is.
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
#include "pg/holds.hpp"
#include "pg/memory_table.hpp"
#include "pg/memory_undo.hpp"
#include "pg/policies.hpp"
#include "pg/storage.hpp"

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
	if (slot.used && slot.generation == generation && slot.limit_epoch == limit_epoch &&
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
	DefineMemoryShare();
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

/* A call on a memory bucket. */
struct MemoryCall {
	MemoryTable *table;
	BucketName id;
	text *name;
	text *key;
	const core::Limit *limit;
	const Operation *operation;
	TimestampTz now;
	int policy; /* its policy's entry, or -1 while not looked up */
};

/* What a call did under its set's spinlock. */
struct SlotStep {
	core::Decision decision;
	bool unknown;    /* the set does not hold the key and its policy was not looked up:
	                    nothing decided */
	bool in_table;   /* the set does not hold the key and its policy's keys may be in the
	                    table: nothing decided */
	bool needs_room; /* the set does not hold the key, the call must store it and found
	                    no place: nothing stored */
	bool grants;     /* needs_room, granting or refunding */
	Stored stored;   /* kNoLimit, kTooManyHolds: the bucket held could not keep what the
	                    call decided, nothing changed */
};

/* Raises the error of a call whose bucket could not keep what it decided
 * (SlotStep.stored), if any. */
void
ReportUnstored(Stored stored)
{
	if (stored == Stored::kTooManyHolds)
		ReportMemoryTooManyHolds();
	if (stored == Stored::kNoLimit)
		ReportMemoryNoLimit();
}

/* The policy entry whose keys a call is storing in the table (counted in
 * its `storing`), or -1: given back when the call ends, or fails. */
int storing_policy = -1;

void
EndCallStoring(MemoryTable *table)
{
	if (storing_policy >= 0)
		EndStoring(table, static_cast<uint16>(storing_policy));
	storing_policy = -1;
}

/* Decides `call` on its bucket under its set's spinlock, storing the key
 * if the call must and the set has room for it.  A key the set does not
 * hold is decided only once its policy is known, and, with `look_in_table`,
 * only if its policy's keys are not in the table.  With `overflows`, a
 * call that finds no room will store the key in the table: from now on
 * calls of its policy look there (marked under the spinlock, so that a
 * call of the same key that misses after this sees it). */
SlotStep
StepLocked(MemoryCall &call, bool look_in_table, bool overflows, uint32 *generation,
           uint32 *limit_epoch, int *judged_way)
{
	MemoryTable *table = call.table;
	const BucketName &id = call.id;
	const core::Limit &limit = *call.limit;
	Set *set = &table->set[id.set];
	SlotStep step{};
	int way = FindWay(table, id);
	Slot *slot = way >= 0 ? &set->slots[way] : NULL;
	if (slot == NULL) {
		step.unknown = call.policy < 0;
		step.in_table = !step.unknown && look_in_table &&
		                SetKeysInTable(table, set, static_cast<uint16>(call.policy));
		if (step.unknown || step.in_table)
			return step;
	}
	/* A key not held is decided on as never seen, and stored only if the
	 * call is recorded. */
	core::EscrowState state = slot != NULL ? EscrowOf(table, *slot) : core::UnseenEscrow(limit);
	const core::EscrowStep escrow = core::Decide(state, *call.operation, limit, call.now);
	step.decision = escrow.decision;
	if (!escrow.recorded)
		return step;
	const core::EscrowRecord &record = escrow.record;
	if (slot != NULL) {
		step.stored = StoreEscrow(table, *slot, state, false);
		if (step.stored != Stored::kStored)
			return step;
	} else {
		way = ClaimWay(table, set, call.now, static_cast<uint16>(call.policy));
		/* Its limit needs an entry of the limits, and a long name and key
		 * room in the text pool. */
		const uint32 pin = way >= 0 ? PinLimit(table, limit, id) : kNoLimit;
		uint32 text_at = kNoChunk;
		if (pin == kNoLimit || !ReserveText(table, id.name_bytes + id.key_bytes, &text_at)) {
			ReleaseLimit(table, pin);
			way = -1;
		}
		if (way < 0) {
			step.needs_room = true;
			step.grants = record.takes || record.refunds;
			if (overflows) {
				MarkOverflow(table, set, static_cast<uint16>(call.policy));
				storing_policy = call.policy;
			}
			return step;
		}
		slot = &set->slots[way];
		HoldSlot(table, *slot, MyDatabaseId, static_cast<uint16>(call.policy), id, text_at);
		slot->kept = false;
		slot->kept_by = 0;
		slot->generation++;
		/* The slot names the entry pinned: storing finds it there and
		 * cannot fail. */
		slot->limit = pin;
		step.stored = StoreEscrow(table, *slot, state, true);
		Assert(step.stored == Stored::kStored);
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
	Assert(core::InvariantsHold(state));
	*generation = slot->generation;
	*limit_epoch = slot->limit_epoch;
	if (judged && !marked)
		*judged_way = way;
	PushUndo(table, id.set, way, limit, record);
	return step;
}

/* StepLocked under the set's spinlock, then what follows it. */
SlotStep
Step(MemoryCall &call, bool look_in_table, bool overflows)
{
	Set *set = &call.table->set[call.id.set];
	uint32 generation = 0;
	uint32 limit_epoch = 0;
	int judged_way = -1;
	SpinLockAcquire(&set->mutex);
	const SlotStep step =
	    StepLocked(call, look_in_table, overflows, &generation, &limit_epoch, &judged_way);
	SpinLockRelease(&set->mutex);
	if (judged_way >= 0)
		KeepIfReplaced(call.table, call.name, call.key, *call.limit, call.id.set, judged_way,
		               generation, limit_epoch);
	return step;
}

/* The table engine's Placement of a key the table does not hold: decided
 * in memory, stored there if it has room (and then nowhere else: the
 * table holds no row of the key and, when the call writes, none can be
 * inserted while this runs); false when it has none, the call's policy
 * marked as having keys in the table. */
bool
PlaceInMemory(void *context, core::Decision *decision)
{
	MemoryCall &call = *static_cast<MemoryCall *>(context);
	call.now = ClockNow();
	const SlotStep step = Step(call, false, true);
	ReportUnstored(step.stored);
	if (step.needs_room)
		return false;
	*decision = step.decision;
	return true;
}

/* kMemoryEngine's decide: `operation` on memory bucket (name, key).  A take
 * or refund belongs to the caller's (sub)transaction: its abort undoes it.
 * A key the engine does not hold and has no room for, or whose policy's
 * keys may be in the table, is decided by the table engine (on a primary):
 * kept in ratelimit.buckets while its row is there.  Raises 55000 without
 * shared memory (before PostgreSQL 17, without preloading) and, on a
 * standby, 53400 when a new key finds no room. */
core::Decision
DecideMemoryBucket(text *name, text *key, const core::Limit &limit, const Operation &operation)
{
	MemoryTable *table = RequireTable();
	ReserveUndo();
	MemoryCall call{table, NameOf(table, name, key), name, key, &limit, &operation, ClockNow(), -1};
	/* A standby's own buckets are in memory only: its table holds the
	 * primary's, if any. */
	const bool has_table = !RecoveryInProgress();
	SlotStep step = Step(call, has_table, false);
	if (step.unknown) {
		call.policy = PolicyOf(table, MyDatabaseId, call.id.name, call.id.name_bytes);
		step = Step(call, has_table, false);
	}
	ReportUnstored(step.stored);
	if (!step.in_table && !step.needs_room)
		return step.decision;
	if (!has_table) {
		/* Only a grant needs the room; a denial is answered without
		 * storing what it would have. */
		if (step.grants)
			ReportMemoryFull(table->capacity);
		return step.decision;
	}
	const Placement placement{PlaceInMemory, &call};
	core::Decision decision;
	PG_TRY();
	{
		decision = DecideInTableOr(name, key, limit, operation, placement);
	}
	PG_FINALLY();
	{
		EndCallStoring(table);
	}
	PG_END_TRY();
	return decision;
}

/* `kind` of takes[i]'s request on its memory bucket. */
core::Decision
MemoryTake(const BucketTake &take, Operation::Kind kind, const core::Request &request)
{
	Operation operation{kind, request, 0.0};
	return DecideMemoryBucket(take.name, take.key, take.limit, operation);
}

/* What TakeEachMemory takes. */
struct MemoryTakes {
	BucketTake *takes;
	int count;
};

/* Takes from every bucket of `context` (MemoryTakes), in order, until one
 * is denied; whether none was. */
bool
TakeEachMemory(void *context)
{
	const MemoryTakes *all = static_cast<const MemoryTakes *>(context);
	for (int i = 0; i < all->count; i++) {
		BucketTake &take = all->takes[i];
		take.decision = MemoryTake(take, Operation::kTake, take.request);
		if (!take.decision.allowed)
			return false;
	}
	return true;
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
		/* In a subtransaction, so that if another caller took meanwhile
		 * what this call took is given back, from memory and from the table
		 * (keys the engine had no room for are kept there), before it
		 * decides again on what is left. */
		MemoryTakes all{takes, count};
		if (InSubtransaction(TakeEachMemory, &all))
			return true;
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

/* Whether keys of limit `name` of this database may be in the table,
 * which a standby's engine never looks at. */
bool
KeysInTable(MemoryTable *table, text *name)
{
	return !RecoveryInProgress() &&
	       PolicyInTable(table->policies[PolicyOf(table, MyDatabaseId, VARDATA_ANY(name),
	                                              VARSIZE_ANY_EXHDR(name))]);
}

/* Forgets memory bucket (name, key) in the caller's transaction (its abort
 * brings it back), and its row in the table if its policy's keys may be
 * there.  True if either existed. */
bool
ResetMemoryBucket(text *name, text *key)
{
	MemoryTable *table = RequireTable();
	ReserveUndo();
	const BucketName id = NameOf(table, name, key);
	Set *set = &table->set[id.set];
	bool existed = false;
	Stored stored = Stored::kStored;
	SpinLockAcquire(&set->mutex);
	const int way = FindWay(table, id);
	if (way >= 0 && !set->slots[way].absent) {
		/* Forgotten when this transaction commits. */
		Slot &slot = set->slots[way];
		core::EscrowState state = EscrowOf(table, slot);
		const core::EscrowRecord record = core::RecordReset(state);
		Assert(core::InvariantsHold(state));
		stored = StoreEscrow(table, slot, state, false);
		if (stored == Stored::kStored)
			PushUndo(table, id.set, way, state.limit, record);
		existed = true;
	}
	SpinLockRelease(&set->mutex);
	ReportUnstored(stored);
	if (KeysInTable(table, name)) {
		if (XactReadOnly)
			ReportMemoryTableReadOnly(false);
		existed = kTableEngine.reset(name, key) || existed;
	}
	return existed;
}

/* Forgets every memory bucket of `name` of this database, at once;
 * returns how many. */
int64
ResetMemoryLimit(text *name)
{
	int64 reset = 0;
	MemoryTable *table = RequireTable();
	ForEachSlotOf(table, VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name), [&](Slot &slot) {
		/* A bucket an open transaction holds stays, forgotten, until that
		 * transaction ends; its pending takes still count.  Its limits
		 * stay: storing cannot fail. */
		core::EscrowState state = EscrowOf(table, slot);
		if (core::Forget(state))
			FreeSlot(table, slot);
		else
			(void)StoreEscrow(table, slot, state, false);
		Assert(core::InvariantsHold(state));
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
	row.bucket = core::Listed(copy.escrow, now);
	const core::Decision look =
	    core::Decide(row.bucket, copy.escrow.limit, core::Request::Plain(0.0), now);
	row.full_at = core::FullAtMicros(look, now);
	return row;
}

int
CompareStoredKeys(const void *a, const void *b)
{
	return CompareText(static_cast<const StoredBucket *>(a)->key,
	                   static_cast<const StoredBucket *>(b)->key);
}

/* Rows of a listing, palloc'd as they come. */
struct StoredRows {
	StoredBucket *rows;
	int count;
	int capacity;
	int held; /* the first `held`, sorted by key, are those memory holds */
};

void
AddRow(StoredRows &rows, const StoredBucket &row)
{
	if (rows.count == rows.capacity) {
		rows.capacity *= 2;
		rows.rows =
		    static_cast<StoredBucket *>(repalloc(rows.rows, sizeof(StoredBucket) * rows.capacity));
	}
	rows.rows[rows.count++] = row;
}

/* BucketVisitor of the table's rows of a memory policy: a copy of each
 * row of a key memory does not hold (one it holds is judged there, its row
 * left behind). */
void
AddTableRow(const StoredBucket &row, void *context)
{
	StoredRows &rows = *static_cast<StoredRows *>(context);
	if (bsearch(&row, rows.rows, rows.held, sizeof(StoredBucket), CompareStoredKeys) != NULL)
		return;
	StoredBucket copy = row;
	copy.name = CopyText(row.name);
	copy.key = CopyText(row.key);
	AddRow(rows, copy);
}

/* Visits the buckets of memory policy `name` of this database, in key
 * order, as takes see them now: those in memory, and those kept in the
 * table. */
void
VisitMemoryBuckets(text *name, BucketVisitor visit, void *context)
{
	MemoryTable *table = RequireTable();
	const TimestampTz now = ClockNow();
	StoredRows rows{static_cast<StoredBucket *>(palloc(sizeof(StoredBucket) * 64)), 0, 64, 0};
	SlotCopy *copies = static_cast<SlotCopy *>(palloc(sizeof(SlotCopy) * kWays));
	for (int s = 0; s < table->sets; s++) {
		const int copied = CopySlots(table, s, name, copies);
		for (int i = 0; i < copied; i++)
			if (!copies[i].escrow.absent)
				AddRow(rows, StoredOf(copies[i], now));
		CHECK_FOR_INTERRUPTS();
	}
	qsort(rows.rows, rows.count, sizeof(StoredBucket), CompareStoredKeys);
	rows.held = rows.count;
	if (KeysInTable(table, name)) {
		kTableEngine.visit(name, AddTableRow, &rows);
		qsort(rows.rows, rows.count, sizeof(StoredBucket), CompareStoredKeys);
	}
	for (int i = 0; i < rows.count; i++)
		visit(rows.rows[i], context);
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
			const core::EscrowState &escrow = copies[i].escrow;
			if (escrow.holds > 0 || core::Remembered(escrow))
				continue;
			if (!escrow.absent && !filter(StoredOf(copies[i], now), now, context))
				continue;
			SpinLockAcquire(&set->mutex);
			Slot &slot = set->slots[copies[i].way];
			if (slot.used && slot.holds == 0 && slot.generation == copy.generation &&
			    slot.version == copy.version) {
				FreeSlot(table, slot);
				purged += !escrow.absent;
			}
			SpinLockRelease(&set->mutex);
		}
		CHECK_FOR_INTERRUPTS();
	}
	return purged;
}

/* The policies (`name`, or every one) of this database whose keys may be
 * in the table, but of which it holds none (nor a version that VACUUM has
 * yet to remove), and none are on their way there: their calls no longer
 * look there.  The last entry, of the policies beyond the others, stays
 * as it is. */
void
ForgetKeysInTable(MemoryTable *table, text *name)
{
	for (int i = 0; i < kOtherPolicies; i++) {
		PolicyEntry &entry = table->policies[i];
		if (!NamedEntryReady(entry.head) || entry.head.database != MyDatabaseId ||
		    !PolicyInTable(entry))
			continue;
		if (name != NULL &&
		    (entry.head.name_bytes != static_cast<int>(VARSIZE_ANY_EXHDR(name)) ||
		     memcmp(entry.head.name, VARDATA_ANY(name), entry.head.name_bytes) != 0))
			continue;
		/* An overflow counts as storing before it moves table_gen on: one
		 * that moved it before this read is seen storing, or its row is in
		 * the table.  One that moves it after keeps the keys marked. */
		const uint64 seen = pg_atomic_read_u64(&entry.table_gen);
		pg_memory_barrier();
		if (pg_atomic_read_u32(&entry.storing) > 0)
			continue;
		if (!TableHoldsLimit(cstring_to_text_with_len(entry.head.name, entry.head.name_bytes)))
			ForgetOverflows(table, static_cast<uint16>(i), seen);
	}
}

/* One batch: the purge only copies slots and frees those it judged; then
 * the policies whose keys the table no longer holds (the table engine's
 * purge, before, forgot their full rows) stop looking there. */
int64
PurgeMemory(text *name, SweepFilter filter, void *context, const Batches &batches)
{
	batches.begin(batches.context);
	MemoryTable *table = RequireTable();
	const int64 purged = PurgeMemoryBuckets(name, filter, context);
	if (!RecoveryInProgress())
		ForgetKeysInTable(table, name);
	batches.commit(batches.context);
	return purged;
}

/* Every memory bucket of `name` is forgotten at once, in one batch; then,
 * if the table engine's reset (before) left no row of it there, its calls
 * stop looking there. */
int64
ResetMemoryLimitNow(text *name, const Batches &batches)
{
	batches.begin(batches.context);
	const int64 reset = ResetMemoryLimit(name);
	ForgetKeysInTable(RequireTable(), name);
	batches.commit(batches.context);
	return reset;
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
    HoldPlaces, /* places live in the lock table, as the table engine's */
};

} /* namespace ratelimit::pg */

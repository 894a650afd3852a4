/*
 * src/pg/memory_engine.cpp
 *
 * The memory engine: a fixed table of buckets in shared memory, in sets of
 * kWays slots.  A bucket lives in the set its hash of (database, name, key)
 * picks, under a seed drawn when the table is created (or the one saved at
 * a clean shutdown, for a table of as many sets), in any of that set's
 * slots.  A lookup recognises a bucket by its database, the lengths of its
 * name and key and a 128-bit hash of them under that seed: it reads only
 * the set's slot headers, which lie together.  Names and keys are kept in
 * a separate array, for the listing and the save file.  The table's size is
 * ratelimit.memory_buckets, set when the server starts (the library in
 * shared_preload_libraries); without preloading, from PostgreSQL 17, a
 * named DSM segment of the default size, created on first use.
 *
 * Escrow accounting, whose arithmetic is the core's (src/core/escrow.hpp:
 * this file finds the slot, hands its state to core::Decide and
 * core::Finish under the set's spinlock, and keeps the records they
 * return): a slot holds the bucket as committed transactions left
 * it and the sum of the costs of takes not yet committed (pending).  A take
 * decides on the committed bucket refilled to now, less what is pending, as
 * if the pending takes were spent, and adds its cost to pending.  Its
 * transaction keeps an undo record: a commit moves the cost from pending
 * into the committed bucket, an abort (of the transaction or of the
 * subtransaction that took) only removes it from pending, which leaves the
 * bucket exactly as if the take had never been.  Refill a full bucket
 * could not hold while a take was pending is not credited when it commits:
 * the balance is never above what the table engine would leave, and equal
 * to it whenever no take is pending across a refill that fills the bucket.
 * Refunds and resets, which raise a balance, take effect when their
 * transaction commits.  A penalty box, and the first sighting of a key that
 * starts below full, are stored at once and undone by an abort (a box on
 * the committed bucket as it stands: the refill to the denial, which the
 * table stores with it, is added when it commits, so an abort leaves
 * nothing of it); until the sighting (or a refund or box on a key never
 * seen) commits, the others see the key as new, under any box stored since
 * and less what is pending on it, and once one of them commits a take or a
 * box, as that commit left it.  So admission never exceeds the table
 * engine's at any isolation level, nobody ever waits, and no transaction id
 * is taken.
 *
 * Locking rules
 * - Each set has a spinlock, held only for a few comparisons and the core's
 *   arithmetic: finding a slot, deciding, writing the slot.  Nothing that
 *   can raise an error or allocate runs under it; the clock is read and
 *   room for the undo record is made before it is taken.
 * - A slot some open transaction has an undo record for (holds > 0) is
 *   never evicted or freed, so every record finds its slot.  generation
 *   changes whenever a slot gets another bucket; version whenever its
 *   committed state does.
 * - A slot is judged by the limit of its last call.  When a call brings
 *   another (the policy was redefined) while transactions hold the slot,
 *   the limit before is kept with the count of those holds, and until they
 *   end every call counts on no more than either limit leaves.  A policy
 *   row written with another limit marks its buckets kept until a call
 *   under another limit, or a purge, judges them again; an abort of the
 *   (sub)transaction that wrote it takes back the marks it added.  The
 *   abort of a call that judged a slot by another limit (maybe one written
 *   by its own transaction, which never commits) leaves the slot kept,
 *   unless a call has judged it since.
 * - Each such write enters the redefinitions (64 entries under a spinlock
 *   of their own, which a set's spinlock may be held around, never the
 *   other way round) before it marks, and leaves them when its transaction
 *   ends: at an abort, before its marks are taken back; at a commit, once
 *   its invalidation is sent.  A call that stores a bucket new, or judges
 *   it by another limit, while a write of its policy is entered marks it
 *   with the oldest such write's mark, which ends last (or for good while
 *   writes overflow the entries): it read the definition replaced, or the
 *   one written, which may never commit.  A call that finds none looks its
 *   policy up again once the set's spinlock is released, its undo record
 *   holding the slot: if the policy gives another limit now, the call read
 *   it before a commit whose write has left since, and the slot is kept for
 *   good.  A transaction that wrote a memory policy cannot be prepared.
 * - A new key takes a free slot of its set, else evicts a bucket that is
 *   full, not kept and no transaction holds (forgetting it changes no
 *   answer); when
 *   every slot of the set holds a bucket that is not full, a take that
 *   would grant is refused with 53400 and changes nothing (a denial is
 *   returned without storing what it would have stored).
 * - Listing, purge and reset of a whole limit copy a set's slots out under
 *   its spinlock and work on the copies; purge frees a slot only if its
 *   version is still the one it judged and no transaction holds it.
 * - A clean shutdown (preloaded only) saves every bucket that is not full
 *   to pg_stat/ratelimit_memory.stat (mode 0600), with the table's number
 *   of sets and seed, ending in a CRC-32C of the rest; the next start
 *   loads and deletes it, if the control file says that shutdown was clean
 *   and the CRC matches (else it loads nothing), and takes that seed again
 *   if it has as many sets, so that every bucket fits in its set again.
 *   After a crash or an immediate shutdown nothing is saved, and the
 *   buckets start afresh, as ratelimit.buckets, being unlogged, does.
 */
#include "pg/engine.hpp"

#include <sys/stat.h>

extern "C" {
#include "catalog/pg_control.h"
#include "common/controldata_utils.h"
#include "port/pg_crc32c.h"
#include "storage/fd.h"
}

#include "core/escrow.hpp"
#include "pg/bucket_keys.hpp"
#include "pg/clock.hpp"
#include "pg/errors.hpp"
#include "pg/policies.hpp"

namespace ratelimit::pg {

namespace {

/* Slots of one set: where one key may live. */
constexpr int kWays = 16;

/* The room a slot's name and key take in the text array. */
constexpr int kTextBytes = kMaxNameBytes + kMaxKeyBytes;

/* A name and key this short are kept in the slot itself, and a new key
 * touches no page of the text array. */
constexpr int kInlineBytes = 48;

struct Slot {
	/* What a lookup reads, together. */
	bool used;
	bool kept; /* its policy was written since a call last judged it: not evicted
	              (nor left unsaved) until a call under another limit does */
	uint32 generation;
	uint64 hash;  /* picks the set */
	uint64 check; /* a second, independent hash: with `hash`, the key's identity */
	Oid database;
	int name_bytes;
	int key_bytes;
	uint64 kept_by;                 /* the mark (KeptMark) that set `kept`, taken back if its writer
	                                   aborts */
	core::EscrowState escrow;       /* the bucket, what is pending on it, the limits it is judged
	                                   by, and the counters of open transactions' records */
	char inline_text[kInlineBytes]; /* the name, then the key, if they fit */
};

struct Set {
	slock_t mutex;
	Slot slots[kWays];
};

/* Policies that open transactions have written with another limit, each
 * write (KeptMark) an entry until its transaction ends. */
constexpr int kRedefinitions = 64;

struct Redefinition {
	Oid database; /* InvalidOid: a free entry */
	int owner;    /* the writer's process */
	uint64 mark;  /* its KeptMark */
	int name_bytes;
	char name[kMaxNameBytes];
};

struct MemoryTable {
	int sets;
	int capacity;
	uint64 seed;            /* of the set a key hashes to: unknown outside the server */
	pg_atomic_uint64 marks; /* KeptMark ids handed out */
	/* Entries in use in `redefinitions`, plus `overflow`: while 0, no
	 * bucket stored needs a look at them. */
	pg_atomic_uint32 redefining;
	slock_t redefinitions_mutex; /* over the entries and `overflow` */
	int overflow;                /* writes that found no free entry: while any is open, every bucket
	                                stored new or judged by another limit is kept */
	Redefinition redefinitions[kRedefinitions];
	Size texts; /* offset of the text array */
	Set set[FLEXIBLE_ARRAY_MEMBER];
};

constexpr const char *kSegmentName = "ratelimit_memory";
constexpr const char *kSaveFile = "pg_stat/ratelimit_memory.stat";
constexpr const char *kSaveTempFile = "pg_stat/ratelimit_memory.tmp";

/* Settings. */
int memory_buckets = 10000;

MemoryTable *memory_table = NULL;
bool preloaded = false;

RlShmemRequestHook prev_shmem_request_hook = NULL;
shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* What an open transaction did to a slot, to finish at commit or undo at
 * abort: 80 bytes, as one transaction may keep millions. */
struct UndoRecord {
	core::EscrowRecord escrow;
	int32 set;
	uint32 generation;
	SubTransactionId subxact;
	uint8 way;
};

static_assert(sizeof(UndoRecord) <= 80, "an undo record takes 80 bytes");

/* The limit the undo records from number `first` on (to the next terms)
 * were decided under: kept once for a run of records that share it. */
struct UndoTerms {
	core::Limit limit;
	int64 first;
};

/* A log of entries that grows in chunks of 2^shift entries, allocated in
 * TopMemoryContext as it needs them: no entry ever moves, and no request is
 * larger than a chunk.  Plain data. */
template <typename T, int shift> struct ChunkLog {
	T **chunks;      /* `allocated` of them, room for `room` pointers */
	int64 allocated; /* chunks */
	int64 room;      /* chunk pointers */
	int64 count;     /* entries */
};

/* Room for one more entry of `log`. */
template <typename T, int shift>
void
LogReserve(ChunkLog<T, shift> &log)
{
	if (log.count < (log.allocated << shift))
		return;
	if (log.allocated == log.room) {
		const int64 room = log.room == 0 ? 16 : log.room * 2;
		log.chunks = static_cast<T **>(
		    log.chunks == NULL ? MemoryContextAlloc(TopMemoryContext, sizeof(T *) * room)
		                       : repalloc(log.chunks, sizeof(T *) * room));
		log.room = room;
	}
	log.chunks[log.allocated] =
	    static_cast<T *>(MemoryContextAlloc(TopMemoryContext, sizeof(T) << shift));
	log.allocated++;
}

template <typename T, int shift>
T &
LogAt(const ChunkLog<T, shift> &log, int64 i)
{
	return log.chunks[i >> shift][i & ((int64{1} << shift) - 1)];
}

/* Gives back the chunks `log` no longer needs, but the first. */
template <typename T, int shift>
void
LogTrim(ChunkLog<T, shift> &log)
{
	const int64 needed = Max((log.count + (int64{1} << shift) - 1) >> shift, 1);
	while (log.allocated > needed)
		pfree(log.chunks[--log.allocated]);
}

/* This backend's undo records, oldest first, and the terms they refer to. */
ChunkLog<UndoRecord, 8> undo = {}; /* chunks of 20 kB */
ChunkLog<UndoTerms, 6> undo_terms = {};

/* Buckets an open (sub)transaction marked kept by writing a policy
 * (KeepMemoryBuckets): the slots whose kept_by is `id`, unmarked again if
 * it aborts. */
struct KeptMark {
	KeptMark *older;
	SubTransactionId subxact;
	uint64 id;
	bool entered; /* an entry of the redefinitions (else counted in their overflow) */
	int name_bytes;
	char name[FLEXIBLE_ARRAY_MEMBER];
};

KeptMark *kept_marks = NULL; /* newest first, in TopTransactionContext */

/* Entries this backend holds in the redefinitions, and writes of its
 * counted in their overflow: left when its transaction ends. */
int entered_redefinitions = 0;
int overflowed_redefinitions = 0;

int
SetsFor(int capacity)
{
	return (capacity + kWays - 1) / kWays;
}

Size
TableSize(int capacity)
{
	const Size sets = SetsFor(capacity);
	const Size headers =
	    MAXALIGN(add_size(offsetof(MemoryTable, set), mul_size(sets, sizeof(Set))));
	return add_size(headers, mul_size(mul_size(sets, kWays), kTextBytes));
}

char *
TextOf(MemoryTable *table, int set, int way)
{
	Slot &slot = table->set[set].slots[way];
	if (slot.name_bytes + slot.key_bytes <= kInlineBytes)
		return slot.inline_text;
	return reinterpret_cast<char *>(table) + table->texts +
	       (static_cast<Size>(set) * kWays + way) * kTextBytes;
}

void
InitTable(void *memory)
{
	MemoryTable *table = static_cast<MemoryTable *>(memory);
	table->sets = SetsFor(memory_buckets);
	table->capacity = table->sets * kWays;
	table->texts =
	    MAXALIGN(add_size(offsetof(MemoryTable, set), mul_size(table->sets, sizeof(Set))));
	if (!pg_strong_random(&table->seed, sizeof(table->seed)))
		table->seed = static_cast<uint64>(GetCurrentTimestamp()) ^ static_cast<uint64>(MyProcPid);
	pg_atomic_init_u64(&table->marks, 0);
	pg_atomic_init_u32(&table->redefining, 0);
	SpinLockInit(&table->redefinitions_mutex);
	table->overflow = 0;
	for (Redefinition &entry : table->redefinitions)
		entry.database = InvalidOid;
	for (int s = 0; s < table->sets; s++) {
		SpinLockInit(&table->set[s].mutex);
		for (int w = 0; w < kWays; w++)
			table->set[s].slots[w] = Slot{};
	}
}

/* The 128-bit hash of (database, name, key) under `seed`: two hashes with
 * independent seeds. */
struct KeyHash {
	uint64 hash;
	uint64 check;
};

uint64
HashUnder(uint64 seed, Oid database, const char *name, int name_bytes, const char *key,
          int key_bytes)
{
	uint64 hash = hash_bytes_extended(reinterpret_cast<const unsigned char *>(name), name_bytes,
	                                  seed ^ database);
	return hash_bytes_extended(reinterpret_cast<const unsigned char *>(key), key_bytes, hash);
}

KeyHash
SlotHash(uint64 seed, Oid database, const char *name, int name_bytes, const char *key,
         int key_bytes)
{
	return KeyHash{HashUnder(seed, database, name, name_bytes, key, key_bytes),
	               HashUnder(seed * 0x9E3779B97F4A7C15ULL + 0x632BE59BD9B4E019ULL, database, name,
	                         name_bytes, key, key_bytes)};
}

/* Whether `slot` may be given to another bucket at `now`. */
bool
Evictable(const Slot &slot, TimestampTz now)
{
	return !slot.used || core::Forgettable(slot.escrow, slot.kept, now);
}

/* The way of `set` for a new bucket: a free one, else one whose bucket can
 * be forgotten; -1 if none.  Under the set's spinlock. */
int
ClaimWay(Set *set, TimestampTz now)
{
	for (int w = 0; w < kWays; w++)
		if (!set->slots[w].used)
			return w;
	for (int w = 0; w < kWays; w++)
		if (Evictable(set->slots[w], now))
			return w;
	return -1;
}

void LoadSavedBuckets(MemoryTable *table);

void SaveBuckets(int code, Datum arg);

[[maybe_unused]] void
RequestMemory()
{
	RlChainShmemRequest(prev_shmem_request_hook);
	RequestAddinShmemSpace(TableSize(memory_buckets));
}

void
AttachMemory()
{
	if (prev_shmem_startup_hook != NULL)
		prev_shmem_startup_hook();
	bool found;
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	MemoryTable *table = static_cast<MemoryTable *>(
	    ShmemInitStruct(kSegmentName, TableSize(memory_buckets), &found));
	if (!found) {
		InitTable(table);
		LoadSavedBuckets(table);
	}
	LWLockRelease(AddinShmemInitLock);
	memory_table = table;
	/* The postmaster saves the buckets when it shuts down cleanly. */
	if (!IsUnderPostmaster)
		on_shmem_exit(SaveBuckets, (Datum)0);
}

/* The table, or NULL when there is no shared memory for it. */
MemoryTable *
Table()
{
	if (memory_table == NULL && !preloaded)
		memory_table = static_cast<MemoryTable *>(
		    RlNamedSegment(kSegmentName, TableSize(memory_buckets), InitTable));
	return memory_table;
}

/* The table; raises 55000 when there is no shared memory for it. */
MemoryTable *
RequireTable()
{
	MemoryTable *table = Table();
	if (table == NULL)
		ReportMemoryUnavailable();
	return table;
}

/* Room for one more undo record and its terms, made before any slot
 * changes. */
void
ReserveUndo()
{
	LogReserve(undo);
	LogReserve(undo_terms);
}

/* Keeps `record` of way `way` of set `set`, decided under `limit`, as the
 * newest undo record; under the set's spinlock, after ReserveUndo. */
void
PushUndo(MemoryTable *table, int set, int way, const core::Limit &limit,
         const core::EscrowRecord &record)
{
	if (undo_terms.count == 0 || LogAt(undo_terms, undo_terms.count - 1).limit != limit)
		LogAt(undo_terms, undo_terms.count++) = UndoTerms{limit, undo.count};
	UndoRecord &entry = LogAt(undo, undo.count++);
	entry.escrow = record;
	entry.set = set;
	entry.way = static_cast<uint8>(way);
	entry.generation = table->set[set].slots[way].generation;
	entry.subxact = GetCurrentSubTransactionId();
}

/* The number of the terms of undo record number `record`. */
int64
TermsOf(int64 record)
{
	int64 low = 0;
	int64 high = undo_terms.count - 1;
	while (low < high) {
		const int64 middle = (low + high + 1) / 2;
		if (LogAt(undo_terms, middle).first <= record)
			low = middle;
		else
			high = middle - 1;
	}
	return low;
}

/* Finishes undo record number `i`: at commit its take leaves the committed
 * bucket and its refund or reset takes effect; at abort whatever it changed
 * is undone. */
void
FinishRecord(int64 i, bool commit)
{
	const UndoRecord &record = LogAt(undo, i);
	const core::Limit &limit = LogAt(undo_terms, TermsOf(i)).limit;
	Set *set = &memory_table->set[record.set];
	SpinLockAcquire(&set->mutex);
	Slot &slot = set->slots[record.way];
	if (slot.used && slot.generation == record.generation) {
		const core::EscrowEnd end = core::Finish(slot.escrow, record.escrow, limit, commit);
		/* Its call judged the slot by a limit that may never commit: kept
		 * until a call judges it again, or a purge. */
		if (end.keep) {
			slot.kept = true;
			slot.kept_by = 0;
		}
		if (end.forget)
			slot.used = false;
		Assert(core::InvariantsHold(slot.escrow));
	}
	SpinLockRelease(&set->mutex);
}

/* Drops the undo records from number `first` on, and the terms only they
 * refer to. */
void
TruncateUndo(int64 first)
{
	undo.count = first;
	while (undo_terms.count > 0 && LogAt(undo_terms, undo_terms.count - 1).first >= first)
		undo_terms.count--;
}

/* Undoes the undo records from number `first` on, newest first, and drops
 * them. */
void
UndoSince(int64 first)
{
	for (int64 i = undo.count - 1; i >= first; i--)
		FinishRecord(i, false);
	TruncateUndo(first);
}

/* Ends the undo records of subtransaction `subxact` and of those inside
 * it (the newest ones): committed oldest first, undone newest first. */
void
EndUndo(bool commit, SubTransactionId subxact)
{
	int64 first = undo.count;
	while (first > 0 && LogAt(undo, first - 1).subxact >= subxact)
		first--;
	if (commit) {
		for (int64 i = first; i < undo.count; i++)
			FinishRecord(i, true);
		TruncateUndo(first);
	} else {
		UndoSince(first);
	}
	if (subxact == InvalidSubTransactionId) {
		/* What one large transaction needed is not kept for the next. */
		LogTrim(undo);
		LogTrim(undo_terms);
	}
}

template <typename Visit>
void ForEachSlotOf(MemoryTable *table, const char *name, int name_bytes, Visit visit);

void LeaveRedefinitionsAtExit(int code, Datum arg);

/* Enters write `mark` of policy `name` in the redefinitions, before it
 * marks the buckets that exist; false if no entry was free (it counts in
 * the overflow then). */
bool
EnterRedefinition(MemoryTable *table, const char *name, int name_bytes, uint64 mark)
{
	bool entered = false;
	SpinLockAcquire(&table->redefinitions_mutex);
	for (Redefinition &entry : table->redefinitions) {
		if (entry.database != InvalidOid)
			continue;
		entry.database = MyDatabaseId;
		entry.owner = MyProcPid;
		entry.mark = mark;
		entry.name_bytes = name_bytes;
		memcpy(entry.name, name, name_bytes);
		entered = true;
		break;
	}
	if (!entered)
		table->overflow++;
	pg_atomic_fetch_add_u32(&table->redefining, 1);
	SpinLockRelease(&table->redefinitions_mutex);
	if (entered)
		entered_redefinitions++;
	else
		overflowed_redefinitions++;
	return entered;
}

/* Leaves the redefinitions: write `mark` alone (its subtransaction
 * aborts), or, with NULL, every write of this backend (its transaction
 * ends). */
void
LeaveRedefinitions(const KeptMark *mark)
{
	MemoryTable *table = memory_table;
	if (table == NULL || entered_redefinitions + overflowed_redefinitions == 0)
		return;
	uint32 left = 0;
	SpinLockAcquire(&table->redefinitions_mutex);
	if (mark == NULL || mark->entered) {
		for (Redefinition &entry : table->redefinitions)
			if (entry.database != InvalidOid && entry.owner == MyProcPid &&
			    (mark == NULL || entry.mark == mark->id)) {
				entry.database = InvalidOid;
				left++;
			}
	}
	const int overflowed = mark == NULL ? overflowed_redefinitions : !mark->entered;
	table->overflow -= overflowed;
	left += overflowed;
	pg_atomic_fetch_sub_u32(&table->redefining, left);
	SpinLockRelease(&table->redefinitions_mutex);
	entered_redefinitions -= static_cast<int>(left) - overflowed;
	overflowed_redefinitions -= overflowed;
}

void
LeaveRedefinitionsAtExit(int, Datum)
{
	LeaveRedefinitions(NULL);
}

/* Whether an open transaction is writing policy `name` of this database
 * with another limit: a bucket of it stored new, or judged by another
 * limit, is then kept with *mark, the mark of the oldest such write, which
 * ends last (0, for good, while writes overflow the entries).  Under a
 * set's spinlock. */
bool
BeingRedefined(MemoryTable *table, const char *name, int name_bytes, uint64 *mark)
{
	if (pg_atomic_read_u32(&table->redefining) == 0)
		return false;
	bool found = false;
	*mark = 0;
	SpinLockAcquire(&table->redefinitions_mutex);
	if (table->overflow > 0) {
		found = true;
	} else {
		for (const Redefinition &entry : table->redefinitions)
			if (entry.database == MyDatabaseId && entry.name_bytes == name_bytes &&
			    memcmp(entry.name, name, name_bytes) == 0 && (!found || entry.mark < *mark)) {
				found = true;
				*mark = entry.mark;
			}
	}
	SpinLockRelease(&table->redefinitions_mutex);
	return found;
}

/* Ends the marks of subtransaction `subxact` and of those inside it: an
 * abort takes them back, a commit leaves them. */
void
EndKeptMarks(bool commit, SubTransactionId subxact)
{
	while (kept_marks != NULL && kept_marks->subxact >= subxact) {
		if (!commit) {
			LeaveRedefinitions(kept_marks);
			const uint64 id = kept_marks->id;
			ForEachSlotOf(memory_table, kept_marks->name, kept_marks->name_bytes, [id](Slot &slot) {
				if (slot.kept && slot.kept_by == id) {
					slot.kept = false;
					slot.kept_by = 0;
				}
			});
		}
		kept_marks = kept_marks->older;
	}
}

void
MemoryXactCallback(XactEvent event, void *)
{
	switch (event) {
	case XACT_EVENT_COMMIT:
	case XACT_EVENT_PARALLEL_COMMIT:
		EndUndo(true, InvalidSubTransactionId);
		EndKeptMarks(true, InvalidSubTransactionId);
		break;
	case XACT_EVENT_ABORT:
	case XACT_EVENT_PARALLEL_ABORT:
		EndUndo(false, InvalidSubTransactionId);
		LeaveRedefinitions(NULL);
		EndKeptMarks(false, InvalidSubTransactionId);
		break;
	case XACT_EVENT_PREPARE:
		/* Refused before, if the transaction wrote a memory policy. */
		EndKeptMarks(true, InvalidSubTransactionId);
		break;
	case XACT_EVENT_PRE_PREPARE:
		if (undo.count > 0)
			ReportMemoryPrepare();
		/* Its writes are followed until it ends, which another session
		 * would do unknown to this one. */
		if (kept_marks != NULL)
			ReportMemoryPolicyPrepare();
		break;
	default:
		break;
	}
}

/* A commit's writes leave the redefinitions once it has sent its
 * invalidations, which come after the commit callbacks: every call that
 * reads the policy later sees the new definition, and one that read it
 * before and stores a bucket after sees it once it looks again
 * (KeepIfReplaced). */
void
MemoryResourceRelease(ResourceReleasePhase phase, bool, bool is_top_level, void *)
{
	if (phase == RESOURCE_RELEASE_AFTER_LOCKS && is_top_level)
		LeaveRedefinitions(NULL);
}

void
MemorySubXactCallback(SubXactEvent event, SubTransactionId subxact, SubTransactionId parent, void *)
{
	if (event == SUBXACT_EVENT_ABORT_SUB) {
		EndUndo(false, subxact);
		EndKeptMarks(false, subxact);
	} else if (event == SUBXACT_EVENT_COMMIT_SUB) {
		/* Its changes are its parent's now. */
		for (int64 i = undo.count - 1; i >= 0 && LogAt(undo, i).subxact >= subxact; i--)
			LogAt(undo, i).subxact = parent;
		for (KeptMark *mark = kept_marks; mark != NULL && mark->subxact >= subxact;
		     mark = mark->older)
			mark->subxact = parent;
	}
}

/* A bucket's identity, as the caller gives it. */
struct BucketName {
	const char *name;
	int name_bytes;
	const char *key;
	int key_bytes;
	KeyHash hash;
	int set;
};

BucketName
NameOf(MemoryTable *table, text *name, text *key)
{
	BucketName id;
	id.name = VARDATA_ANY(name);
	id.name_bytes = VARSIZE_ANY_EXHDR(name);
	id.key = VARDATA_ANY(key);
	id.key_bytes = VARSIZE_ANY_EXHDR(key);
	id.hash = SlotHash(table->seed, MyDatabaseId, id.name, id.name_bytes, id.key, id.key_bytes);
	id.set = static_cast<int>(id.hash.hash % static_cast<uint64>(table->sets));
	return id;
}

/* The way of bucket `id` in its set, or -1.  Under the set's spinlock. */
int
FindWay(MemoryTable *table, const BucketName &id)
{
	Set *set = &table->set[id.set];
	for (int w = 0; w < kWays; w++) {
		const Slot &slot = set->slots[w];
		if (slot.used && slot.hash == id.hash.hash && slot.check == id.hash.check &&
		    slot.database == MyDatabaseId && slot.name_bytes == id.name_bytes &&
		    slot.key_bytes == id.key_bytes)
			return w;
	}
	return -1;
}

/* Calls visit(slot) for every bucket of limit `name` in this database,
 * under its set's spinlock. */
template <typename Visit>
void
ForEachSlotOf(MemoryTable *table, const char *name, int name_bytes, Visit visit)
{
	for (int s = 0; s < table->sets; s++) {
		Set *set = &table->set[s];
		SpinLockAcquire(&set->mutex);
		for (int w = 0; w < kWays; w++) {
			Slot &slot = set->slots[w];
			if (slot.used && !slot.escrow.absent && slot.database == MyDatabaseId &&
			    slot.name_bytes == name_bytes && memcmp(TextOf(table, s, w), name, name_bytes) == 0)
				visit(slot);
		}
		SpinLockRelease(&set->mutex);
	}
}

/* A copy of a slot and its text, taken under its set's spinlock. */
struct SlotCopy {
	int way;
	Slot slot;
	char text[kTextBytes];
};

/* Copies the slots of set `s` that belong to this database (and to `name`,
 * unless NULL) into `copies`; returns how many. */
int
CopySlots(MemoryTable *table, int s, text *name, SlotCopy *copies)
{
	const char *name_data = name != NULL ? VARDATA_ANY(name) : NULL;
	const int name_bytes = name != NULL ? VARSIZE_ANY_EXHDR(name) : 0;
	Set *set = &table->set[s];
	int count = 0;
	SpinLockAcquire(&set->mutex);
	for (int w = 0; w < kWays; w++) {
		const Slot &slot = set->slots[w];
		if (!slot.used || slot.database != MyDatabaseId)
			continue;
		const char *text = TextOf(table, s, w);
		if (name != NULL &&
		    (slot.name_bytes != name_bytes || memcmp(text, name_data, name_bytes) != 0))
			continue;
		copies[count].way = w;
		copies[count].slot = slot;
		memcpy(copies[count].text, text, slot.name_bytes + slot.key_bytes);
		count++;
	}
	SpinLockRelease(&set->mutex);
	return count;
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

/* --- saving at a clean shutdown, loading at start ------------------------ */

/* What the file holds of a bucket's limit: core::Limit's fields of the
 * algebra, without the start balance (start_tokens). */
struct SavedLimit {
	double rate;
	double burst;
	int64 window_us;
	int64 phase_us;
	double floor_rate;
	int64 penalty_us;
};

/* What the file holds of each bucket, before its name and key. */
struct SavedBucket {
	Oid database;
	int name_bytes;
	int key_bytes;
	bool remembers; /* its limit starts a new key below full */
	bool kept;
	double start_tokens; /* what a new key starts with under its limit */
	SavedLimit limit;
	core::Bucket bucket;
};

/* The file's format: a layout that changes (the static_assert below fails)
 * takes another magic number, so that an older file is not read. */
constexpr uint32 kSaveMagic = 0x524C4D35; /* "RLM5" */
static_assert(sizeof(SavedBucket) == 96, "the save file's layout changed: change kSaveMagic");

/* The file's header: a layout that changes makes an older file unreadable. */
struct SavedHeader {
	uint32 magic;
	uint32 bucket_bytes; /* sizeof(SavedBucket) */
	int32 count;
	int32 sets;  /* the table's sets */
	uint64 seed; /* and its seed: a table of as many sets takes it again */
};

/* The saved form of `slot`'s bucket. */
SavedBucket
SavedOf(const Slot &slot)
{
	const core::Limit &limit = slot.escrow.limit;
	SavedBucket saved{};
	saved.database = slot.database;
	saved.name_bytes = slot.name_bytes;
	saved.key_bytes = slot.key_bytes;
	saved.remembers = core::Remembered(slot.escrow);
	saved.kept = slot.kept;
	saved.start_tokens = core::StartTokens(limit);
	saved.limit = SavedLimit{limit.rate,     limit.burst,      limit.window_us,
	                         limit.phase_us, limit.floor_rate, limit.penalty_us};
	saved.bucket = slot.escrow.bucket;
	return saved;
}

/* The limit `saved` was judged by. */
core::Limit
LimitOf(const SavedBucket &saved)
{
	core::Limit limit{saved.limit.rate, saved.limit.burst};
	limit.window_us = saved.limit.window_us;
	limit.phase_us = saved.limit.phase_us;
	limit.floor_rate = saved.limit.floor_rate;
	limit.penalty_us = saved.limit.penalty_us;
	limit.has_initial = true;
	limit.initial = saved.start_tokens;
	return limit;
}

/* Whether forgetting `slot` would change an answer. */
bool
WorthSaving(const Slot &slot, TimestampTz now)
{
	return slot.used && !slot.escrow.absent && !Evictable(slot, now);
}

/* Whether the server's last shutdown was clean: the control file says so
 * once the shutdown checkpoint is written (not after an immediate one). */
bool
ShutdownWasClean()
{
	bool crc_ok = false;
	ControlFileData *control = get_controlfile(DataDir, &crc_ok);
	return crc_ok &&
	       (control->state == DB_SHUTDOWNED || control->state == DB_SHUTDOWNED_IN_RECOVERY);
}

void
SaveBuckets(int code, Datum)
{
	if (code != 0 || memory_table == NULL || !ShutdownWasClean())
		return;
	FILE *file = AllocateFile(kSaveTempFile, PG_BINARY_W);
	if (file == NULL) {
		ereport(LOG, (errcode_for_file_access(),
		              errmsg("could not write file \"%s\": %m", kSaveTempFile)));
		return;
	}
	const TimestampTz now = GetCurrentTimestamp();
	SavedHeader header{kSaveMagic, sizeof(SavedBucket), 0, memory_table->sets, memory_table->seed};
	for (int s = 0; s < memory_table->sets; s++)
		for (int w = 0; w < kWays; w++)
			header.count += WorthSaving(memory_table->set[s].slots[w], now);
	pg_crc32c crc;
	INIT_CRC32C(crc);
	COMP_CRC32C(crc, &header, sizeof(header));
	/* The seed is the server's secret, whatever the data directory's mode. */
	bool ok = fchmod(fileno(file), S_IRUSR | S_IWUSR) == 0 &&
	          fwrite(&header, sizeof(header), 1, file) == 1;
	for (int s = 0; ok && s < memory_table->sets; s++)
		for (int w = 0; ok && w < kWays; w++) {
			const Slot &slot = memory_table->set[s].slots[w];
			if (!WorthSaving(slot, now))
				continue;
			const SavedBucket saved = SavedOf(slot);
			const char *text = TextOf(memory_table, s, w);
			const size_t bytes = slot.name_bytes + slot.key_bytes;
			COMP_CRC32C(crc, &saved, sizeof(saved));
			COMP_CRC32C(crc, text, bytes);
			ok = fwrite(&saved, sizeof(saved), 1, file) == 1 &&
			     fwrite(text, 1, bytes, file) == bytes;
		}
	FIN_CRC32C(crc);
	ok = ok && fwrite(&crc, sizeof(crc), 1, file) == 1;
	if (FreeFile(file) != 0)
		ok = false;
	if (!ok) {
		ereport(LOG, (errcode_for_file_access(),
		              errmsg("could not write file \"%s\": %m", kSaveTempFile)));
		unlink(kSaveTempFile);
		return;
	}
	(void)durable_rename(kSaveTempFile, kSaveFile, LOG);
}

/* Whether `file` ends in the CRC-32C of everything before it; leaves it at
 * its start. */
bool
SaveFileIntact(FILE *file)
{
	if (fseek(file, 0, SEEK_END) != 0)
		return false;
	const long size = ftell(file);
	if (size < static_cast<long>(sizeof(SavedHeader) + sizeof(pg_crc32c)) ||
	    fseek(file, 0, SEEK_SET) != 0)
		return false;
	pg_crc32c crc;
	INIT_CRC32C(crc);
	char chunk[8192];
	for (long left = size - static_cast<long>(sizeof(pg_crc32c)); left > 0;) {
		const size_t want = Min(static_cast<size_t>(left), sizeof(chunk));
		if (fread(chunk, 1, want, file) != want)
			return false;
		COMP_CRC32C(crc, chunk, want);
		left -= static_cast<long>(want);
	}
	FIN_CRC32C(crc);
	pg_crc32c stored;
	if (fread(&stored, sizeof(stored), 1, file) != 1 || !EQ_CRC32C(crc, stored))
		return false;
	return fseek(file, 0, SEEK_SET) == 0;
}

void
LoadSavedBuckets(MemoryTable *table)
{
	FILE *file = AllocateFile(kSaveFile, PG_BINARY_R);
	if (file == NULL) {
		if (errno != ENOENT)
			ereport(LOG, (errcode_for_file_access(),
			              errmsg("could not read file \"%s\": %m", kSaveFile)));
		return;
	}
	/* Saved at the last shutdown only if it was clean: otherwise the file
	 * is older than what happened since, and the buckets start afresh.
	 * A file whose CRC does not match loads nothing. */
	SavedHeader header;
	bool ok = ShutdownWasClean() && SaveFileIntact(file) &&
	          fread(&header, sizeof(header), 1, file) == 1 && header.magic == kSaveMagic &&
	          header.bucket_bytes == sizeof(SavedBucket) && header.count >= 0;
	/* With as many sets as before, the seed of before puts every bucket
	 * back in the set it fitted in; otherwise they are placed afresh, and
	 * some may find no room. */
	if (ok && header.sets == table->sets)
		table->seed = header.seed;
	int32 loaded = 0;
	int32 read = 0;
	for (; ok && read < header.count; read++) {
		SavedBucket saved;
		char text[kTextBytes];
		ok = fread(&saved, sizeof(saved), 1, file) == 1 && saved.name_bytes >= 0 &&
		     saved.name_bytes <= kMaxNameBytes && saved.key_bytes >= 0 &&
		     saved.key_bytes <= kMaxKeyBytes &&
		     fread(text, 1, saved.name_bytes + saved.key_bytes, file) ==
		         static_cast<size_t>(saved.name_bytes + saved.key_bytes);
		if (!ok)
			break;
		const KeyHash hash = SlotHash(table->seed, saved.database, text, saved.name_bytes,
		                              text + saved.name_bytes, saved.key_bytes);
		const int s = static_cast<int>(hash.hash % static_cast<uint64>(table->sets));
		int way = -1;
		for (int w = 0; w < kWays && way < 0; w++)
			if (!table->set[s].slots[w].used)
				way = w;
		if (way < 0)
			continue; /* a smaller table than before: no room */
		Slot &slot = table->set[s].slots[way];
		slot.used = true;
		slot.kept = saved.kept;
		slot.kept_by = 0;
		slot.hash = hash.hash;
		slot.check = hash.check;
		slot.database = saved.database;
		slot.name_bytes = saved.name_bytes;
		slot.key_bytes = saved.key_bytes;
		slot.escrow = core::SettledEscrow(saved.bucket, LimitOf(saved));
		memcpy(TextOf(table, s, way), text, saved.name_bytes + saved.key_bytes);
		loaded++;
	}
	FreeFile(file);
	if (!ok)
		ereport(LOG, (errmsg("memory buckets in \"%s\" not loaded from number %d on: the file "
		                     "is damaged, or from another version or an unclean shutdown",
		                     kSaveFile, read + 1)));
	else if (loaded < header.count)
		ereport(LOG, (errmsg("%d of the %d memory buckets in \"%s\" found no room",
		                     header.count - loaded, header.count, kSaveFile)));
	/* Loaded once: after a crash the buckets start afresh. */
	(void)durable_unlink(kSaveFile, LOG);
}

/* After a call stored bucket (name, key) new at way `way` of set `set`,
 * or judged it by another limit, under `limit`, with no write of its policy
 * open: if the policy now
 * gives the key another limit, the call read it before a redefinition
 * committed whose writer has left the redefinitions since, and the bucket
 * is kept as that writer would have kept it.  The call's undo record holds
 * the slot meanwhile, so nothing evicts it before. */
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

/* kMemoryEngine's init: defines ratelimit.memory_buckets when the library
 * is being preloaded, asks for the shared memory, and registers the
 * transaction callbacks. */
void
DefineMemorySettings()
{
	RegisterXactCallback(MemoryXactCallback, NULL);
	RegisterSubXactCallback(MemorySubXactCallback, NULL);
	RegisterResourceReleaseCallback(MemoryResourceRelease, NULL);
	/* The size of shared memory set aside at server start: only then. */
	if (!process_shared_preload_libraries_in_progress)
		return;
	DefineCustomIntVariable(
	    "ratelimit.memory_buckets", "How many buckets the memory engine holds.",
	    "Each takes about 1.5 kB of shared memory.  A key may use one of 16 places picked by its "
	    "hash.  Without shared_preload_libraries (PostgreSQL 17 and later), 10000.",
	    &memory_buckets, 10000, kWays, 10000000, PGC_POSTMASTER, 0, NULL, NULL, NULL);
	preloaded = true;
	RlRequestShmem(prev_shmem_request_hook, RequestMemory, TableSize(memory_buckets));
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = AttachMemory;
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
		const int64 mark = undo.count;
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
	/* Judged full by the limit they last saw, they could be evicted (or
	 * left out of the save file) while the new one still counts them short
	 * of full: kept until a call judges them again.  The marks this write
	 * adds are taken back if its (sub)transaction aborts. */
	const SubTransactionId subxact = GetCurrentSubTransactionId();
	KeptMark *mark = kept_marks;
	if (mark == NULL || mark->subxact != subxact || mark->name_bytes != name_bytes ||
	    memcmp(mark->name, name, name_bytes) != 0) {
		static bool leaves_at_exit = false;
		if (!leaves_at_exit) {
			before_shmem_exit(LeaveRedefinitionsAtExit, (Datum)0);
			leaves_at_exit = true;
		}
		mark = static_cast<KeptMark *>(
		    MemoryContextAlloc(TopTransactionContext, offsetof(KeptMark, name) + name_bytes));
		mark->subxact = subxact;
		mark->id = pg_atomic_add_fetch_u64(&table->marks, 1);
		mark->name_bytes = name_bytes;
		memcpy(mark->name, name, name_bytes);
		/* Entered before the buckets that exist are marked: one stored
		 * after a set is marked finds the entry. */
		mark->entered = EnterRedefinition(table, name, name_bytes, mark->id);
		mark->older = kept_marks;
		kept_marks = mark;
	}
	const uint64 id = mark->id;
	ForEachSlotOf(table, name, name_bytes, [id](Slot &slot) {
		if (!slot.kept) {
			slot.kept = true;
			slot.kept_by = id;
		}
	});
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

/*
 * src/pg/memory_undo.cpp
 *
 * What open transactions did to the memory engine's table, and its end.
 *
 * Undo records: every escrow step a call records (core::Decide,
 * core::RecordReset) is kept by its backend as an undo record, with its
 * subtransaction, until that ends: a commit of the transaction finishes
 * its records oldest first (core::Finish: a take moves from pending into
 * the committed bucket, a refund or a reset takes effect), an abort of the
 * transaction, or of a subtransaction, undoes the records made in it
 * newest first (a take only leaves pending, which leaves the bucket as if
 * it had never been).  The log grows in chunks in TopMemoryContext, 80
 * bytes a record, the limits of a run of records kept once.
 *
 * Kept marks and redefinitions: a policy row written with another limit
 * marks its buckets kept until a call under another limit, or a purge,
 * judges them again; an abort of the (sub)transaction that wrote it takes
 * back the marks it added.  The abort of a call that judged a slot by
 * another limit (maybe one written by its own transaction, which never
 * commits) leaves the slot kept, unless a call has judged it since.  Each
 * such write enters the redefinitions before it marks, and leaves them when
 * its transaction ends: at an abort, before its marks are taken back; at a
 * commit, once its invalidation is sent.  A call that stores a bucket new,
 * or judges it by another limit, while a write of its policy is entered
 * marks it with the oldest such write's mark, which ends last (or for good
 * while writes overflow the entries): it read the definition replaced, or
 * the one written, which may never commit.  A transaction that wrote a
 * memory policy, or took from a memory bucket, cannot be prepared.
 *
 * Locking rules
 * - The undo log, the kept marks and the counts of entries are the
 *   backend's own: no lock.  Room for a record is made before a set's
 *   spinlock is taken (ReserveUndo); PushUndo only writes it.
 * - A record is finished or undone under its set's spinlock, if its slot
 *   still has the generation it had (a slot some open transaction holds is
 *   never given to another bucket, so it does), on a copy of the slot's
 *   escrow stored back (which cannot fail: Finish brings no new limit and
 *   leaves fewer holds); nothing there can raise an error, and no clock is
 *   read.  Transaction callbacks never attach to the
 *   table: a backend with records is attached.
 * - The redefinitions (64 entries and the count of writes that found none)
 *   are under a spinlock of their own, which a set's spinlock may be held
 *   around (BeingRedefined), never the other way round; `redefining` lets a
 *   call skip them while no write is open.
 * - A backend that exits leaves its entries (before_shmem_exit).
 */
#include "pg/memory_undo.hpp"

#include "pg/errors.hpp"

namespace ratelimit::pg::memory {

namespace {

/* What an open transaction did to a slot, to finish at commit or undo at
 * abort: 88 bytes (80 before Bucket gained a sliding window's previous
 * count), as one transaction may keep millions. */
struct UndoRecord {
	core::EscrowRecord escrow;
	int32 set;
	uint32 generation;
	SubTransactionId subxact;
	uint8 way;
};

static_assert(sizeof(UndoRecord) <= 88, "an undo record takes 88 bytes");

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
 * (MarkBucketsKept): the slots whose kept_by is `id`, unmarked again if
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
	MemoryTable *table = AttachedTable();
	Set *set = &table->set[record.set];
	SpinLockAcquire(&set->mutex);
	Slot &slot = set->slots[record.way];
	if (slot.used && slot.generation == record.generation) {
		core::EscrowState state = EscrowOf(table, slot);
		const core::EscrowEnd end = core::Finish(state, record.escrow, limit, commit);
		/* Its call judged the slot by a limit that may never commit: kept
		 * until a call judges it again, or a purge. */
		if (end.keep) {
			slot.kept = true;
			slot.kept_by = 0;
		}
		/* Finish brings no limit, and holds fewer: storing cannot fail. */
		if (end.forget)
			FreeSlot(table, slot);
		else
			(void)StoreEscrow(table, slot, state, false);
		Assert(core::InvariantsHold(state));
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
	MemoryTable *table = AttachedTable();
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

/* Ends the marks of subtransaction `subxact` and of those inside it: an
 * abort takes them back, a commit leaves them. */
void
EndKeptMarks(bool commit, SubTransactionId subxact)
{
	while (kept_marks != NULL && kept_marks->subxact >= subxact) {
		if (!commit) {
			LeaveRedefinitions(kept_marks);
			const uint64 id = kept_marks->id;
			ForEachSlotOf(AttachedTable(), kept_marks->name, kept_marks->name_bytes,
			              [id](Slot &slot) {
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

} /* namespace */

void
RegisterMemoryCallbacks()
{
	RegisterXactCallback(MemoryXactCallback, NULL);
	RegisterSubXactCallback(MemorySubXactCallback, NULL);
	RegisterResourceReleaseCallback(MemoryResourceRelease, NULL);
}

void
ReserveUndo()
{
	LogReserve(undo);
	LogReserve(undo_terms);
}

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

void
MarkBucketsKept(MemoryTable *table, const char *name, int name_bytes)
{
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

} /* namespace ratelimit::pg::memory */

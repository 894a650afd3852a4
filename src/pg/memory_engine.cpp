/*
 * src/pg/memory_engine.cpp
 *
 * The memory engine: a fixed table of buckets in shared memory, in sets of
 * kWays slots.  A bucket lives in the set its hash of (database, name, key)
 * picks, in any of that set's slots.  The table's size is
 * ratelimit.memory_buckets, set when the server starts (the library in
 * shared_preload_libraries); without preloading, from PostgreSQL 17, a
 * named DSM segment of the default size, created on first use.
 *
 * Escrow accounting: a take decides on the bucket as it stands, pending
 * takes of open transactions already spent, and spends its cost at once.
 * Its transaction keeps an undo record; a commit only forgets it, an abort
 * (of the transaction or of the subtransaction that took) gives the cost
 * back.  When nobody changed the bucket since, the undo restores it
 * exactly, as a rollback of the row would; otherwise it refunds the cost
 * (capped at the burst, as a rolled-back row's refill would be).  A
 * refund, a penalty box and a reset are undone the same way.  So admission
 * is exact at every isolation level, nobody ever waits, and no transaction
 * id is taken.
 *
 * Locking rules
 * - Each set has a spinlock, held only for a few comparisons and the core's
 *   arithmetic: finding a slot, deciding, writing the slot.  Nothing that
 *   can raise an error or allocate runs under it; the clock is read and
 *   room for the undo record is made before it is taken.
 * - A slot some open transaction has an undo record for (holds > 0) is
 *   never evicted, so an undo always finds its slot.  generation changes
 *   whenever a slot gets another bucket; version whenever its bucket does
 *   (an exact undo restores the version it replaced).
 * - A new key takes a free slot of its set, else evicts a bucket that is
 *   full and no transaction holds (forgetting it changes no answer); when
 *   every slot of the set holds a bucket that is not full, the take is
 *   refused with 53400 and changes nothing.
 * - Listing, purge and reset of a whole limit copy a set's slots out under
 *   its spinlock and work on the copies; purge frees a slot only if its
 *   version is still the one it judged.
 * - A clean shutdown (preloaded only) saves every bucket that is not full
 *   to pg_stat/ratelimit_memory.stat; the next start loads and deletes it.
 *   After a crash or an immediate shutdown nothing is saved, and the
 *   buckets start afresh, as ratelimit.buckets, being unlogged, does.
 */
#include "pg/memory_engine.hpp"

extern "C" {
#include "catalog/pg_control.h"
#include "common/controldata_utils.h"
#include "storage/fd.h"
}

#include "pg/bucket_keys.hpp"
#include "pg/clock.hpp"
#include "pg/errors.hpp"

namespace ratelimit::pg {

namespace {

/* Slots of one set: where one key may live. */
constexpr int kWays = 16;

struct Slot {
	bool used;
	bool absent;    /* reset in an open transaction: the key counts as never seen */
	bool remembers; /* starts below full: forgetting it would change answers */
	int holds;      /* undo records of open transactions */
	uint32 generation;
	uint64 version;
	uint64 hash;
	Oid database;
	int name_bytes;
	int key_bytes;
	double start_tokens; /* what the key starts with when it is new */
	core::Limit limit;   /* as last used: whether it is full, how it refills */
	core::Bucket bucket;
	char text[kMaxNameBytes + kMaxKeyBytes]; /* the name, then the key */
};

struct Set {
	slock_t mutex;
	Slot slots[kWays];
};

struct MemoryTable {
	int sets;
	int capacity;
	Set set[FLEXIBLE_ARRAY_MEMBER];
};

constexpr const char *kSegmentName = "ratelimit_memory";
constexpr const char *kSaveFile = "pg_stat/ratelimit_memory.stat";
constexpr const char *kSaveTempFile = "pg_stat/ratelimit_memory.tmp";
constexpr uint32 kSaveMagic = 0x524C4D31; /* "RLM1" */

/* Settings. */
int memory_buckets = 10000;

MemoryTable *memory_table = NULL;
bool preloaded = false;

RlShmemRequestHook prev_shmem_request_hook = NULL;
shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* What an abort gives back. */
struct UndoRecord {
	int set;
	int way;
	uint32 generation;
	uint64 version_before;
	uint64 version_after;
	SubTransactionId subxact;
	bool created; /* the slot was claimed for this change */
	bool prior_absent;
	core::Bucket prior;
	double delta; /* tokens to add back when the bucket changed since */
};

UndoRecord *undo = NULL;
int undo_count = 0;
int undo_capacity = 0;

Size
TableSize(int capacity)
{
	const int sets = (capacity + kWays - 1) / kWays;
	return add_size(offsetof(MemoryTable, set), mul_size(sets, sizeof(Set)));
}

void
InitTable(void *memory)
{
	MemoryTable *table = static_cast<MemoryTable *>(memory);
	table->sets = (memory_buckets + kWays - 1) / kWays;
	table->capacity = table->sets * kWays;
	for (int s = 0; s < table->sets; s++) {
		SpinLockInit(&table->set[s].mutex);
		for (int w = 0; w < kWays; w++) {
			Slot &slot = table->set[s].slots[w];
			slot.used = false;
			slot.holds = 0;
			slot.generation = 0;
			slot.version = 0;
		}
	}
}

uint64
SlotHash(Oid database, const char *name, int name_bytes, const char *key, int key_bytes)
{
	uint64 hash = hash_bytes_extended(reinterpret_cast<const unsigned char *>(name), name_bytes,
	                                  kMemorySeed ^ database);
	return hash_bytes_extended(reinterpret_cast<const unsigned char *>(key), key_bytes, hash);
}

bool
SlotIs(const Slot &slot, uint64 hash, Oid database, const char *name, int name_bytes,
       const char *key, int key_bytes)
{
	return slot.used && slot.hash == hash && slot.database == database &&
	       slot.name_bytes == name_bytes && slot.key_bytes == key_bytes &&
	       memcmp(slot.text, name, name_bytes) == 0 &&
	       memcmp(slot.text + name_bytes, key, key_bytes) == 0;
}

/* Whether `slot` may be given to another bucket at `now`. */
bool
Evictable(const Slot &slot, TimestampTz now)
{
	if (!slot.used)
		return true;
	if (slot.holds > 0)
		return false;
	return slot.absent || (!slot.remembers && core::IsFull(slot.bucket, slot.limit, now));
}

/* A slot of `set` for a new bucket: a free one, else one whose bucket can
 * be forgotten; NULL if none.  Under the set's spinlock. */
Slot *
ClaimSlot(Set *set, TimestampTz now)
{
	for (int w = 0; w < kWays; w++)
		if (!set->slots[w].used)
			return &set->slots[w];
	for (int w = 0; w < kWays; w++)
		if (Evictable(set->slots[w], now))
			return &set->slots[w];
	return NULL;
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

/* Room for one more undo record, made before any slot changes. */
void
ReserveUndo()
{
	if (undo_count < undo_capacity)
		return;
	const int capacity = undo_capacity == 0 ? 16 : undo_capacity * 2;
	undo = static_cast<UndoRecord *>(
	    undo == NULL ? MemoryContextAlloc(TopMemoryContext, sizeof(UndoRecord) * capacity)
	                 : repalloc(undo, sizeof(UndoRecord) * capacity));
	undo_capacity = capacity;
}

/* Records, under the set's spinlock, that the caller's subtransaction
 * changed `slot` from `prior` (`prior_absent`, `version_before`); `delta`
 * is what to add back if the bucket changes again before the abort. */
void
PushUndo(MemoryTable *table, Set *set, Slot *slot, bool created, bool prior_absent,
         const core::Bucket &prior, uint64 version_before, double delta)
{
	UndoRecord &record = undo[undo_count++];
	record.set = static_cast<int>(set - table->set);
	record.way = static_cast<int>(slot - set->slots);
	record.generation = slot->generation;
	record.version_before = version_before;
	record.version_after = slot->version;
	record.subxact = GetCurrentSubTransactionId();
	record.created = created;
	record.prior_absent = prior_absent;
	record.prior = prior;
	record.delta = delta;
	slot->holds++;
}

/* Ends the undo record on top: undoes it when `abort`, else only lets go
 * of its slot. */
void
PopUndo(bool abort, TimestampTz now)
{
	const UndoRecord record = undo[--undo_count];
	Set *set = &memory_table->set[record.set];
	SpinLockAcquire(&set->mutex);
	Slot &slot = set->slots[record.way];
	if (slot.used && slot.generation == record.generation) {
		slot.holds--;
		if (abort && slot.version == record.version_after) {
			/* Nobody changed it since: as if this change never was. */
			if (record.created) {
				slot.used = false;
			} else {
				slot.bucket = record.prior;
				slot.absent = record.prior_absent;
			}
			slot.version = record.version_before;
		} else if (abort && record.delta != 0.0) {
			if (record.delta > 0.0) {
				slot.bucket = core::Refund(slot.bucket, slot.limit, record.delta, now).next;
			} else {
				slot.bucket = core::Refill(slot.bucket, slot.limit, now);
				slot.bucket.tokens += record.delta;
			}
			slot.version++;
		}
	}
	SpinLockRelease(&set->mutex);
}

/* Ends the undo records of subtransaction `subxact` and of those inside
 * it (the newest ones). */
void
EndUndo(bool abort, SubTransactionId subxact)
{
	if (undo_count == 0)
		return;
	const TimestampTz now = ClockNow();
	while (undo_count > 0 && undo[undo_count - 1].subxact >= subxact)
		PopUndo(abort, now);
}

void
MemoryXactCallback(XactEvent event, void *)
{
	switch (event) {
	case XACT_EVENT_COMMIT:
	case XACT_EVENT_PARALLEL_COMMIT:
		EndUndo(false, InvalidSubTransactionId);
		break;
	case XACT_EVENT_ABORT:
	case XACT_EVENT_PARALLEL_ABORT:
		EndUndo(true, InvalidSubTransactionId);
		break;
	case XACT_EVENT_PRE_PREPARE:
		if (undo_count > 0)
			ReportMemoryPrepare();
		break;
	default:
		break;
	}
}

void
MemorySubXactCallback(SubXactEvent event, SubTransactionId subxact, SubTransactionId parent, void *)
{
	if (event == SUBXACT_EVENT_ABORT_SUB) {
		EndUndo(true, subxact);
	} else if (event == SUBXACT_EVENT_COMMIT_SUB) {
		/* Its changes are its parent's now. */
		for (int i = undo_count - 1; i >= 0 && undo[i].subxact >= subxact; i--)
			undo[i].subxact = parent;
	}
}

/* The bucket of a key not yet in memory: full, or at the policy's initial
 * balance. */
core::Bucket
NewBucket(const core::Limit &limit, const Operation &operation, TimestampTz now)
{
	core::Bucket fresh = core::FullBucket(limit, now);
	if (operation.has_initial)
		fresh.tokens = operation.initial;
	return fresh;
}

/* The core's answer for `operation` on `bucket`, and whether it is stored. */
core::Decision
Evaluate(const Operation &operation, const core::Bucket &bucket, const core::Limit &limit,
         TimestampTz now, bool is_new, bool *store)
{
	core::Decision decision;
	switch (operation.kind) {
	case Operation::kRefund:
		decision = core::Refund(bucket, limit, operation.amount, now);
		*store = decision.write;
		return decision;
	case Operation::kPenalize:
		/* The call as a whole was denied: only a denial that starts a
		 * penalty box is stored. */
		decision = core::Decide(bucket, limit, operation.request, now);
		if (decision.allowed) {
			decision.allowed = false;
			decision.write = false;
		}
		*store = decision.write;
		return decision;
	case Operation::kTake:
		decision = core::Decide(bucket, limit, operation.request, now);
		*store = decision.write || (is_new && StartsBelowFull(operation, limit));
		return decision;
	case Operation::kRecordNew:
		decision = core::Decide(bucket, limit, core::Request::Plain(0.0), now);
		*store = is_new && StartsBelowFull(operation, limit);
		return decision;
	default:
		*store = false;
		return core::Decide(bucket, limit, operation.request, now);
	}
}

/* A bucket's identity, as the caller gives it. */
struct BucketName {
	const char *name;
	int name_bytes;
	const char *key;
	int key_bytes;
	uint64 hash;
};

BucketName
NameOf(text *name, text *key)
{
	BucketName id;
	id.name = VARDATA_ANY(name);
	id.name_bytes = VARSIZE_ANY_EXHDR(name);
	id.key = VARDATA_ANY(key);
	id.key_bytes = VARSIZE_ANY_EXHDR(key);
	id.hash = SlotHash(MyDatabaseId, id.name, id.name_bytes, id.key, id.key_bytes);
	return id;
}

Slot *
FindSlot(Set *set, const BucketName &id)
{
	for (int w = 0; w < kWays; w++)
		if (SlotIs(set->slots[w], id.hash, MyDatabaseId, id.name, id.name_bytes, id.key,
		           id.key_bytes))
			return &set->slots[w];
	return NULL;
}

/* A copy of a slot, taken under its set's spinlock. */
struct SlotCopy {
	int way;
	uint32 generation;
	uint64 version;
	Slot slot;
};

/* Copies the slots of `set` that belong to this database (and to `name`,
 * unless NULL) into `copies`; returns how many. */
int
CopySlots(Set *set, text *name, SlotCopy *copies)
{
	const char *name_data = name != NULL ? VARDATA_ANY(name) : NULL;
	const int name_bytes = name != NULL ? VARSIZE_ANY_EXHDR(name) : 0;
	int count = 0;
	SpinLockAcquire(&set->mutex);
	for (int w = 0; w < kWays; w++) {
		const Slot &slot = set->slots[w];
		if (!slot.used || slot.database != MyDatabaseId)
			continue;
		if (name != NULL &&
		    (slot.name_bytes != name_bytes || memcmp(slot.text, name_data, name_bytes) != 0))
			continue;
		copies[count].way = w;
		copies[count].generation = slot.generation;
		copies[count].version = slot.version;
		copies[count].slot = slot;
		count++;
	}
	SpinLockRelease(&set->mutex);
	return count;
}

/* A copied slot as a sweep or a listing sees it (texts palloc'd). */
StoredBucket
StoredOf(const Slot &slot, TimestampTz now)
{
	StoredBucket row;
	row.name = cstring_to_text_with_len(slot.text, slot.name_bytes);
	row.key = cstring_to_text_with_len(slot.text + slot.name_bytes, slot.key_bytes);
	row.bucket = slot.bucket;
	const core::Decision look =
	    core::Decide(slot.bucket, slot.limit, core::Request::Plain(0.0), now);
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

/* What the file holds of each bucket, before its name and key. */
struct SavedBucket {
	Oid database;
	int name_bytes;
	int key_bytes;
	bool remembers;
	double start_tokens;
	core::Limit limit;
	core::Bucket bucket;
};

/* Whether forgetting `slot` would change an answer. */
bool
WorthSaving(const Slot &slot, TimestampTz now)
{
	return slot.used && !slot.absent && !Evictable(slot, now);
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
	int32 count = 0;
	for (int s = 0; s < memory_table->sets; s++)
		for (int w = 0; w < kWays; w++)
			count += WorthSaving(memory_table->set[s].slots[w], now);
	const uint32 magic = kSaveMagic;
	bool ok =
	    fwrite(&magic, sizeof(magic), 1, file) == 1 && fwrite(&count, sizeof(count), 1, file) == 1;
	for (int s = 0; ok && s < memory_table->sets; s++)
		for (int w = 0; ok && w < kWays; w++) {
			const Slot &slot = memory_table->set[s].slots[w];
			if (!WorthSaving(slot, now))
				continue;
			SavedBucket saved{slot.database,     slot.name_bytes, slot.key_bytes, slot.remembers,
			                  slot.start_tokens, slot.limit,      slot.bucket};
			ok = fwrite(&saved, sizeof(saved), 1, file) == 1 &&
			     fwrite(slot.text, 1, slot.name_bytes + slot.key_bytes, file) ==
			         static_cast<size_t>(slot.name_bytes + slot.key_bytes);
		}
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
	uint32 magic = 0;
	int32 count = 0;
	int32 loaded = 0;
	bool ok = fread(&magic, sizeof(magic), 1, file) == 1 && magic == kSaveMagic &&
	          fread(&count, sizeof(count), 1, file) == 1 && count >= 0;
	for (int32 i = 0; ok && i < count; i++) {
		SavedBucket saved;
		char text[kMaxNameBytes + kMaxKeyBytes];
		ok = fread(&saved, sizeof(saved), 1, file) == 1 && saved.name_bytes >= 0 &&
		     saved.name_bytes <= kMaxNameBytes && saved.key_bytes >= 0 &&
		     saved.key_bytes <= kMaxKeyBytes &&
		     fread(text, 1, saved.name_bytes + saved.key_bytes, file) ==
		         static_cast<size_t>(saved.name_bytes + saved.key_bytes);
		if (!ok)
			break;
		const uint64 hash = SlotHash(saved.database, text, saved.name_bytes,
		                             text + saved.name_bytes, saved.key_bytes);
		Set *set = &table->set[hash % static_cast<uint64>(table->sets)];
		Slot *slot = NULL;
		for (int w = 0; w < kWays && slot == NULL; w++)
			if (!set->slots[w].used)
				slot = &set->slots[w];
		if (slot == NULL)
			continue; /* a smaller table than before: no room */
		slot->used = true;
		slot->absent = false;
		slot->remembers = saved.remembers;
		slot->hash = hash;
		slot->database = saved.database;
		slot->name_bytes = saved.name_bytes;
		slot->key_bytes = saved.key_bytes;
		slot->start_tokens = saved.start_tokens;
		slot->limit = saved.limit;
		slot->bucket = saved.bucket;
		memcpy(slot->text, text, saved.name_bytes + saved.key_bytes);
		loaded++;
	}
	FreeFile(file);
	if (!ok)
		ereport(LOG, (errmsg("file \"%s\" is damaged: %d of its memory buckets loaded", kSaveFile,
		                     loaded)));
	if (loaded < count)
		ereport(LOG, (errmsg("%d of the %d memory buckets in \"%s\" found no room", count - loaded,
		                     count, kSaveFile)));
	/* Loaded once: after a crash the buckets start afresh. */
	unlink(kSaveFile);
}

} /* namespace */

void
DefineMemorySettings()
{
	RegisterXactCallback(MemoryXactCallback, NULL);
	RegisterSubXactCallback(MemorySubXactCallback, NULL);
	/* The size of shared memory set aside at server start: only then. */
	if (!process_shared_preload_libraries_in_progress)
		return;
	DefineCustomIntVariable(
	    "ratelimit.memory_buckets", "How many buckets the memory engine holds.",
	    "Each takes about 1.4 kB of shared memory.  A key may use one of 16 places picked by its "
	    "hash.  Without shared_preload_libraries (PostgreSQL 17 and later), 10000.",
	    &memory_buckets, 10000, kWays, 10000000, PGC_POSTMASTER, 0, NULL, NULL, NULL);
	preloaded = true;
	RlRequestShmem(prev_shmem_request_hook, RequestMemory, TableSize(memory_buckets));
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = AttachMemory;
}

bool
HasMemoryEngine()
{
	return Table() != NULL;
}

core::Decision
DecideMemoryBucket(text *name, text *key, const core::Limit &limit, const Operation &operation)
{
	MemoryTable *table = RequireTable();
	ReserveUndo();
	const BucketName id = NameOf(name, key);
	const TimestampTz now = ClockNow();
	Set *set = &table->set[id.hash % static_cast<uint64>(table->sets)];

	SpinLockAcquire(&set->mutex);
	Slot *slot = FindSlot(set, id);
	const bool is_new = slot == NULL || slot->absent;
	const core::Bucket stored = is_new ? NewBucket(limit, operation, now) : slot->bucket;
	bool store;
	const core::Decision decision = Evaluate(operation, stored, limit, now, is_new, &store);
	if (!store) {
		SpinLockRelease(&set->mutex);
		return decision;
	}
	const bool created = slot == NULL;
	if (created) {
		slot = ClaimSlot(set, now);
		if (slot == NULL) {
			SpinLockRelease(&set->mutex);
			ReportMemoryFull(table->capacity);
		}
		slot->used = true;
		slot->holds = 0;
		slot->generation++;
		slot->hash = id.hash;
		slot->database = MyDatabaseId;
		slot->name_bytes = id.name_bytes;
		slot->key_bytes = id.key_bytes;
		memcpy(slot->text, id.name, id.name_bytes);
		memcpy(slot->text + id.name_bytes, id.key, id.key_bytes);
	}
	const bool prior_absent = !created && slot->absent;
	const core::Bucket prior = slot->bucket;
	const uint64 version_before = slot->version;
	slot->absent = false;
	slot->remembers = StartsBelowFull(operation, limit);
	slot->start_tokens = operation.has_initial ? operation.initial : limit.burst;
	slot->limit = limit;
	slot->bucket = decision.next;
	slot->version++;
	double delta = 0.0;
	if (operation.kind == Operation::kTake && decision.allowed)
		delta = operation.request.cost;
	else if (operation.kind == Operation::kRefund)
		delta = -decision.refunded;
	PushUndo(table, set, slot, created, prior_absent, prior, version_before, delta);
	SpinLockRelease(&set->mutex);
	return decision;
}

/* `kind` of takes[i]'s request on its memory bucket. */
core::Decision
MemoryTake(const BucketTake &take, Operation::Kind kind, const core::Request &request)
{
	Operation operation{kind, request, 0.0, take.has_initial, take.initial};
	return DecideMemoryBucket(take.name, take.key, take.limit, operation);
}

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
		const int mark = undo_count;
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
		const TimestampTz now = ClockNow();
		while (undo_count > mark)
			PopUndo(true, now);
		for (int i = 0; i < count; i++)
			takes[i].decision = MemoryTake(takes[i], Operation::kCheck, takes[i].request);
	}
	/* Nothing was taken, so every bucket reports what it holds; one that
	 * would have granted alone still says so, and how long its reserved
	 * work would have waited.  Then, as for the table, a limit with a
	 * penalty box that denied starts its box, and a denied key never seen
	 * that starts below full starts earning now. */
	for (int i = 0; i < count; i++) {
		if (!takes[i].decision.allowed)
			continue;
		const double wait = takes[i].decision.retry_after;
		takes[i].decision = MemoryTake(takes[i], Operation::kCheck, core::Request::Plain(0.0));
		takes[i].decision.allowed = true;
		takes[i].decision.retry_after = wait;
	}
	for (int i = 0; i < count; i++) {
		if (takes[i].limit.penalty_us > 0 && !takes[i].decision.allowed &&
		    takes[i].request.cost > 0.0) {
			const core::Decision boxed =
			    MemoryTake(takes[i], Operation::kPenalize, takes[i].request);
			if (boxed.retry_after > takes[i].decision.retry_after)
				takes[i].decision.retry_after = boxed.retry_after;
		} else {
			(void)MemoryTake(takes[i], Operation::kRecordNew, takes[i].request);
		}
	}
	return false;
}

bool
ResetMemoryBucket(text *name, text *key)
{
	MemoryTable *table = RequireTable();
	ReserveUndo();
	const BucketName id = NameOf(name, key);
	const TimestampTz now = ClockNow();
	Set *set = &table->set[id.hash % static_cast<uint64>(table->sets)];
	SpinLockAcquire(&set->mutex);
	Slot *slot = FindSlot(set, id);
	if (slot == NULL || slot->absent) {
		SpinLockRelease(&set->mutex);
		return false;
	}
	/* If a take comes before the abort of this reset, the abort takes
	 * back what the reset gave. */
	const core::Bucket refilled = core::Refill(slot->bucket, slot->limit, now);
	const double given = Max(slot->start_tokens - refilled.tokens, 0.0);
	const uint64 version_before = slot->version;
	slot->absent = true;
	slot->version++;
	PushUndo(table, set, slot, false, false, slot->bucket, version_before, -given);
	SpinLockRelease(&set->mutex);
	return true;
}

int64
ResetMemoryLimit(text *name)
{
	MemoryTable *table = RequireTable();
	const char *name_data = VARDATA_ANY(name);
	const int name_bytes = VARSIZE_ANY_EXHDR(name);
	int64 reset = 0;
	for (int s = 0; s < table->sets; s++) {
		Set *set = &table->set[s];
		SpinLockAcquire(&set->mutex);
		for (int w = 0; w < kWays; w++) {
			Slot &slot = set->slots[w];
			if (!slot.used || slot.absent || slot.database != MyDatabaseId ||
			    slot.name_bytes != name_bytes || memcmp(slot.text, name_data, name_bytes) != 0)
				continue;
			/* A bucket an open transaction took from stays, forgotten, until
			 * that transaction ends. */
			if (slot.holds > 0)
				slot.absent = true;
			else
				slot.used = false;
			slot.version++;
			reset++;
		}
		SpinLockRelease(&set->mutex);
	}
	return reset;
}

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
		const int copied = CopySlots(&table->set[s], name, copies);
		for (int i = 0; i < copied; i++) {
			if (copies[i].slot.absent)
				continue;
			if (count == capacity) {
				capacity *= 2;
				rows = static_cast<StoredBucket *>(repalloc(rows, sizeof(StoredBucket) * capacity));
			}
			rows[count++] = StoredOf(copies[i].slot, now);
		}
		CHECK_FOR_INTERRUPTS();
	}
	qsort(rows, count, sizeof(StoredBucket), CompareStoredKeys);
	for (int i = 0; i < count; i++)
		visit(rows[i], context);
}

int64
PurgeMemoryBuckets(text *name, SweepFilter filter, void *context)
{
	MemoryTable *table = RequireTable();
	const TimestampTz now = ClockNow();
	SlotCopy *copies = static_cast<SlotCopy *>(palloc(sizeof(SlotCopy) * kWays));
	int64 purged = 0;
	for (int s = 0; s < table->sets; s++) {
		Set *set = &table->set[s];
		const int copied = CopySlots(set, name, copies);
		for (int i = 0; i < copied; i++) {
			const Slot &copy = copies[i].slot;
			if (copy.holds > 0 || copy.remembers)
				continue;
			if (!copy.absent && !filter(StoredOf(copy, now), now, context))
				continue;
			SpinLockAcquire(&set->mutex);
			Slot &slot = set->slots[copies[i].way];
			if (slot.used && slot.holds == 0 && slot.generation == copies[i].generation &&
			    slot.version == copies[i].version) {
				slot.used = false;
				purged += !copy.absent;
			}
			SpinLockRelease(&set->mutex);
		}
		CHECK_FOR_INTERRUPTS();
	}
	return purged;
}

} /* namespace ratelimit::pg */

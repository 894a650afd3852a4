/*
 * src/pg/memory_table.cpp
 *
 * The memory engine's table: a fixed table of buckets in shared memory, in
 * sets of kWays slots.  A bucket lives in the set its hash of (database,
 * name, key) picks, under a seed drawn when the table is created (or the
 * one saved at a clean shutdown, for a table of as many sets), in any of
 * that set's slots (120 bytes each).  A lookup recognises a bucket by its
 * database, the lengths of its name and key, and its name and key: kept in
 * the slot itself when they fit in 32 bytes together, else in a pool of
 * text shared by the whole table (a 64-byte chunk for every 16 places, room
 * for two of the longest at least), their 128-bit hash under that seed
 * kept in the slot and compared first.  A key whose name and key find no
 * room there is kept in the table instead, as one that finds no slot is.
 *
 * A slot names the limits it is judged by (its escrow's limit and, while
 * prior_holds > 0, prior limit) by number, in the table's limits: each
 * distinct limit kept once (the phase of a key's own fixed windows left
 * out, as PolicyLimit draws it from the name and key), counted by the
 * slots that name it, freed when none does.  The engine copies a slot's
 * escrow into a core::EscrowState (EscrowOf) and back (StoreEscrow) under
 * the set's spinlock: the core works on that value.  The limits have one
 * entry for every 64 places (1,024 to 32,767), in chains by hash.  A new
 * key whose limit has no entry takes one only while fewer than half are
 * in use; otherwise it is kept in the table, as one that finds no slot is.
 * The other half is kept for the buckets already held, which a call under
 * a new limit (a redefinition) judges again: the new entry is counted, and
 * the old one freed when no other slot names it.  Only distinct limits
 * that redefinitions bring to buckets already held, while older ones stay
 * named, beyond that half, leave a call with no entry: it fails with
 * 53400 and changes nothing.
 *
 * The table's size is ratelimit.memory_buckets,
 * set when the server starts (the library in shared_preload_libraries);
 * without preloading, from PostgreSQL 17, a named DSM segment of the
 * default size, created on first use (shmem.cpp).
 *
 * Locking rules
 * - Each set has a spinlock, held only for a few comparisons and the core's
 *   arithmetic: finding a slot, deciding, writing the slot.  Nothing that
 *   can raise an error or allocate runs under it.  FindWay, ClaimWay and
 *   ForEachSlotOf's visits run under it; CopySlots takes it itself.
 * - The redefinitions have a spinlock of their own (memory_undo.cpp), and so
 *   do the text pool and the limits, which a set's spinlock may be held
 *   around, never the other way round.  The pool gives out blocks of whole
 *   chunks: a block given back goes to a free list of blocks of its size,
 *   and a block is taken from that list, else from the chunks never given
 *   out.
 * - A limit's entry is written, and its chain changed, under the limits'
 *   spinlock, and only while no slot names it (refs 0); a slot's numbers
 *   change under its set's spinlock, which its readers hold: the entries a
 *   slot names do not change while they read them.  StoreEscrow takes the
 *   entries a slot will name before it gives back those it named, so a
 *   store that finds none leaves the slot as it was (at most two entries
 *   in flight a set).
 * - A slot counts its escrow's holds, prior_holds, provisional and resets
 *   in 32 bits: StoreEscrow refuses a state held by more than 2^32 - 1
 *   records (the call fails with 54000, nothing changed); the others are
 *   no more than holds.
 * - A slot some open transaction holds (its escrow's holds > 0) is never
 *   evicted or freed, so every undo record finds its slot.  generation
 *   changes whenever a slot gets another bucket; the escrow's version
 *   whenever its committed state does.
 * - A new key takes a free slot of its set, else evicts a bucket that
 *   forgetting changes no answer (core::Forgettable: nobody holds it, and it
 *   is full under its limit, starts full and is not kept), as long as its
 *   policy and its database then hold no more of the set than their shares
 *   (ratelimit.memory_share), or no more than they held before.
 * - A slot counts with its policy's entry (buckets) while it is used; the
 *   entries' counters are atomics, changed under the set's spinlock of the
 *   slot that changes.
 * - A clean shutdown (preloaded only) saves every bucket that is not
 *   forgettable to pg_stat/ratelimit_memory.stat (mode 0600), with the
 *   table's number of sets and seed and the policies whose keys may be in
 *   the table, ending in a CRC-32C of the rest; the
 *   next start loads and deletes it, if the control file says that
 *   shutdown was clean and the CRC matches (else it loads nothing), and
 *   takes that seed again if it has as many sets, so that every bucket fits
 *   in its set again.  Saving runs in the postmaster as it exits, loading
 *   as it starts, under AddinShmemInitLock, before any backend exists.
 *   After a crash or an immediate shutdown nothing is saved, and the
 *   buckets start afresh, as ratelimit.buckets, being unlogged, does.
 */
#include "pg/memory_table.hpp"

#include <sys/stat.h>

extern "C" {
#include "catalog/pg_control.h"
#include "common/controldata_utils.h"
#include "port/pg_crc32c.h"
#include "storage/fd.h"
}

#include "pg/bucket_keys.hpp"
#include "pg/shmem.hpp"

namespace ratelimit::pg::memory {

namespace {

constexpr const char *kSaveFile = "pg_stat/ratelimit_memory.stat";
constexpr const char *kSaveTempFile = "pg_stat/ratelimit_memory.tmp";

/* Settings. */
int memory_buckets = 10000;
int memory_share = 50; /* percent of a set's places one policy may hold */

/* The most places of a set a policy may take, and a database: halfway
 * between the policy's share and the whole set. */
int
PolicyWays()
{
	return Max(1, kWays * memory_share / 100);
}

int
DatabaseWays()
{
	return PolicyWays() + (kWays - PolicyWays()) / 2;
}

/* The bit of `policy` in a set's `overflowed`. */
uint64
OverflowBit(uint16 policy)
{
	return uint64{1} << (policy % 64);
}

/* Chunk `chunk` of the text pool. */
char *
ChunkAt(MemoryTable *table, uint32 chunk)
{
	return reinterpret_cast<char *>(table) + table->texts + static_cast<Size>(chunk) * kChunkBytes;
}

int
SetsFor(int capacity)
{
	return (capacity + kWays - 1) / kWays;
}

/* The layout of a table of `capacity` places: the sets, then the limits
 * and their chains' heads, then the text pool. */
struct Layout {
	int sets;
	uint32 limits; /* entries, the unused 0th included */
	uint32 heads;
	uint32 chunks;
	Size limits_at;
	Size heads_at;
	Size texts;
	Size size;
};

/* The limits: one entry for every 64 places, 1,024 at least, kMaxLimits at
 * most (see the file header); twice as many chains as entries.  The text
 * pool: a chunk for every kPlacesPerChunk places, room for two of the
 * longest names and keys at least. */
Layout
LayoutFor(int capacity)
{
	Layout layout;
	layout.sets = SetsFor(capacity);
	const uint32 places = static_cast<uint32>(layout.sets) * kWays;
	layout.limits = Min(Max(places / 64, 1024u), static_cast<uint32>(kMaxLimits)) + 1;
	layout.heads = 1;
	while (layout.heads < 2 * layout.limits)
		layout.heads *= 2;
	layout.chunks = Max(places / kPlacesPerChunk, static_cast<uint32>(2 * kMaxChunks));
	layout.limits_at =
	    MAXALIGN(add_size(offsetof(MemoryTable, set), mul_size(layout.sets, sizeof(Set))));
	layout.heads_at =
	    MAXALIGN(add_size(layout.limits_at, mul_size(layout.limits, sizeof(LimitEntry))));
	layout.texts = MAXALIGN(add_size(layout.heads_at, mul_size(layout.heads, sizeof(uint16))));
	layout.size = add_size(layout.texts, mul_size(layout.chunks, kChunkBytes));
	return layout;
}

Size
TableSize(int capacity)
{
	return LayoutFor(capacity).size;
}

Size
TableSizeNow()
{
	return TableSize(memory_buckets);
}

/* A policy entry just claimed: nothing held, never overflowed. */
void
InitPolicy(PolicyEntry *entry)
{
	pg_atomic_init_u64(&entry->buckets, 0);
	pg_atomic_init_u64(&entry->evictions, 0);
	pg_atomic_init_u64(&entry->overflows, 0);
	pg_atomic_init_u64(&entry->table_gen, 0);
	pg_atomic_init_u64(&entry->cleared_gen, 0);
	pg_atomic_init_u32(&entry->storing, 0);
}

void
InitTable(void *memory)
{
	MemoryTable *table = static_cast<MemoryTable *>(memory);
	const Layout layout = LayoutFor(memory_buckets);
	table->sets = layout.sets;
	table->capacity = table->sets * kWays;
	table->texts = layout.texts;
	SpinLockInit(&table->text_mutex);
	table->chunks = layout.chunks;
	table->next_chunk = 0;
	for (uint32 &block : table->free_blocks)
		block = kNoChunk;
	table->limits_at = layout.limits_at;
	table->limit_heads_at = layout.heads_at;
	SpinLockInit(&table->limits_mutex);
	table->limit_count = layout.limits;
	table->limit_heads = layout.heads;
	table->limits_used = 0;
	table->limits_for_new = (layout.limits - 1) / 2;
	table->next_limit = 1;
	table->free_limit = 0;
	memset(reinterpret_cast<char *>(table) + layout.heads_at, 0, layout.heads * sizeof(uint16));
	if (!pg_strong_random(&table->seed, sizeof(table->seed)))
		table->seed = static_cast<uint64>(GetCurrentTimestamp()) ^ static_cast<uint64>(MyProcPid);
	pg_atomic_init_u64(&table->marks, 0);
	pg_atomic_init_u32(&table->redefining, 0);
	SpinLockInit(&table->redefinitions_mutex);
	table->overflow = 0;
	for (Redefinition &entry : table->redefinitions)
		entry.database = InvalidOid;
	for (PolicyEntry &entry : table->policies) {
		pg_atomic_init_u32(&entry.head.state, kEntryEmpty);
		InitPolicy(&entry);
	}
	for (int s = 0; s < table->sets; s++) {
		SpinLockInit(&table->set[s].mutex);
		table->set[s].overflowed = 0;
		for (int w = 0; w < kWays; w++)
			table->set[s].slots[w] = Slot{};
	}
}

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

/* --- the limits ------------------------------------------------------- */

LimitEntry *
LimitsOf(MemoryTable *table)
{
	return reinterpret_cast<LimitEntry *>(reinterpret_cast<char *>(table) + table->limits_at);
}

uint16 *
LimitHeadsOf(MemoryTable *table)
{
	return reinterpret_cast<uint16 *>(reinterpret_cast<char *>(table) + table->limit_heads_at);
}

/* Where the fixed windows of `window_us` of bucket (name, key) start when
 * its policy gives no start: PolicyLimit's hash of the name and key. */
int64
KeyPhase(const char *name, int name_bytes, const char *key, int key_bytes, int64 window_us)
{
	const uint64 hash =
	    hash_bytes_extended(reinterpret_cast<const unsigned char *>(name), name_bytes, kWindowSeed);
	const uint64 keyed =
	    hash_bytes_extended(reinterpret_cast<const unsigned char *>(key), key_bytes, hash);
	return static_cast<int64>(keyed % static_cast<uint64>(window_us));
}

/* A limit as an entry keeps it: its every field, the phase of fixed
 * windows left out when it is the key's own. */
struct LimitImage {
	uint64 words[8];
};

LimitImage
ImageOf(const core::Limit &limit, bool key_phase)
{
	LimitImage image{};
	memcpy(&image.words[0], &limit.rate, sizeof(double));
	memcpy(&image.words[1], &limit.burst, sizeof(double));
	memcpy(&image.words[2], &limit.window_us, sizeof(int64));
	if (!key_phase)
		memcpy(&image.words[3], &limit.phase_us, sizeof(int64));
	memcpy(&image.words[4], &limit.floor_rate, sizeof(double));
	memcpy(&image.words[5], &limit.penalty_us, sizeof(int64));
	image.words[6] = (limit.has_initial ? 1 : 0) | (key_phase ? 2 : 0) | (limit.sliding ? 4 : 0);
	memcpy(&image.words[7], &limit.initial, sizeof(double));
	return image;
}

bool
SameImage(const LimitImage &a, const LimitImage &b)
{
	return memcmp(a.words, b.words, sizeof(a.words)) == 0;
}

/* The name and key of a bucket, for the phase of its fixed windows. */
struct KeyText {
	const char *name;
	int name_bytes;
	const char *key;
	int key_bytes;
};

/* `limit` as an entry for the bucket of `key` keeps it. */
LimitImage
ImageFor(const core::Limit &limit, const KeyText &key)
{
	const bool key_phase = limit.window_us > 0 && !limit.sliding &&
	                       limit.phase_us == KeyPhase(key.name, key.name_bytes, key.key,
	                                                  key.key_bytes, limit.window_us);
	return ImageOf(limit, key_phase);
}

LimitImage
ImageAt(MemoryTable *table, uint32 id)
{
	const LimitEntry &entry = LimitsOf(table)[id];
	return ImageOf(entry.limit, entry.key_phase);
}

/* Limit `id` as the bucket of `key` is judged by it. */
core::Limit
LimitAt(MemoryTable *table, uint32 id, const KeyText &key)
{
	const LimitEntry &entry = LimitsOf(table)[id];
	core::Limit limit = entry.limit;
	if (entry.key_phase)
		limit.phase_us =
		    KeyPhase(key.name, key.name_bytes, key.key, key.key_bytes, limit.window_us);
	return limit;
}

uint32
ChainOf(MemoryTable *table, const LimitImage &image)
{
	return hash_bytes(reinterpret_cast<const unsigned char *>(image.words), sizeof(image.words)) &
	       (table->limit_heads - 1);
}

/* The entry of `image`, one more slot naming it: the one that holds it,
 * else a free one (for a new key, `for_new`, only below limits_for_new);
 * kNoLimit if none.  Under a set's spinlock. */
uint32
AcquireLimit(MemoryTable *table, const LimitImage &image, bool for_new)
{
	LimitEntry *limits = LimitsOf(table);
	uint16 *heads = LimitHeadsOf(table);
	const uint32 chain = ChainOf(table, image);
	SpinLockAcquire(&table->limits_mutex);
	uint32 id = heads[chain];
	while (id != kNoLimit && !SameImage(ImageAt(table, id), image))
		id = limits[id].next;
	if (id == kNoLimit && (!for_new || table->limits_used < table->limits_for_new)) {
		if (table->free_limit != kNoLimit) {
			id = table->free_limit;
			table->free_limit = limits[id].next;
		} else if (table->next_limit < table->limit_count) {
			id = table->next_limit++;
		}
		if (id != kNoLimit) {
			LimitEntry &entry = limits[id];
			memcpy(&entry.limit.rate, &image.words[0], sizeof(double));
			memcpy(&entry.limit.burst, &image.words[1], sizeof(double));
			memcpy(&entry.limit.window_us, &image.words[2], sizeof(int64));
			memcpy(&entry.limit.phase_us, &image.words[3], sizeof(int64));
			memcpy(&entry.limit.floor_rate, &image.words[4], sizeof(double));
			memcpy(&entry.limit.penalty_us, &image.words[5], sizeof(int64));
			entry.limit.has_initial = (image.words[6] & 1) != 0;
			memcpy(&entry.limit.initial, &image.words[7], sizeof(double));
			entry.key_phase = (image.words[6] & 2) != 0;
			entry.limit.sliding = (image.words[6] & 4) != 0;
			entry.refs = 0;
			entry.next = heads[chain];
			heads[chain] = static_cast<uint16>(id);
			table->limits_used++;
		}
	}
	if (id != kNoLimit)
		limits[id].refs++;
	SpinLockRelease(&table->limits_mutex);
	return id;
}

/* Whether limit `id` is `limit` for the bucket of `key`. */
bool
IsLimit(MemoryTable *table, uint32 id, const core::Limit &limit, const KeyText &key)
{
	return id != kNoLimit && SameImage(ImageAt(table, id), ImageFor(limit, key));
}

/* The name and key of `slot`. */
KeyText
KeyTextOf(MemoryTable *table, Slot &slot)
{
	const char *text = TextOf(table, slot);
	return KeyText{text, static_cast<int>(slot.name_bytes), text + slot.name_bytes,
	               static_cast<int>(slot.key_bytes)};
}

/* --- the text pool ------------------------------------------------------ */

void
ReleaseText(MemoryTable *table, int bytes, uint32 text_at)
{
	if (bytes <= kInlineBytes)
		return;
	const uint32 size = static_cast<uint32>((bytes + kChunkBytes - 1) / kChunkBytes);
	SpinLockAcquire(&table->text_mutex);
	memcpy(ChunkAt(table, text_at), &table->free_blocks[size], sizeof(uint32));
	table->free_blocks[size] = text_at;
	SpinLockRelease(&table->text_mutex);
}

/* The long text's place of `slot`, whose name and key do not fit in it. */
LongText
LongTextOf(const Slot &slot)
{
	LongText place;
	memcpy(&place, slot.text, sizeof(place));
	return place;
}

/* `stored` as a slot keeps it under `limit` (SlotBucket). */
SlotBucket
SlotBucketOf(const core::Bucket &stored, const core::Limit &limit)
{
	SlotBucket b{stored.tokens, stored.stamp_us, stored.blocked_until_us};
	if (limit.sliding)
		memcpy(&b.box_or_previous, &stored.previous, sizeof(double));
	return b;
}

/* The bucket `slot` keeps under `limit`, its last recorded call's. */
core::Bucket
BucketOf(const SlotBucket &kept, const core::Limit &limit)
{
	core::Bucket b{kept.tokens, kept.stamp_us, kept.box_or_previous};
	if (limit.sliding) {
		b.blocked_until_us = core::kNotBlocked;
		memcpy(&b.previous, &kept.box_or_previous, sizeof(double));
	}
	return b;
}

/* Whether `slot` may be given to another bucket at `now`. */
bool
Evictable(MemoryTable *table, Slot &slot, TimestampTz now)
{
	if (!slot.used)
		return true;
	if (slot.holds > 0)
		return false;
	return core::Forgettable(EscrowOf(table, slot), slot.kept, now);
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
	bool sliding;        /* its limit is a sliding window's (false in the formats before) */
	double start_tokens; /* what a new key starts with under its limit */
	SavedLimit limit;
	/* core::Bucket, as a slot keeps it (SlotBucket): a token bucket's
	 * penalty box or a sliding window's previous count in one word */
	double tokens;
	int64 stamp_us;
	int64 box_or_previous;
};

/* The file's header. */
struct SavedHeader {
	uint32 magic;
	uint32 bucket_bytes; /* sizeof(SavedBucket) */
	int32 count;
	int32 sets;      /* the table's sets */
	uint64 seed;     /* and its seed: a table of as many sets takes it again */
	int32 policies;  /* policies whose keys may be in the table, after the buckets */
	uint32 reserved; /* 0 */
};

/* What the file holds of each such policy, before its name: name_bytes -1
 * for the policies beyond the table's entries, which have none. */
struct SavedPolicy {
	Oid database;
	int32 name_bytes;
};

/* The file's format, numbered by hand: whenever a layout above changes (a
 * static_assert below fails) or a field's meaning does, the magic number
 * changes with it, so that a file of another format loads nothing. */
constexpr uint32 kSaveMagic = 0x524C4D37; /* "RLM7" */
static_assert(sizeof(SavedBucket) == 96, "the save file's bucket changed: change kSaveMagic");
static_assert(sizeof(SavedHeader) == 32, "the save file's header changed: change kSaveMagic");
static_assert(sizeof(SavedPolicy) == 8, "the save file's policy changed: change kSaveMagic");
/* The format before, the same but for `sliding` (its buckets are all token
 * buckets: a sliding window was not saved), is loaded too. */
constexpr uint32 kSave6Magic = 0x524C4D36; /* "RLM6" */
/* And the one before it, whose header ends before `policies` (none follow
 * its buckets). */
constexpr uint32 kSave5Magic = 0x524C4D35; /* "RLM5" */
constexpr size_t kSave5HeaderBytes = offsetof(SavedHeader, policies);
static_assert(kSave5HeaderBytes == 24, "the header of the format before is 24 bytes");

/* The saved form of `slot`'s bucket. */
SavedBucket
SavedOf(MemoryTable *table, Slot &slot)
{
	const core::EscrowState escrow = EscrowOf(table, slot);
	const core::Limit &limit = escrow.limit;
	SavedBucket saved{};
	saved.database = slot.database;
	saved.name_bytes = slot.name_bytes;
	saved.key_bytes = slot.key_bytes;
	saved.remembers = core::Remembered(escrow);
	saved.kept = slot.kept;
	saved.start_tokens = core::StartTokens(limit);
	saved.limit = SavedLimit{limit.rate,     limit.burst,      limit.window_us,
	                         limit.phase_us, limit.floor_rate, limit.penalty_us};
	saved.sliding = limit.sliding;
	const SlotBucket kept = SlotBucketOf(escrow.bucket, limit);
	saved.tokens = kept.tokens;
	saved.stamp_us = kept.stamp_us;
	saved.box_or_previous = kept.box_or_previous;
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
	limit.sliding = saved.sliding;
	return limit;
}

/* Whether forgetting `slot` would change an answer. */
bool
WorthSaving(MemoryTable *table, Slot &slot, TimestampTz now)
{
	return slot.used && !slot.absent && !Evictable(table, slot, now);
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
	MemoryTable *table = AttachedTable();
	if (code != 0 || table == NULL || !ShutdownWasClean())
		return;
	FILE *file = AllocateFile(kSaveTempFile, PG_BINARY_W);
	if (file == NULL) {
		ereport(LOG, (errcode_for_file_access(),
		              errmsg("could not write file \"%s\": %m", kSaveTempFile)));
		return;
	}
	const TimestampTz now = GetCurrentTimestamp();
	SavedHeader header{kSaveMagic, sizeof(SavedBucket), 0, table->sets, table->seed, 0, 0};
	for (int s = 0; s < table->sets; s++)
		for (int w = 0; w < kWays; w++)
			header.count += WorthSaving(table, table->set[s].slots[w], now);
	for (PolicyEntry &entry : table->policies)
		header.policies += PolicyInTable(entry);
	pg_crc32c crc;
	INIT_CRC32C(crc);
	COMP_CRC32C(crc, &header, sizeof(header));
	/* The seed is the server's secret, whatever the data directory's mode. */
	bool ok = fchmod(fileno(file), S_IRUSR | S_IWUSR) == 0 &&
	          fwrite(&header, sizeof(header), 1, file) == 1;
	for (int s = 0; ok && s < table->sets; s++)
		for (int w = 0; ok && w < kWays; w++) {
			Slot &slot = table->set[s].slots[w];
			if (!WorthSaving(table, slot, now))
				continue;
			const SavedBucket saved = SavedOf(table, slot);
			const char *text = TextOf(table, slot);
			const size_t bytes = slot.name_bytes + slot.key_bytes;
			COMP_CRC32C(crc, &saved, sizeof(saved));
			COMP_CRC32C(crc, text, bytes);
			ok = fwrite(&saved, sizeof(saved), 1, file) == 1 &&
			     fwrite(text, 1, bytes, file) == bytes;
		}
	for (int i = 0; ok && i < kPolicyEntries; i++) {
		PolicyEntry &entry = table->policies[i];
		if (!PolicyInTable(entry))
			continue;
		const SavedPolicy saved{entry.head.database,
		                        i == kOtherPolicies ? -1 : entry.head.name_bytes};
		const size_t bytes = Max(saved.name_bytes, 0);
		COMP_CRC32C(crc, &saved, sizeof(saved));
		COMP_CRC32C(crc, entry.head.name, bytes);
		ok = fwrite(&saved, sizeof(saved), 1, file) == 1 &&
		     fwrite(entry.head.name, 1, bytes, file) == bytes;
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
	SavedHeader header{};
	bool ok = ShutdownWasClean() && SaveFileIntact(file) &&
	          fread(&header, kSave5HeaderBytes, 1, file) == 1 &&
	          (header.magic == kSave5Magic ||
	           ((header.magic == kSaveMagic || header.magic == kSave6Magic) &&
	            fread(reinterpret_cast<char *>(&header) + kSave5HeaderBytes,
	                  sizeof(header) - kSave5HeaderBytes, 1, file) == 1)) &&
	          header.bucket_bytes == sizeof(SavedBucket) && header.count >= 0 &&
	          header.policies >= 0;
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
		if (header.magic != kSaveMagic)
			saved.sliding = false;
		const KeyHash hash = SlotHash(table->seed, saved.database, text, saved.name_bytes,
		                              text + saved.name_bytes, saved.key_bytes);
		const int s = static_cast<int>(hash.hash % static_cast<uint64>(table->sets));
		int way = -1;
		for (int w = 0; w < kWays && way < 0; w++)
			if (!table->set[s].slots[w].used)
				way = w;
		if (way < 0)
			continue; /* a smaller table than before: no room */
		const BucketName id{text, saved.name_bytes, text + saved.name_bytes, saved.key_bytes, hash,
		                    s};
		const core::Limit limit = LimitOf(saved);
		const uint32 pin = PinLimit(table, limit, id);
		if (pin == kNoLimit)
			continue; /* no room for its limit */
		uint32 text_at;
		if (!ReserveText(table, saved.name_bytes + saved.key_bytes, &text_at)) {
			ReleaseLimit(table, pin);
			continue; /* no room for its name and key */
		}
		Slot &slot = table->set[s].slots[way];
		HoldSlot(table, slot, saved.database,
		         PolicyOf(table, saved.database, text, saved.name_bytes), id, text_at);
		slot.kept = saved.kept;
		slot.kept_by = 0;
		const SlotBucket kept{saved.tokens, saved.stamp_us, saved.box_or_previous};
		const Stored stored =
		    StoreEscrow(table, slot, core::SettledEscrow(BucketOf(kept, limit), limit), true);
		Assert(stored == Stored::kStored);
		(void)stored;
		ReleaseLimit(table, pin);
		loaded++;
	}
	/* The policies whose keys may be in the table: looked for there
	 * again. */
	for (int32 i = 0; ok && i < header.policies; i++) {
		SavedPolicy saved;
		char name[kMaxNameBytes];
		ok = fread(&saved, sizeof(saved), 1, file) == 1 && saved.name_bytes >= -1 &&
		     saved.name_bytes <= kMaxNameBytes &&
		     fread(name, 1, Max(saved.name_bytes, 0), file) ==
		         static_cast<size_t>(Max(saved.name_bytes, 0));
		if (ok) {
			const uint16 policy = saved.name_bytes < 0
			                          ? kOtherPolicies
			                          : PolicyOf(table, saved.database, name, saved.name_bytes);
			/* In which sets, the file does not say. */
			pg_atomic_write_u64(&table->policies[policy].table_gen, 1);
			for (int s = 0; s < table->sets; s++)
				table->set[s].overflowed |= OverflowBit(policy);
		}
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

/* The table's startup in the postmaster: loads what the last clean
 * shutdown saved into the table just created, and saves the buckets when
 * the postmaster shuts down cleanly. */
void
StartTable(void *memory, bool created)
{
	if (created)
		LoadSavedBuckets(static_cast<MemoryTable *>(memory));
	if (!IsUnderPostmaster)
		on_shmem_exit(SaveBuckets, (Datum)0);
}

SharedSegment segment = {"ratelimit_memory", TableSizeNow, InitTable, StartTable, NULL, false};

} /* namespace */

MemoryTable *
Table()
{
	return static_cast<MemoryTable *>(SharedSegmentMemory(&segment));
}

MemoryTable *
RequireTable()
{
	MemoryTable *table = Table();
	if (table == NULL)
		ReportMemoryUnavailable();
	return table;
}

MemoryTable *
AttachedTable()
{
	return static_cast<MemoryTable *>(segment.memory);
}

void
DefineMemoryTable()
{
	DefineCustomIntVariable(
	    "ratelimit.memory_buckets", "How many buckets the memory engine holds.",
	    "Each takes about 127 bytes of shared memory from a million on, more below.  A key may "
	    "use one of 16 places picked by its hash.  Without shared_preload_libraries (PostgreSQL "
	    "17 and later), 10000.",
	    &memory_buckets, 10000, kWays, 10000000, PGC_POSTMASTER, 0, NULL, NULL, NULL);
	RequestSharedSegment(&segment);
}

void
DefineMemoryShare()
{
	DefineCustomIntVariable(
	    "ratelimit.memory_share",
	    "The most of each set of 16 places of the memory engine that one policy may hold, in "
	    "percent.",
	    "A database may hold halfway between that and all of them.  Keys that find no place "
	    "within their shares are kept in the table ratelimit.buckets.  100: no shares.",
	    &memory_share, 50, 1, 100, PGC_SIGHUP, 0, NULL, NULL, NULL);
}

char *
TextOf(MemoryTable *table, Slot &slot)
{
	if (slot.name_bytes + slot.key_bytes <= kInlineBytes)
		return slot.text;
	return ChunkAt(table, LongTextOf(slot).text_at);
}

core::EscrowState
EscrowOf(MemoryTable *table, Slot &slot)
{
	const KeyText key = KeyTextOf(table, slot);
	core::EscrowState state{};
	state.limit = LimitAt(table, slot.limit, key);
	state.bucket = BucketOf(slot.bucket, state.limit);
	state.pending = slot.pending;
	state.prior_limit = slot.prior_holds > 0 ? LimitAt(table, slot.prior_limit, key) : state.limit;
	state.holds = slot.holds;
	state.prior_holds = slot.prior_holds;
	state.provisional = slot.provisional;
	state.version = slot.version;
	state.commits = slot.commits;
	state.limit_epoch = slot.limit_epoch;
	state.absent = slot.absent;
	state.unsettled = slot.unsettled;
	state.resets = slot.resets;
	return state;
}

Stored
StoreEscrow(MemoryTable *table, Slot &slot, const core::EscrowState &state, bool for_new)
{
	/* prior_holds, provisional and resets are no more than holds. */
	Assert(core::InvariantsHold(state));
	if (state.holds > static_cast<std::int64_t>(PG_UINT32_MAX))
		return Stored::kTooManyHolds;
	const KeyText key = KeyTextOf(table, slot);
	/* The entries it names from now on, each taken before the ones it
	 * named are given back. */
	uint32 limit = slot.limit;
	if (!IsLimit(table, limit, state.limit, key)) {
		limit = AcquireLimit(table, ImageFor(state.limit, key), for_new);
		if (limit == kNoLimit)
			return Stored::kNoLimit;
	}
	uint32 prior = kNoLimit;
	if (state.prior_holds > 0) {
		prior = slot.prior_limit;
		if (!IsLimit(table, prior, state.prior_limit, key)) {
			prior = AcquireLimit(table, ImageFor(state.prior_limit, key), for_new);
			if (prior == kNoLimit) {
				if (limit != slot.limit)
					ReleaseLimit(table, limit);
				return Stored::kNoLimit;
			}
		}
	}
	if (limit != slot.limit)
		ReleaseLimit(table, slot.limit);
	if (prior != slot.prior_limit)
		ReleaseLimit(table, slot.prior_limit);
	slot.limit = limit;
	slot.prior_limit = prior;
	slot.bucket = SlotBucketOf(state.bucket, state.limit);
	slot.pending = state.pending;
	slot.holds = static_cast<uint32>(state.holds);
	slot.prior_holds = static_cast<uint32>(state.prior_holds);
	slot.provisional = static_cast<uint32>(state.provisional);
	slot.version = state.version;
	slot.commits = state.commits;
	slot.limit_epoch = state.limit_epoch;
	slot.absent = state.absent;
	slot.unsettled = state.unsettled;
	slot.resets = state.resets;
	return Stored::kStored;
}

uint32
PinLimit(MemoryTable *table, const core::Limit &limit, const BucketName &id)
{
	const KeyText key{id.name, id.name_bytes, id.key, id.key_bytes};
	return AcquireLimit(table, ImageFor(limit, key), true);
}

void
ReleaseLimit(MemoryTable *table, uint32 id)
{
	if (id == kNoLimit)
		return;
	LimitEntry *limits = LimitsOf(table);
	SpinLockAcquire(&table->limits_mutex);
	LimitEntry &entry = limits[id];
	if (--entry.refs == 0) {
		/* Out of its chain, onto the free list. */
		uint16 *link = &LimitHeadsOf(table)[ChainOf(table, ImageAt(table, id))];
		while (*link != id)
			link = &limits[*link].next;
		*link = entry.next;
		entry.next = table->free_limit;
		table->free_limit = static_cast<uint16>(id);
		table->limits_used--;
	}
	SpinLockRelease(&table->limits_mutex);
}

bool
ReserveText(MemoryTable *table, int bytes, uint32 *text_at)
{
	*text_at = kNoChunk;
	if (bytes <= kInlineBytes)
		return true;
	const uint32 size = static_cast<uint32>((bytes + kChunkBytes - 1) / kChunkBytes);
	SpinLockAcquire(&table->text_mutex);
	uint32 block = table->free_blocks[size];
	if (block != kNoChunk) {
		memcpy(&table->free_blocks[size], ChunkAt(table, block), sizeof(uint32));
	} else if (table->chunks - table->next_chunk >= size) {
		block = table->next_chunk;
		table->next_chunk += size;
	}
	SpinLockRelease(&table->text_mutex);
	*text_at = block;
	return block != kNoChunk;
}

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

int
FindWay(MemoryTable *table, const BucketName &id)
{
	Set *set = &table->set[id.set];
	const bool fits = id.name_bytes + id.key_bytes <= kInlineBytes;
	for (int w = 0; w < kWays; w++) {
		Slot &slot = set->slots[w];
		if (!slot.used || slot.database != MyDatabaseId ||
		    static_cast<int>(slot.name_bytes) != id.name_bytes ||
		    static_cast<int>(slot.key_bytes) != id.key_bytes)
			continue;
		const char *text = slot.text;
		if (!fits) {
			const LongText place = LongTextOf(slot);
			if (place.hash != id.hash.hash || place.check != id.hash.check)
				continue;
			text = ChunkAt(table, place.text_at);
		}
		if (memcmp(text + id.name_bytes, id.key, id.key_bytes) == 0 &&
		    memcmp(text, id.name, id.name_bytes) == 0)
			return w;
	}
	return -1;
}

/* Entries a policy's lookup visits at most. */
constexpr int kPolicyProbes = 64;

/* The policy this backend looked up last: entries never move. */
struct LastPolicy {
	MemoryTable *table;
	Oid database;
	int name_bytes;
	uint16 policy;
	char name[kMaxNameBytes];
};
LastPolicy last_policy = {NULL, InvalidOid, 0, 0, {}};

uint16
PolicyOf(MemoryTable *table, Oid database, const char *name, int name_bytes)
{
	LastPolicy &last = last_policy;
	if (last.table == table && last.database == database && last.name_bytes == name_bytes &&
	    memcmp(last.name, name, name_bytes) == 0)
		return last.policy;
	PolicyEntry *entry = FindNamedEntry(table->policies, kOtherPolicies, kPolicyProbes, database,
	                                    name, name_bytes, true, InitPolicy);
	const uint16 policy =
	    entry == NULL ? kOtherPolicies : static_cast<uint16>(entry - table->policies);
	/* Policies beyond the entries may find one later. */
	if (entry != NULL) {
		last.table = table;
		last.database = database;
		last.name_bytes = name_bytes;
		last.policy = policy;
		memcpy(last.name, name, name_bytes);
	}
	return policy;
}

bool
PolicyInTable(const PolicyEntry &policy)
{
	return pg_atomic_read_u64(const_cast<pg_atomic_uint64 *>(&policy.table_gen)) !=
	       pg_atomic_read_u64(const_cast<pg_atomic_uint64 *>(&policy.cleared_gen));
}

bool
SetKeysInTable(MemoryTable *table, const Set *set, uint16 policy)
{
	return (set->overflowed & OverflowBit(policy)) != 0 && PolicyInTable(table->policies[policy]);
}

void
MarkOverflow(MemoryTable *table, Set *set, uint16 policy)
{
	PolicyEntry &entry = table->policies[policy];
	/* Counted as storing before its keys are marked as in the table: a
	 * purge that finds none there does not unmark them while this row is
	 * on its way. */
	pg_atomic_fetch_add_u32(&entry.storing, 1);
	pg_atomic_fetch_add_u64(&entry.table_gen, 1);
	pg_atomic_fetch_add_u64(&entry.overflows, 1);
	set->overflowed |= OverflowBit(policy);
}

void
EndStoring(MemoryTable *table, uint16 policy)
{
	pg_atomic_fetch_sub_u32(&table->policies[policy].storing, 1);
}

void
ForgetOverflows(MemoryTable *table, uint16 policy, uint64 seen)
{
	/* An overflow that moves table_gen on after `seen` keeps it in. */
	pg_atomic_write_u64(&table->policies[policy].cleared_gen, seen);
	const uint64 bit = OverflowBit(policy);
	for (int s = 0; s < table->sets; s++) {
		Set *set = &table->set[s];
		SpinLockAcquire(&set->mutex);
		/* Under the spinlock an overflow of this set marks its policy and
		 * its bit: one of a policy sharing the bit keeps it. */
		bool shared = false;
		for (int i = policy % 64; i < kPolicyEntries && !shared; i += 64)
			shared = PolicyInTable(table->policies[i]);
		if (!shared)
			set->overflowed &= ~bit;
		SpinLockRelease(&set->mutex);
		if (shared)
			return;
	}
}

int
ClaimWay(MemoryTable *table, Set *set, TimestampTz now, uint16 policy)
{
	const int policy_ways = PolicyWays();
	const int database_ways = DatabaseWays();
	int held_by_policy = 0;
	int held_by_database = 0;
	for (const Slot &slot : set->slots)
		if (slot.used && slot.database == MyDatabaseId) {
			held_by_database++;
			held_by_policy += slot.policy == policy;
		}
	/* Whether the policy and the database may then hold so many places:
	 * no more than their shares, or than they hold now. */
	auto fits = [&](int by_policy, int by_database) {
		return (by_policy <= policy_ways || by_policy <= held_by_policy) &&
		       (by_database <= database_ways || by_database <= held_by_database);
	};
	if (fits(held_by_policy + 1, held_by_database + 1))
		for (int w = 0; w < kWays; w++)
			if (!set->slots[w].used)
				return w;
	for (int w = 0; w < kWays; w++) {
		Slot &slot = set->slots[w];
		if (!slot.used || !Evictable(table, slot, now))
			continue;
		const bool same_database = slot.database == MyDatabaseId;
		const bool same_policy = same_database && slot.policy == policy;
		if (fits(held_by_policy + 1 - same_policy, held_by_database + 1 - same_database))
			return w;
	}
	return -1;
}

void
HoldSlot(MemoryTable *table, Slot &slot, Oid database, uint16 policy, const BucketName &id,
         uint32 text_at)
{
	if (slot.used)
		pg_atomic_fetch_add_u64(&table->policies[slot.policy].evictions, 1);
	FreeSlot(table, slot);
	const uint32 generation = slot.generation;
	slot = Slot{};
	slot.generation = generation;
	slot.used = true;
	slot.database = database;
	slot.policy = policy;
	slot.name_bytes = static_cast<uint32>(id.name_bytes);
	slot.key_bytes = static_cast<uint32>(id.key_bytes);
	char *text = slot.text;
	if (id.name_bytes + id.key_bytes > kInlineBytes) {
		const LongText place{text_at, 0, id.hash.hash, id.hash.check};
		memcpy(slot.text, &place, sizeof(place));
		text = ChunkAt(table, text_at);
	}
	memcpy(text, id.name, id.name_bytes);
	memcpy(text + id.name_bytes, id.key, id.key_bytes);
	pg_atomic_fetch_add_u64(&table->policies[policy].buckets, 1);
}

void
FreeSlot(MemoryTable *table, Slot &slot)
{
	if (!slot.used)
		return;
	pg_atomic_fetch_sub_u64(&table->policies[slot.policy].buckets, 1);
	const int bytes = slot.name_bytes + slot.key_bytes;
	if (bytes > kInlineBytes)
		ReleaseText(table, bytes, LongTextOf(slot).text_at);
	ReleaseLimit(table, slot.limit);
	ReleaseLimit(table, slot.prior_limit);
	slot.limit = kNoLimit;
	slot.prior_limit = kNoLimit;
	slot.used = false;
}

void
VisitPolicyCounts(PolicyCountsVisitor visit, void *context)
{
	MemoryTable *table = RequireTable();
	for (int i = 0; i < kPolicyEntries; i++) {
		PolicyEntry &entry = table->policies[i];
		const bool named = i != kOtherPolicies;
		if (named && !NamedEntryReady(entry.head))
			continue;
		PolicyCounts counts;
		counts.database = named ? entry.head.database : InvalidOid;
		counts.name =
		    named ? cstring_to_text_with_len(entry.head.name, entry.head.name_bytes) : NULL;
		counts.buckets = static_cast<int64>(pg_atomic_read_u64(&entry.buckets));
		counts.evictions = static_cast<int64>(pg_atomic_read_u64(&entry.evictions));
		counts.overflows = static_cast<int64>(pg_atomic_read_u64(&entry.overflows));
		counts.in_table = PolicyInTable(entry);
		if (named || counts.buckets != 0 || counts.evictions != 0 || counts.overflows != 0 ||
		    counts.in_table)
			visit(counts, context);
	}
}

int
CopySlots(MemoryTable *table, int s, text *name, SlotCopy *copies)
{
	const char *name_data = name != NULL ? VARDATA_ANY(name) : NULL;
	const int name_bytes = name != NULL ? VARSIZE_ANY_EXHDR(name) : 0;
	Set *set = &table->set[s];
	int count = 0;
	SpinLockAcquire(&set->mutex);
	for (int w = 0; w < kWays; w++) {
		Slot &slot = set->slots[w];
		if (!slot.used || slot.database != MyDatabaseId)
			continue;
		const char *text = TextOf(table, slot);
		if (name != NULL && (static_cast<int>(slot.name_bytes) != name_bytes ||
		                     memcmp(text, name_data, name_bytes) != 0))
			continue;
		copies[count].way = w;
		copies[count].slot = slot;
		copies[count].escrow = EscrowOf(table, slot);
		memcpy(copies[count].text, text, slot.name_bytes + slot.key_bytes);
		count++;
	}
	SpinLockRelease(&set->mutex);
	return count;
}

} /* namespace ratelimit::pg::memory */

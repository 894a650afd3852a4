/*
 * src/pg/memory_table.hpp
 *
 * The memory engine's table in shared memory, as memory_table.cpp,
 * memory_undo.cpp and memory_engine.cpp share it: sets of kWays slots, each
 * slot a bucket's identity, its policy, its kept mark and its escrow (a
 * core::EscrowState kept compact: EscrowOf reads it, StoreEscrow writes it,
 * its limits named by number); the distinct limits the slots name, each
 * kept once; the policies whose buckets it holds, with their counters and
 * whether their keys may be in the table; the redefinitions open
 * transactions are writing; and the text pool of long names and keys.
 * Locking rules are in memory_table.cpp's header.
 */
#ifndef RATELIMIT_PG_MEMORY_TABLE_HPP
#define RATELIMIT_PG_MEMORY_TABLE_HPP

#include "pg/pg_includes.hpp"

#include "core/escrow.hpp"
#include "pg/errors.hpp"
#include "pg/named_entries.hpp"

namespace ratelimit::pg::memory {

/* Slots of one set: where one key may live. */
constexpr int kWays = 16;

/* The most room a slot's name and key take. */
constexpr int kTextBytes = kMaxNameBytes + kMaxKeyBytes;

/* A name and key this short are kept in the slot itself, and a new key
 * touches no page of the text pool. */
constexpr int kInlineBytes = 32;

/* Longer ones are kept in the table's text pool, each in a block of whole
 * chunks; the pool has one chunk for every kPlacesPerChunk places, and
 * room for two names and keys of the greatest length at least. */
constexpr int kChunkBytes = 64;
constexpr int kPlacesPerChunk = 16;
constexpr int kMaxChunks = (kTextBytes + kChunkBytes - 1) / kChunkBytes;
constexpr uint32 kNoChunk = PG_UINT32_MAX;

/* What the inline bytes of a slot whose name and key are longer hold: the
 * first chunk of their block, and their 128-bit hash under the table's
 * seed (compared before the text). */
struct LongText {
	uint32 text_at;
	uint32 reserved;
	uint64 hash;
	uint64 check;
};

static_assert(sizeof(LongText) <= kInlineBytes, "a long text's place fits in a slot");

/* Limits are kept once each in the table's limits (LimitEntry), which a
 * slot names by number: 1 to kMaxLimits, 0 for none. */
constexpr int kLimitIdBits = 15;
constexpr int kMaxLimits = (1 << kLimitIdBits) - 1;
constexpr uint32 kNoLimit = 0;

/* A bucket's core::Bucket in a slot: a token bucket's penalty box or a
 * sliding window's previous count in one word, as the slot's limit says
 * (a sliding window has no box, a token bucket no previous count). */
struct SlotBucket {
	double tokens;
	int64 stamp_us;
	int64 box_or_previous; /* blocked_until_us, or the bits of previous */
};

/* A bucket: its identity, its policy, its kept mark and its escrow
 * (core::EscrowState, as EscrowOf reads and StoreEscrow writes it: the
 * limits by number, the bucket in a SlotBucket, the counters of open
 * records in 32 bits, which StoreEscrow enforces).  120 bytes. */
struct Slot {
	SlotBucket bucket;  /* as committed (see absent and unsettled) */
	double pending;     /* costs of takes not yet committed */
	uint64 version;     /* changes whenever the committed state does */
	uint64 kept_by;     /* the mark (KeptMark) that set `kept`, taken back if its writer
	                       aborts */
	uint64 policy : 10; /* its entry in the table's policies */
	uint64 used : 1;
	uint64 kept : 1;      /* its policy was written since a call last judged it: not evicted
	                         (nor left unsaved) until a call under another limit does */
	uint64 absent : 1;    /* core::EscrowState's */
	uint64 unsettled : 1; /* core::EscrowState's */
	uint64 name_bytes : 9;
	uint64 key_bytes : 11;
	uint64 limit : kLimitIdBits;       /* the limit of its last recorded call */
	uint64 prior_limit : kLimitIdBits; /* the limit before, while prior_holds > 0, else 0 */
	uint32 generation;
	Oid database;
	uint32 holds; /* core::EscrowState's counters */
	uint32 prior_holds;
	uint32 provisional;
	uint32 resets;
	uint32 commits;
	uint32 limit_epoch;
	char text[kInlineBytes]; /* the name, then the key, if they fit; else a LongText */
};

static_assert(sizeof(Slot) == 120, "a slot takes 120 bytes");
static_assert(kMaxNameBytes < (1 << 9) && kMaxKeyBytes < (1 << 11), "lengths fit a slot");

/* A distinct limit that slots name (`refs` of them, counting each slot's
 * limit and prior limit), or a free entry (refs 0).  Written only while
 * no slot names it, under the limits' spinlock; read under the spinlock
 * of the set of a slot that names it. */
struct LimitEntry {
	core::Limit limit; /* phase_us 0 if key_phase */
	uint32 refs;
	uint16 next;    /* the next entry of its hash chain, or of the free list (0: none) */
	bool key_phase; /* the phase of fixed windows is the key's own (PolicyLimit's hash of
	                   the name and key) */
};

struct Set {
	slock_t mutex;
	/* The policies whose keys of this set overflowed into the table since
	 * the table was last found to hold none of theirs: bit `policy` % 64
	 * (OverflowBit), set with the policy's table_gen. */
	uint64 overflowed;
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

/* The policies (a database and a name) whose buckets the table holds:
 * claimed once, never moved (named_entries.hpp).  Policies beyond the
 * table's entries share its last one, kOtherPolicies. */
constexpr int kPolicyEntries = 1024;
static_assert(kPolicyEntries <= 1024, "a slot names its policy in 10 bits");
constexpr uint16 kOtherPolicies = kPolicyEntries - 1;

struct PolicyEntry {
	NamedEntry head;
	pg_atomic_uint64 buckets;   /* slots it holds (added to and taken from) */
	pg_atomic_uint64 evictions; /* its full buckets forgotten to make room for another */
	pg_atomic_uint64 overflows; /* its keys stored in the table for want of room */
	/* Whether its keys may be in the table: overflows decided (table_gen)
	 * since the table was last found to hold none (cleared_gen), and those
	 * whose row is being stored (storing).  Set under the set's spinlock of
	 * the key that overflows, so that a call of that key that misses sees it
	 * under the same spinlock. */
	pg_atomic_uint64 table_gen;
	pg_atomic_uint64 cleared_gen;
	pg_atomic_uint32 storing;
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
	PolicyEntry policies[kPolicyEntries];
	Size texts;                         /* offset of the text pool */
	slock_t text_mutex;                 /* over the pool's chunks and what follows */
	uint32 chunks;                      /* in the pool */
	uint32 next_chunk;                  /* the chunks from here on were never given out */
	uint32 free_blocks[kMaxChunks + 1]; /* blocks given back, by their size in chunks, each
	                                        naming the next (kNoChunk: none) */
	Size limits_at;                     /* offset of the limits (entry 0 unused) */
	Size limit_heads_at;                /* offset of their hash chains' heads (uint16) */
	slock_t limits_mutex;               /* over the limits' refs, chains and what follows */
	uint32 limit_count;                 /* entries, the unused 0th included */
	uint32 limit_heads;                 /* chains: a power of 2 */
	uint32 limits_used;                 /* entries named by a slot */
	uint32 limits_for_new;              /* the most a new key may bring the entries used to: the
	                                       others are kept for the buckets held */
	uint32 next_limit;                  /* the entries from here on were never given out */
	uint16 free_limit;                  /* entries given back, each naming the next (0: none) */
	Set set[FLEXIBLE_ARRAY_MEMBER];
};

/* The table, attaching to it (from PostgreSQL 17 without preloading) if
 * this backend has not yet; NULL when there is no shared memory for it. */
MemoryTable *Table();

/* The table; raises 55000 when there is no shared memory for it. */
MemoryTable *RequireTable();

/* The table if this backend is attached to it, else NULL; never attaches
 * (for transaction callbacks, which must not fail). */
MemoryTable *AttachedTable();

/* Defines ratelimit.memory_buckets and sets the table aside at server
 * start: from _PG_init while the library is being preloaded. */
void DefineMemoryTable();

/* Defines ratelimit.memory_share: from _PG_init. */
void DefineMemoryShare();

/* The 128-bit hash of (database, name, key) under the table's seed: two
 * hashes with independent seeds. */
struct KeyHash {
	uint64 hash;
	uint64 check;
};

/* A bucket's identity, as the caller gives it. */
struct BucketName {
	const char *name;
	int name_bytes;
	const char *key;
	int key_bytes;
	KeyHash hash;
	int set;
};

/* The identity of bucket (name, key) of this database in `table`. */
BucketName NameOf(MemoryTable *table, text *name, text *key);

/* The way of bucket `id` in its set, or -1: the slot of its database, name
 * and key.  Under the set's spinlock. */
int FindWay(MemoryTable *table, const BucketName &id);

/* The entry of policy `name` (`name_bytes` long) of `database`, claimed if
 * it has none (kOtherPolicies when the entries are all taken). */
uint16 PolicyOf(MemoryTable *table, Oid database, const char *name, int name_bytes);

/* Whether keys of `policy` may be in the table (ratelimit.buckets of their
 * database). */
bool PolicyInTable(const PolicyEntry &policy);

/* Whether keys of `policy` in `set` may be in the table: a call that misses
 * there looks in the table first.  Under the set's spinlock. */
bool SetKeysInTable(MemoryTable *table, const Set *set, uint16 policy);

/* A key of `policy` in `set` found no room and is on its way into the
 * table: from now on calls of its policy that miss in this set look there
 * (marked under the set's spinlock, so that a call of the same key that
 * misses after this sees it), and the policy counts as storing a row there
 * until EndStoring. */
void MarkOverflow(MemoryTable *table, Set *set, uint16 policy);
void EndStoring(MemoryTable *table, uint16 policy);

/* The table was found to hold no row of `policy`, none being stored, when
 * its table_gen was `seen`: its calls no longer look there (unless it has
 * overflowed again since), nor, in every set, those of the policies that
 * share its bit and have no keys there either. */
void ForgetOverflows(MemoryTable *table, uint16 policy, uint64 seen);

/* The way of `set` for a new bucket of `policy` of this database: a free
 * one, else one whose bucket can be forgotten at `now`, within the shares
 * of the set that the policy and the database may hold
 * (ratelimit.memory_share); -1 if none.  Under the set's spinlock. */
int ClaimWay(MemoryTable *table, Set *set, TimestampTz now, uint16 policy);

/* `slot` holds bucket `id` (of `database`, of `policy`), whose name and
 * key are kept at `text_at` (ReserveText for their sum), from now on (the
 * bucket it held, if any, is gone, counted as its policy's eviction): used,
 * counted with its policy, its name and key written, its escrow that of a
 * key never seen under no limit (StoreEscrow gives it one).  Under the
 * set's spinlock (or before any backend exists). */
void HoldSlot(MemoryTable *table, Slot &slot, Oid database, uint16 policy, const BucketName &id,
              uint32 text_at);

/* Frees `slot`, its text and its limits, no longer counted with its
 * policy.  Under the set's spinlock. */
void FreeSlot(MemoryTable *table, Slot &slot);

/* Where the name, then the key, of `slot` are kept. */
char *TextOf(MemoryTable *table, Slot &slot);

/* The escrow of `slot` (used), its limits read from the table's.  Under the
 * set's spinlock. */
core::EscrowState EscrowOf(MemoryTable *table, Slot &slot);

/* Writes `state` into `slot` (used): kStored; or, leaving the slot as it
 * was, kNoLimit when a limit it is judged by has no entry free (a new key,
 * `for_new`, finds none beyond limits_for_new: the rest are kept for the
 * buckets held), kTooManyHolds when it is held by more records than a slot
 * counts (2^32 - 1).  Under the set's spinlock. */
enum class Stored { kStored, kNoLimit, kTooManyHolds };
Stored StoreEscrow(MemoryTable *table, Slot &slot, const core::EscrowState &state, bool for_new);

/* An entry of the limits for `limit` (of bucket `id`), for a new key of
 * that bucket: one more slot names it until ReleaseLimit; kNoLimit if none
 * is free below limits_for_new.  Under a set's spinlock. */
uint32 PinLimit(MemoryTable *table, const core::Limit &limit, const BucketName &id);
void ReleaseLimit(MemoryTable *table, uint32 limit);

/* Room for a name and key of `bytes` in all: none needed (true) when they
 * fit in a slot, else a block of the text pool, whose first chunk goes to
 * *text_at; false when the pool has no block free for them.  Under a set's
 * spinlock (the pool's is taken inside it).  HoldSlot hands it to a slot. */
bool ReserveText(MemoryTable *table, int bytes, uint32 *text_at);

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
			if (slot.used && !slot.absent && slot.database == MyDatabaseId &&
			    static_cast<int>(slot.name_bytes) == name_bytes &&
			    memcmp(TextOf(table, slot), name, name_bytes) == 0)
				visit(slot);
		}
		SpinLockRelease(&set->mutex);
	}
}

/* A policy's entry as read (rate_limit_memory_stats). */
struct PolicyCounts {
	Oid database; /* InvalidOid: the policies beyond the entries, together */
	text *name;   /* NULL for those */
	int64 buckets;
	int64 evictions;
	int64 overflows;
	bool in_table;
};

/* Calls visit(counts, context) for every policy entry in use (or used since
 * the server started), of every database.  Raises 55000 without shared
 * memory. */
using PolicyCountsVisitor = void (*)(const PolicyCounts &counts, void *context);
void VisitPolicyCounts(PolicyCountsVisitor visit, void *context);

/* A copy of a slot, its escrow and its text, taken under its set's
 * spinlock. */
struct SlotCopy {
	int way;
	Slot slot;
	core::EscrowState escrow;
	char text[kTextBytes];
};

/* Copies the slots of set `s` that belong to this database (and to `name`,
 * unless NULL) into `copies`; returns how many. */
int CopySlots(MemoryTable *table, int s, text *name, SlotCopy *copies);

} /* namespace ratelimit::pg::memory */

#endif

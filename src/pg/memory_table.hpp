/*
 * src/pg/memory_table.hpp
 *
 * The memory engine's table in shared memory, as memory_table.cpp,
 * memory_undo.cpp and memory_engine.cpp share it: sets of kWays slots, each
 * slot a bucket's identity, its policy, its kept mark and its escrow
 * (core::EscrowState); the policies whose buckets it holds, with their
 * counters and whether their keys may be in the table; and the
 * redefinitions open transactions are writing.  Locking rules are in
 * memory_table.cpp's header.
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
constexpr int kInlineBytes = 48;

/* Longer ones are kept in the table's text pool, each in a block of whole
 * chunks; the pool has one chunk for each place. */
constexpr int kChunkBytes = 64;
constexpr int kMaxChunks = (kTextBytes + kChunkBytes - 1) / kChunkBytes;
constexpr uint32 kNoChunk = PG_UINT32_MAX;

struct Slot {
	/* What a lookup reads, together. */
	bool used;
	bool kept;     /* its policy was written since a call last judged it: not evicted
	                  (nor left unsaved) until a call under another limit does */
	uint16 policy; /* its entry in the table's policies */
	uint32 generation;
	uint64 hash;  /* picks the set */
	uint64 check; /* a second, independent hash: with `hash`, the key's identity */
	Oid database;
	int name_bytes;
	int key_bytes;
	uint32 text_at; /* the first chunk of its name and key in the text pool, if they do not
	                   fit inline */
	uint64 kept_by; /* the mark (KeptMark) that set `kept`, taken back if its writer
	                   aborts */
	core::EscrowState escrow;       /* the bucket, what is pending on it, the limits it is judged
	                                   by, and the counters of open transactions' records */
	char inline_text[kInlineBytes]; /* the name, then the key, if they fit */
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

/* The way of bucket `id` in its set, or -1.  Under the set's spinlock. */
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

/* `slot` holds a bucket of `policy` of `database`, whose name and key
 * (`name_bytes` and `key_bytes` long) are kept at `text_at` (ReserveText
 * for their sum), from now on (the
 * bucket it held, if any, is gone, counted as its policy's eviction): used,
 * counted with its policy.  Under the set's spinlock (or before any
 * backend exists). */
void HoldSlot(MemoryTable *table, Slot &slot, Oid database, uint16 policy, int name_bytes,
              int key_bytes, uint32 text_at);

/* Frees `slot` and its text, no longer counted with its policy.  Under the
 * set's spinlock. */
void FreeSlot(MemoryTable *table, Slot &slot);

/* Where the name, then the key, of way `way` of set `set` are kept. */
char *TextOf(MemoryTable *table, int set, int way);

/* Room for a name and key of `bytes` in all: none needed (true) when they
 * fit in a slot, else a block of the text pool, whose first chunk goes to
 * *text_at; false when the pool has no block free for them.  Under a set's
 * spinlock (the pool's is taken inside it).  HoldSlot hands it to a slot,
 * ReleaseText gives it back if it goes to none. */
bool ReserveText(MemoryTable *table, int bytes, uint32 *text_at);
void ReleaseText(MemoryTable *table, int bytes, uint32 text_at);

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

/* A copy of a slot and its text, taken under its set's spinlock. */
struct SlotCopy {
	int way;
	Slot slot;
	char text[kTextBytes];
};

/* Copies the slots of set `s` that belong to this database (and to `name`,
 * unless NULL) into `copies`; returns how many. */
int CopySlots(MemoryTable *table, int s, text *name, SlotCopy *copies);

} /* namespace ratelimit::pg::memory */

#endif

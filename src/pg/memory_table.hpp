/*
 * src/pg/memory_table.hpp
 *
 * The memory engine's table in shared memory, as memory_table.cpp,
 * memory_undo.cpp and memory_engine.cpp share it: sets of kWays slots, each
 * slot a bucket's identity, its kept mark and its escrow (core::EscrowState),
 * and the redefinitions open transactions are writing.  Locking rules are
 * in memory_table.cpp's header.
 */
#ifndef RATELIMIT_PG_MEMORY_TABLE_HPP
#define RATELIMIT_PG_MEMORY_TABLE_HPP

#include "pg/pg_includes.hpp"

#include "core/escrow.hpp"
#include "pg/errors.hpp"

namespace ratelimit::pg::memory {

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

/* The way of `set` for a new bucket: a free one, else one whose bucket can
 * be forgotten at `now`; -1 if none.  Under the set's spinlock. */
int ClaimWay(Set *set, TimestampTz now);

/* Where the name, then the key, of way `way` of set `set` are kept. */
char *TextOf(MemoryTable *table, int set, int way);

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
int CopySlots(MemoryTable *table, int s, text *name, SlotCopy *copies);

} /* namespace ratelimit::pg::memory */

#endif

/*
 * src/pg/named_entries.hpp
 *
 * A fixed table in shared memory of entries named by a database and a
 * limit's name (the counters of rate_limit_stats, the memory engine's
 * policies): open addressing by a hash of both, a lookup visiting at most
 * a given number of slots.  Entries are claimed once and never move or go
 * away, so a lookup needs no lock.
 *
 * Locking rules
 * - An entry is claimed by compare-and-swap of its state from empty to
 *   claimed; its claimer writes the name and lets the entry's own `init`
 *   set it up, then (after a write barrier) sets it ready.  Readers use an
 *   entry only once it is ready; one that finds it claimed waits for that
 *   (a few instructions).
 */
#ifndef RATELIMIT_PG_NAMED_ENTRIES_HPP
#define RATELIMIT_PG_NAMED_ENTRIES_HPP

#include "pg/pg_includes.hpp"

#include "pg/errors.hpp"

namespace ratelimit::pg {

enum NamedEntryState : uint32 { kEntryEmpty = 0, kEntryClaimed = 1, kEntryReady = 2 };

/* What every named entry starts with (as its member `head`). */
struct NamedEntry {
	pg_atomic_uint32 state;
	uint32 hash;
	Oid database; /* a limit is a name in one database */
	int name_bytes;
	char name[kMaxNameBytes];
};

/* The hash of name `name` (`bytes` long) of `database`. */
inline uint32
NamedEntryHash(Oid database, const char *name, int bytes)
{
	return static_cast<uint32>(
	    hash_bytes_extended(reinterpret_cast<const unsigned char *>(name), bytes, database));
}

/* Whether the ready entry `head` is name `name` of `database`. */
inline bool
NamedEntryIs(const NamedEntry &head, uint32 hash, Oid database, const char *name, int bytes)
{
	return head.hash == hash && head.database == database && head.name_bytes == bytes &&
	       memcmp(head.name, name, bytes) == 0;
}

/* The ready entry of name `name` of `database` among `entries`, claimed
 * (and set up by init) if it has none and `claim`; NULL when none of the
 * slots a lookup visits (at most `max_probes`) is free or its own. */
template <typename Entry>
Entry *
FindNamedEntry(Entry *entries, int capacity, int max_probes, Oid database, const char *name,
               int bytes, bool claim, void (*init)(Entry *entry))
{
	const uint32 hash = NamedEntryHash(database, name, bytes);
	const int probes = capacity < max_probes ? capacity : max_probes;
	for (int probe = 0; probe < probes; probe++) {
		Entry *entry = &entries[(hash + probe) % capacity];
		NamedEntry &head = entry->head;
		uint32 state = pg_atomic_read_u32(&head.state);
		if (state == kEntryEmpty) {
			if (!claim)
				return NULL;
			uint32 expected = kEntryEmpty;
			if (pg_atomic_compare_exchange_u32(&head.state, &expected, kEntryClaimed)) {
				head.hash = hash;
				head.database = database;
				head.name_bytes = bytes;
				memcpy(head.name, name, bytes);
				init(entry);
				pg_write_barrier();
				pg_atomic_write_u32(&head.state, kEntryReady);
				return entry;
			}
			state = expected;
		}
		/* Claimed by another backend: ready in a moment. */
		while (state == kEntryClaimed) {
			pg_spin_delay();
			state = pg_atomic_read_u32(&head.state);
		}
		pg_read_barrier();
		if (NamedEntryIs(head, hash, database, name, bytes))
			return entry;
	}
	return NULL;
}

/* Whether `head` is ready to be read, with a read barrier after. */
inline bool
NamedEntryReady(NamedEntry &head)
{
	if (pg_atomic_read_u32(&head.state) != kEntryReady)
		return false;
	pg_read_barrier();
	return true;
}

} /* namespace ratelimit::pg */

#endif

/*
 * src/pg/holds.cpp
 *
 * Places held until the transaction ends (see holds.hpp).  Place `slot` of
 * key (name, key) is an ExclusiveLock on the advisory lock tag (database,
 * 64-bit hash of name and key, kPlaceClass + slot): field4 from kPlaceClass
 * (256) up keeps the places apart from SQL's advisory locks (field4 1 and 2) and
 * from the table engine's first-insert lock.  A take tries the slots
 * without waiting, from a slot that depends on the backend so that takers
 * spread over them, and keeps the first `places` it gets; never waiting, it
 * can raise neither 40001 nor 40P01, and locks being no snapshot's, its
 * answer is the same at every isolation level.  Two keys whose hashes are
 * equal would share their places (a denial too many, never a grant too
 * many); at 64 bits that is left to chance.
 *
 * The lock manager is re-entrant: a transaction that holds a slot gets it
 * again (LOCKACQUIRE_ALREADY_HELD).  Such a slot is this transaction's
 * already, not a new place: its extra count is released at once.
 *
 * Free places are counted without taking any (a lock taken only to count
 * would make another taker pass that slot by): a slot is free when this
 * transaction does not hold it and no other does (GetLockConflicts).
 */
#include "pg/pg_includes.hpp"

#include "pg/bucket_keys.hpp"
#include "pg/compat.hpp"
#include "pg/holds.hpp"
#include "pg/policies.hpp"

namespace ratelimit::pg {

namespace {

/* The advisory lock tags' field4 of places: kPlaceClass + slot, from 256
 * to 256 + kMaxHeld - 1 (pg_locks shows it as objsubid, a smallint: all
 * positive), below the table engine's first-insert lock (0x524C). */
constexpr uint16 kPlaceClass = 0x100;
static_assert(kPlaceClass + kMaxHeld <= 0x524C, "places must stay below the first-insert lock");
/* The seed of the places' hash of (name, key). */
constexpr uint64 kPlaceSeed = 0x706C61636573ULL;

constexpr LOCKMODE kPlaceLock = ExclusiveLock;

void
PlaceTag(LOCKTAG *tag, uint64 hash, int slot)
{
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, static_cast<uint32>(hash >> 32),
	                     static_cast<uint32>(hash), static_cast<uint16>(kPlaceClass + slot));
}

/* How many of the max_held slots no transaction holds. */
int
FreePlaces(uint64 hash, int max_held)
{
	/* GetLockConflicts allocates an array per call. */
	MemoryContext counting =
	    AllocSetContextCreate(CurrentMemoryContext, "ratelimit places", ALLOCSET_SMALL_SIZES);
	MemoryContext caller = MemoryContextSwitchTo(counting);
	int free = 0;
	for (int slot = 0; slot < max_held; slot++) {
		LOCKTAG tag;
		PlaceTag(&tag, hash, slot);
		if (RlLockHeldByMe(&tag, kPlaceLock))
			continue;
		int holders = 0;
		(void)GetLockConflicts(&tag, kPlaceLock, &holders);
		if (holders == 0)
			free++;
		MemoryContextReset(counting);
	}
	MemoryContextSwitchTo(caller);
	MemoryContextDelete(counting);
	return free;
}

} /* namespace */

core::Decision
HoldPlaces(text *name, text *key, int max_held, int places, bool take)
{
	const uint64 hash = BucketHash(name, key, kPlaceSeed);
	bool allowed = true;
	if (take && places > 0) {
		int *got = static_cast<int *>(palloc(sizeof(int) * places));
		int count = 0;
		const int start = MyProcPid % max_held;
		for (int i = 0; i < max_held && count < places; i++) {
			const int slot = (start + i) % max_held;
			LOCKTAG tag;
			PlaceTag(&tag, hash, slot);
			const LockAcquireResult result = LockAcquire(&tag, kPlaceLock, false, true);
			if (result == LOCKACQUIRE_NOT_AVAIL)
				continue;
			if (result != LOCKACQUIRE_OK) {
				/* Held by this transaction already: not a new place. */
				LockRelease(&tag, kPlaceLock, false);
				continue;
			}
			got[count++] = slot;
		}
		if (count < places) {
			/* Denied: nothing is kept. */
			for (int i = 0; i < count; i++) {
				LOCKTAG tag;
				PlaceTag(&tag, hash, got[i]);
				LockRelease(&tag, kPlaceLock, false);
			}
			allowed = false;
		}
		pfree(got);
	}
	int free = FreePlaces(hash, max_held);
	if (!take) {
		/* A check answers as the take would: the places free after it. */
		allowed = free >= places;
		if (allowed)
			free -= places;
	}
	const double unknown = get_float8_nan();
	core::Decision decision{};
	decision.allowed = allowed;
	decision.write = false;
	decision.remaining = free;
	decision.retry_after = allowed ? 0.0 : unknown;
	decision.reset_after = free == max_held ? 0.0 : unknown;
	decision.refill_after = free == max_held ? 0.0 : unknown;
	return decision;
}

} /* namespace ratelimit::pg */

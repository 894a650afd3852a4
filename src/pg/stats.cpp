/*
 * src/pg/stats.cpp
 *
 * Per-limit counters of takes in shared memory: a fixed table of
 * ratelimit.stats_limits entries named by the limit's name and database
 * (named_entries.hpp: a lookup visits at most kMaxProbes slots).  Entries
 * are claimed once and never move or go away (a reset zeroes their
 * counters), so a take finds its entry without any lock.
 *
 * Locking rules
 * - Entries are claimed as named_entries.hpp says.
 * - Counters are atomics, added to without a lock; tokens granted, a double,
 *   by compare-and-swap of its bits.
 * - The reset time is guarded by the table's spinlock.
 * - A reset zeroes counters one by one, without stopping takes: a take that
 *   races with it may be counted before or after it.
 */
#include "pg/stats.hpp"

#include "pg/bucket_keys.hpp"
#include "pg/errors.hpp"
#include "pg/named_entries.hpp"
#include "pg/shmem.hpp"

namespace ratelimit::pg {

namespace {

struct StatsEntry {
	NamedEntry head;
	pg_atomic_uint64 grants;
	pg_atomic_uint64 denials;
	pg_atomic_uint64 tokens_bits; /* a double's bits */
	pg_atomic_uint64 reservations;
	pg_atomic_uint64 wait_us;
};

struct StatsTable {
	slock_t mutex;
	TimestampTz reset_at;     /* under mutex */
	pg_atomic_uint64 dropped; /* takes not counted: no entry free for their limit */
	int capacity;
	StatsEntry entries[FLEXIBLE_ARRAY_MEMBER];
};

/* Slots a lookup visits at most: beyond them a limit finds no room, and a
 * full table costs a take no more than this. */
constexpr int kMaxProbes = 64;

/* Settings. */
int stats_limits = 1000;
bool track_stats = true;

Size
TableSize(int capacity)
{
	return add_size(offsetof(StatsTable, entries), mul_size(capacity, sizeof(StatsEntry)));
}

void
ZeroCounters(StatsEntry *entry)
{
	pg_atomic_write_u64(&entry->grants, 0);
	pg_atomic_write_u64(&entry->denials, 0);
	pg_atomic_write_u64(&entry->tokens_bits, 0); /* the bits of 0.0 */
	pg_atomic_write_u64(&entry->reservations, 0);
	pg_atomic_write_u64(&entry->wait_us, 0);
}

void
InitTable(void *memory)
{
	StatsTable *table = static_cast<StatsTable *>(memory);
	SpinLockInit(&table->mutex);
	table->reset_at = GetCurrentTimestamp();
	pg_atomic_init_u64(&table->dropped, 0);
	table->capacity = stats_limits;
	for (int i = 0; i < table->capacity; i++) {
		StatsEntry *entry = &table->entries[i];
		pg_atomic_init_u32(&entry->head.state, kEntryEmpty);
		pg_atomic_init_u64(&entry->grants, 0);
		pg_atomic_init_u64(&entry->denials, 0);
		pg_atomic_init_u64(&entry->tokens_bits, 0);
		pg_atomic_init_u64(&entry->reservations, 0);
		pg_atomic_init_u64(&entry->wait_us, 0);
	}
}

Size
TableSizeNow()
{
	return TableSize(stats_limits);
}

/* The table: set aside at server start when preloaded, else (from 17) a
 * named DSM segment created on first use. */
SharedSegment segment = {"ratelimit_stats", TableSizeNow, InitTable, NULL, NULL, false};

/* The table, or NULL when there is no shared memory for it. */
StatsTable *
Table()
{
	return static_cast<StatsTable *>(SharedSegmentMemory(&segment));
}

/* The ready entry of `name`, claimed if it has none; NULL when the table
 * is full. */
StatsEntry *
FindEntry(StatsTable *table, const char *name, int bytes, bool claim)
{
	return FindNamedEntry(table->entries, table->capacity, kMaxProbes, MyDatabaseId, name, bytes,
	                      claim, ZeroCounters);
}

void
AddDouble(pg_atomic_uint64 *target, double amount)
{
	uint64 old_bits = pg_atomic_read_u64(target);
	for (;;) {
		double old_value;
		memcpy(&old_value, &old_bits, sizeof(old_value));
		double new_value = old_value + amount;
		uint64 new_bits;
		memcpy(&new_bits, &new_value, sizeof(new_bits));
		if (pg_atomic_compare_exchange_u64(target, &old_bits, new_bits))
			return;
	}
}

double
ReadDouble(pg_atomic_uint64 *source)
{
	uint64 bits = pg_atomic_read_u64(source);
	double value;
	memcpy(&value, &bits, sizeof(value));
	return value;
}

StatsTable *
RequireTable()
{
	StatsTable *table = Table();
	if (table == NULL)
		ReportStatsUnavailable();
	return table;
}

} /* namespace */

void
DefineStatsSettings()
{
	DefineCustomBoolVariable("ratelimit.track_stats",
	                         "Counts takes per limit for rate_limit_stats.", NULL, &track_stats,
	                         true, PGC_SUSET, 0, NULL, NULL, NULL);
	/* The size of shared memory set aside at server start: only then. */
	if (!process_shared_preload_libraries_in_progress)
		return;
	DefineCustomIntVariable(
	    "ratelimit.stats_limits", "How many limits rate_limit_stats counts takes of.",
	    "Takes of further limits are counted only as dropped.  Sets the size of the counters' "
	    "shared memory, about 330 bytes a limit.  Without shared_preload_libraries (PostgreSQL "
	    "17 and later), 1000.",
	    &stats_limits, 1000, 1, 100000, PGC_POSTMASTER, 0, NULL, NULL, NULL);
	RequestSharedSegment(&segment);
}

void
PrepareStats()
{
	if (track_stats)
		(void)Table();
}

void
CountTake(text *name, double cost, const core::Decision &decision, int64 waited_us)
{
	if (!track_stats)
		return;
	StatsTable *table = Table();
	if (table == NULL)
		return;
	StatsEntry *entry = FindEntry(table, VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name), true);
	if (entry == NULL) {
		pg_atomic_fetch_add_u64(&table->dropped, 1);
		return;
	}
	if (decision.allowed) {
		pg_atomic_fetch_add_u64(&entry->grants, 1);
		if (cost > 0.0)
			AddDouble(&entry->tokens_bits, cost);
		if (decision.remaining < 0.0)
			pg_atomic_fetch_add_u64(&entry->reservations, 1);
	} else {
		pg_atomic_fetch_add_u64(&entry->denials, 1);
	}
	if (waited_us > 0)
		pg_atomic_fetch_add_u64(&entry->wait_us, static_cast<uint64>(waited_us));
}

void
VisitStats(StatsVisitor visit, void *context)
{
	StatsTable *table = RequireTable();
	for (int i = 0; i < table->capacity; i++) {
		StatsEntry *entry = &table->entries[i];
		if (!NamedEntryReady(entry->head) || entry->head.database != MyDatabaseId)
			continue;
		LimitStats stats;
		stats.name = cstring_to_text_with_len(entry->head.name, entry->head.name_bytes);
		stats.grants = static_cast<int64>(pg_atomic_read_u64(&entry->grants));
		stats.denials = static_cast<int64>(pg_atomic_read_u64(&entry->denials));
		stats.tokens_granted = ReadDouble(&entry->tokens_bits);
		stats.reservations = static_cast<int64>(pg_atomic_read_u64(&entry->reservations));
		stats.lock_wait_seconds =
		    static_cast<double>(pg_atomic_read_u64(&entry->wait_us)) / 1000000.0;
		visit(stats, context);
	}
}

TimestampTz
StatsResetAt()
{
	StatsTable *table = RequireTable();
	SpinLockAcquire(&table->mutex);
	TimestampTz at = table->reset_at;
	SpinLockRelease(&table->mutex);
	return at;
}

int64
StatsDropped()
{
	return static_cast<int64>(pg_atomic_read_u64(&RequireTable()->dropped));
}

void
ResetStats(text *name)
{
	StatsTable *table = RequireTable();
	if (name != NULL) {
		StatsEntry *entry = FindEntry(table, VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name), false);
		if (entry != NULL)
			ZeroCounters(entry);
		return;
	}
	for (int i = 0; i < table->capacity; i++) {
		StatsEntry *entry = &table->entries[i];
		if (NamedEntryReady(entry->head) && entry->head.database == MyDatabaseId)
			ZeroCounters(entry);
	}
	pg_atomic_write_u64(&table->dropped, 0);
	SpinLockAcquire(&table->mutex);
	table->reset_at = GetCurrentTimestamp();
	SpinLockRelease(&table->mutex);
}

} /* namespace ratelimit::pg */

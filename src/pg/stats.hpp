/*
 * src/pg/stats.hpp
 *
 * Per-limit counters of takes (rate_limit_stats): grants, denials, tokens
 * granted, reservations and the time takes spent waiting for another
 * transaction's row lock.  They live in shared memory, which needs the
 * library in shared_preload_libraries before PostgreSQL 17; from 17 a
 * library loaded later creates it on first use.
 */
#ifndef RATELIMIT_PG_STATS_HPP
#define RATELIMIT_PG_STATS_HPP

#include "pg/pg_includes.hpp"

#include "core/token_bucket.hpp"

namespace ratelimit::pg {

/* Defines ratelimit.track_stats and, when the library is being preloaded,
 * ratelimit.stats_limits, and asks for the shared memory.  From _PG_init. */
void DefineStatsSettings();

/* Attaches this backend to the counters if it is not yet: before a take
 * writes anything, so that a failure to attach (from 17, a new DSM segment)
 * fails the call before it has changed a bucket. */
void PrepareStats();

/* Counts one take of `cost` under limit `name` (of this database) that
 * decided `decision` after waiting `waited_us` for other transactions' row
 * locks.  Cheap and, after PrepareStats, without failure: without shared
 * memory, or with no room for the limit, it counts nothing (the latter
 * shows as dropped). */
void CountTake(text *name, double cost, const core::Decision &decision, int64 waited_us);

/* One limit's counters, as read. */
struct LimitStats {
	text *name;
	int64 grants;
	int64 denials;
	double tokens_granted;
	int64 reservations;
	double lock_wait_seconds;
};

/* Calls `visit` for every limit of this database counted since the last
 * reset.  Raises 55000
 * when the counters have no shared memory (PostgreSQL before 17 without
 * preloading). */
using StatsVisitor = void (*)(const LimitStats &stats, void *context);
void VisitStats(StatsVisitor visit, void *context);

/* When the counters were last reset (or created), and how many takes found
 * the table of limits full. */
TimestampTz StatsResetAt();
int64 StatsDropped();

/* Zeroes the counters of limit `name`, or of every limit (NULL), of this
 * database; a reset of every limit also zeroes dropped and the reset time,
 * which are the server's. */
void ResetStats(text *name);

} /* namespace ratelimit::pg */

#endif

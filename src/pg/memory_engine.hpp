/*
 * src/pg/memory_engine.hpp
 *
 * The memory engine: buckets of policies defined with storage => 'memory',
 * kept in shared memory instead of ratelimit.buckets.  A take spends its
 * cost at once, so that every other caller counts it as spent (escrow), and
 * gives it back if its (sub)transaction aborts; nobody waits for anybody,
 * and nothing takes a transaction id or touches a table.  See
 * memory_engine.cpp for the locking rules.
 */
#ifndef RATELIMIT_PG_MEMORY_ENGINE_HPP
#define RATELIMIT_PG_MEMORY_ENGINE_HPP

#include "pg/pg_includes.hpp"

#include "core/token_bucket.hpp"
#include "pg/storage.hpp"

namespace ratelimit::pg {

/* Defines ratelimit.memory_buckets when the library is being preloaded,
 * asks for the shared memory, and registers the transaction callbacks.
 * From _PG_init. */
void DefineMemorySettings();

/* Whether the memory engine has its shared memory (attaching to it, from
 * PostgreSQL 17 without preloading, if it must). */
bool HasMemoryEngine();

/* Applies `operation` (a check, take, refund or penalty) to the memory
 * bucket (name, key), as DecideBucket does to a row.  A take or refund
 * belongs to the caller's (sub)transaction: its abort undoes it.  Raises
 * 55000 without shared memory (before PostgreSQL 17, without preloading)
 * and 53400 when a new key finds no room. */
core::Decision DecideMemoryBucket(text *name, text *key, const core::Limit &limit,
                                  const Operation &operation);

/* TakeAll for buckets that all live in memory: takes from every one or
 * from none.  `takes` sorted by CompareBuckets and free of duplicates. */
bool TakeAllMemory(BucketTake *takes, int count);

/* Forgets memory bucket (name, key) in the caller's transaction (its
 * abort brings it back).  True if it existed. */
bool ResetMemoryBucket(text *name, text *key);

/* Forgets every memory bucket of `name` of this database, at once; returns
 * how many. */
int64 ResetMemoryLimit(text *name);

/* Limit `name` of this database was defined or redefined: its buckets
 * stay (are neither evicted nor left unsaved) until a call under the new
 * definition judges them, and so do those that calls store, or judge by
 * another limit, until the caller's transaction has ended.  If the
 * caller's (sub)transaction aborts, the buckets it marked so are as they
 * were. */
void KeepMemoryBuckets(const char *name, int name_bytes);

/* Visits the memory buckets of `name` of this database, in key order,
 * as takes see them now. */
void VisitMemoryBuckets(text *name, BucketVisitor visit, void *context);

/* Forgets the memory buckets (of `name`, or of every name, of this
 * database) that `filter` accepts and that no open transaction has taken
 * from.  Returns how many. */
int64 PurgeMemoryBuckets(text *name, SweepFilter filter, void *context);

} /* namespace ratelimit::pg */

#endif

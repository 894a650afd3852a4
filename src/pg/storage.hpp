/*
 * src/pg/storage.hpp
 *
 * The table engine: bucket state in the unlogged table ratelimit.buckets,
 * read and written directly through its primary-key index and the heap (no
 * SPI, no executor), as kTableEngine (engine.hpp).  See storage.cpp for
 * the locking rules.
 */
#ifndef RATELIMIT_PG_STORAGE_HPP
#define RATELIMIT_PG_STORAGE_HPP

#include "pg/pg_includes.hpp"

#include "core/token_bucket.hpp"
#include "pg/bucket_keys.hpp"
#include "pg/engine.hpp"

namespace ratelimit::pg {

/* Whether ratelimit.buckets is a logged table (rate_limit_set_logged): kept
 * across crashes and on streaming standbys. */
bool BucketStateIsLogged();

/* Microseconds this backend has spent waiting for other transactions'
 * writes of buckets (row locks), ever: the difference across a call is that
 * call's wait. */
int64 BucketWaitMicros();

/* The OID of relation `relname` in the extension's schema, or InvalidOid. */
Oid StateRelationOid(const char *relname);

/* Raises 55000 unless ratelimit.`table` (open as `heap`) is still what
 * direct access relies on: a plain heap table with no trigger, no row-level
 * security and no check constraint, which the direct path would bypass. */
void CheckDirectAccess(Relation heap, const char *table);

/* Another engine's place for a key the table does not hold: place(context,
 * decision) decides there and returns true, or returns false, leaving
 * *decision as it is, when it has no room for what the call stores. */
struct Placement {
	bool (*place)(void *context, core::Decision *decision);
	void *context;
};

/* kTableEngine's decide for an engine that keeps in the table the keys it
 * has no room for (the memory engine): `operation` on bucket (name, key) as
 * the table engine decides it if the table holds the key (any version, one
 * being written too: the call waits as a take of the table waits);
 * otherwise `placement` decides, holding the key's new-key lock if the call
 * writes, so that no row of the key appears meanwhile, and only what it has
 * no room for is stored in the table.  A write of the table in a read-only
 * transaction raises 25006. */
core::Decision DecideInTableOr(text *name, text *key, const core::Limit &limit,
                               const Operation &operation, const Placement &placement);

/* Whether ratelimit.buckets holds a version of a bucket of limit `name`,
 * even one that is being written or that VACUUM has yet to remove. */
bool TableHoldsLimit(text *name);

/* The table engine (kTableEngine, engine.hpp) keeps buckets in
 * ratelimit.buckets; a call applies its operation to the latest committed
 * state of its row, and a take or refund stores its result in the caller's
 * transaction.  A denial leaves no lock and writes nothing, except that a
 * take of a key never seen before records it when it starts below a full
 * bucket (StartsBelowFull).  Its maintenance commits after each batch of
 * kPurgeBatchBlocks heap pages (purge) or kResetBatchKeys keys (reset of a
 * whole limit). */
constexpr BlockNumber kPurgeBatchBlocks = 128;
constexpr int kResetBatchKeys = 1000;

} /* namespace ratelimit::pg */

#endif

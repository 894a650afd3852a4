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

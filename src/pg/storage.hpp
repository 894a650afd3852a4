/*
 * src/pg/storage.hpp
 *
 * Bucket state in the unlogged table ratelimit.buckets, read and written
 * directly through its primary-key index and the heap (no SPI, no executor).
 * See storage.cpp for the locking rules.
 */
#ifndef RATELIMIT_PG_STORAGE_HPP
#define RATELIMIT_PG_STORAGE_HPP

#include "pg/pg_includes.hpp"

#include "core/token_bucket.hpp"

namespace ratelimit::pg {

/* What a call does with the bucket once decided. */
enum class Access {
	kCheck, /* decide only: never locks, never writes */
	kTake   /* store the decision when it consumes */
};

/* Registers the relcache callback that drops cached relation state. */
void RegisterStorageCallbacks();

/* Decides `request` against the latest committed state of (name, key) and,
 * for kTake, stores what it consumes in the caller's transaction. */
core::Decision DecideBucket(text *name, text *key, const core::Limit &limit,
                            const core::Request &request, Access access);

/* Deletes the bucket so that its next use starts full.  True if it existed. */
bool ResetBucket(text *name, text *key);

} /* namespace ratelimit::pg */

#endif

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
#include "pg/bucket_keys.hpp"

namespace ratelimit::pg {

/* What a call does to a bucket. */
struct Operation {
	enum Kind {
		kCheck,     /* decide `request` only: never locks, never writes */
		kTake,      /* decide `request` and store what it consumes */
		kRefund,    /* give `amount` tokens back (capped at burst) and store it */
		kPeek,      /* like kCheck, but never waits for an in-flight writer */
		kRecordNew, /* store a key never seen before at its starting balance;
		               leave an existing row alone, without waiting */
		kPenalize   /* decide `request` again and store only a denial that
		               starts the limit's penalty box (a denied
		               rate_limit_take_all): never a grant */
	} kind;
	core::Request request; /* kCheck, kTake */
	double amount;         /* kRefund */
	bool has_initial;      /* a new key starts with `initial` tokens, not burst */
	double initial;
};

/* True if a key never seen under `operation` starts below a full bucket: its
 * first sighting must then be stored, or it would never start earning. */
bool StartsBelowFull(const Operation &operation, const core::Limit &limit);

/* A bucket seen for the first time: full, or at its policy's initial balance. */
core::Bucket NewBucket(const core::Limit &limit, bool has_initial, double initial, TimestampTz now);

/* The core's answer for `operation` (a check, take, refund, first sighting
 * or penalty) on `bucket` at `now`; every engine decides through it. */
core::Decision Evaluate(const Operation &operation, const core::Bucket &bucket,
                        const core::Limit &limit, TimestampTz now);

/* Whether ratelimit.buckets is a logged table (rate_limit_set_logged): kept
 * across crashes and on streaming standbys. */
bool BucketStateIsLogged();

/* Microseconds this backend has spent waiting for other transactions'
 * writes of buckets (row locks), ever: the difference across a call is that
 * call's wait. */
int64 BucketWaitMicros();

/* The OID of relation `relname` in the extension's schema, or InvalidOid. */
Oid StateRelationOid(const char *relname);

/* Registers the relcache callback that drops cached relation state. */
void RegisterStorageCallbacks();

/* Applies `operation` to the latest committed state of (name, key); a take or
 * refund stores its result in the caller's transaction.  A denial leaves no
 * lock and writes nothing, except that a take of a key never seen before
 * records it when it starts below a full bucket (StartsBelowFull). */
core::Decision DecideBucket(text *name, text *key, const core::Limit &limit,
                            const Operation &operation);

/* One distinct bucket of an all-or-nothing take. */
struct BucketTake {
	text *name;
	text *key;
	core::Limit limit;
	core::Request request;
	bool has_initial;
	double initial;
	bool in_memory;          /* the policy's buckets live in memory */
	core::Decision decision; /* out */
};

/* Takes from every bucket of `takes` or from none, in the caller's
 * transaction.  `takes` must be sorted by CompareBuckets and free of duplicates:
 * rows are locked in that order, so overlapping calls cannot deadlock.
 * Returns whether all were granted; each decision says how that bucket
 * stands (after the take if granted, as it is otherwise).  A denial leaves
 * no lock and no new version behind (keys never seen that start below a full
 * bucket are recorded, as for a single take). */
bool TakeAll(BucketTake *takes, int count);

/* Deletes the bucket so that its next use starts full.  True if it existed. */
bool ResetBucket(text *name, text *key);

/* What ResetBucketUnlessBusy did. */
enum class ResetOutcome {
	kAbsent,  /* no such bucket */
	kDeleted, /* deleted in the caller's transaction */
	kBusy     /* another transaction writes or locks it: left alone */
};

/* ResetBucket, waiting for the bucket's writer only when `wait`; without it,
 * a bucket some transaction writes or locks is kBusy. */
ResetOutcome ResetBucketUnlessBusy(text *name, text *key, bool wait);

/* Up to `max_keys` distinct row keys of `name` after `after` (NULL: from the
 * first), in key order, as the primary key holds them: every version, dead
 * ones too, so that a key a concurrent update moves is still listed.
 * Returns how many; each key is palloc'd. */
int ListBucketKeys(text *name, text *after, text **keys, int max_keys);

/* One row of ratelimit.buckets as a sweep sees it. */
struct StoredBucket {
	text *name;
	text *key;
	core::Bucket bucket;
	TimestampTz full_at; /* DT_NOEND in a database not yet updated to 0.3.0 */
};

/* Called by VisitBuckets for each bucket. */
using BucketVisitor = void (*)(const StoredBucket &row, void *context);

/* Visits every bucket of `name` in key order, as a take would see it: the
 * latest committed version (or this transaction's own).  Reads through the
 * primary key with a dirty snapshot: it never waits, and takes no SSI
 * predicate lock, so a SERIALIZABLE reader makes no later take fail.  It
 * is a live read, not a snapshot: a bucket written meanwhile may show its
 * state before or after that write. */
void VisitBuckets(text *name, BucketVisitor visit, void *context);

/* Whether a sweep deletes `row`, the clock reading `now`. */
using SweepFilter = bool (*)(const StoredBucket &row, TimestampTz now, void *context);

/* How far a sweep got. */
struct SweepProgress {
	BlockNumber next_block; /* where the next batch starts */
	bool finished;          /* no block of the table lies beyond this batch */
	int64 deleted;
};

/* Deletes, from heap blocks [first, first + count), the rows `filter`
 * accepts, in the caller's transaction.  A row some transaction is writing,
 * or that is locked or replaced before it is locked here, is left alone
 * without waiting: the writer wins.  A row is deleted only in the version
 * the filter accepted, locked first. */
SweepProgress SweepBuckets(BlockNumber first, BlockNumber count, SweepFilter filter, void *context);

} /* namespace ratelimit::pg */

#endif

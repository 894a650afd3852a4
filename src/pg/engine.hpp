/*
 * src/pg/engine.hpp
 *
 * The seam between the limiter's calls and the engines that keep buckets,
 * in the manner of PostgreSQL's TableAmRoutine: the vocabulary every engine
 * shares (what a call does to a bucket, one bucket of an all-or-nothing
 * take, a bucket as a listing or a sweep sees it) and BucketEngine, a plain
 * struct of function pointers and capability flags.  The table engine
 * (storage.cpp) and the memory engine (memory_engine.cpp) are its two
 * instances, each defined at the end of its own file; a policy carries its
 * engine, and callers never ask which one they hold.  A third engine is one
 * more file, one more row of kEngines and one more accepted `storage` value
 * of rate_limit_define.
 */
#ifndef RATELIMIT_PG_ENGINE_HPP
#define RATELIMIT_PG_ENGINE_HPP

#include "pg/pg_includes.hpp"

#include "core/token_bucket.hpp"

namespace ratelimit::pg {

/* What a call does to a bucket. */
struct Operation {
	enum Kind {
		kCheck,     /* decide `request` only: never locks, never writes */
		kTake,      /* decide `request` and store what it consumes */
		kRefund,    /* give `amount` tokens back (capped at burst) and store it */
		kPeek,      /* like kCheck, but never waits for an in-flight writer */
		kRecordNew, /* store a key never seen before at its starting balance;
		               leave an existing bucket alone, without waiting */
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

struct BucketEngine;

/* One distinct bucket of an all-or-nothing take. */
struct BucketTake {
	text *name;
	text *key;
	core::Limit limit;
	core::Request request;
	bool has_initial;
	double initial;
	const BucketEngine *engine; /* the policy's */
	core::Decision decision;    /* out */
};

/* A bucket as a listing or a sweep sees it. */
struct StoredBucket {
	text *name;
	text *key;
	core::Bucket bucket;
	TimestampTz full_at; /* DT_NOEND in a database not yet updated to 0.3.0 */
};

/* Called for each bucket a listing visits. */
using BucketVisitor = void (*)(const StoredBucket &row, void *context);

/* Whether a sweep forgets `row`, the clock reading `now`. */
using SweepFilter = bool (*)(const StoredBucket &row, TimestampTz now, void *context);

/* The transactions of a maintenance procedure (rate_limit_purge,
 * rate_limit_reset_limit): an engine does its work in batches, each begun
 * and committed through these, so that none holds locks for long. */
struct Batches {
	void (*begin)(void *context);
	void (*commit)(void *context);
	void *context;
};

struct BucketEngine {
	const char *storage; /* the storage value of rate_limit_define that chooses it */
	const char *holds;   /* where it keeps buckets, for messages: "the table" */
	bool can_shard;      /* a policy's keys may be split over several buckets */
	bool writes_tables;  /* a take writes a table: not on a standby nor in a read-only
	                        transaction (an engine that writes none works there, on each
	                        server's own buckets) */

	/* From _PG_init: settings, callbacks, shared memory. */
	void (*init)();
	/* Whether it can keep buckets here: false where it lacks what it needs,
	 * and then `require` raises the error that says so. */
	bool (*available)();
	void (*require)();

	/* Applies `operation` to the latest state of bucket (name, key) under
	 * `limit`; a take or refund belongs to the caller's (sub)transaction. */
	core::Decision (*decide)(text *name, text *key, const core::Limit &limit,
	                         const Operation &operation);
	/* Takes from every bucket of `takes` or from none: `takes` is sorted by
	 * CompareBuckets, free of duplicates and holds at least two.  Returns
	 * whether all were granted; each decision says how its bucket stands
	 * (after the take if granted, as it is otherwise: a bucket that would
	 * have granted alone says so).  A denial takes and stores nothing. */
	bool (*take_all)(BucketTake *takes, int count);
	/* Forgets bucket (name, key) in the caller's transaction; true if it
	 * existed. */
	bool (*reset)(text *name, text *key);
	/* Forgets every bucket of limit `name` in `batches`; how many. */
	int64 (*reset_limit)(text *name, const Batches &batches);
	/* Visits the buckets of `name`, in key order, as takes see them now. */
	void (*visit)(text *name, BucketVisitor visit, void *context);
	/* Forgets, in `batches`, the buckets (of `name`, or of every name when
	 * NULL) that `filter` accepts and no open transaction is writing;
	 * how many. */
	int64 (*purge)(text *name, SweepFilter filter, void *context, const Batches &batches);
	/* A policy of this engine was written with another limit than before
	 * (or is new): NULL if the engine keeps nothing that depends on it. */
	void (*policy_written)(const char *name, int name_bytes);
};

extern const BucketEngine kTableEngine;  /* storage.cpp */
extern const BucketEngine kMemoryEngine; /* memory_engine.cpp */

/* Every engine, the default (the table) first. */
inline const BucketEngine *const kEngines[] = {&kTableEngine, &kMemoryEngine};

/* The engine storage value `storage` (`bytes` long) chooses, or NULL. */
const BucketEngine *EngineNamed(const char *storage, int bytes);

} /* namespace ratelimit::pg */

#endif

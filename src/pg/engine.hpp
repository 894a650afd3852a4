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

#include "core/operation.hpp"
#include "core/token_bucket.hpp"

namespace ratelimit::pg {

/* What a call does to a bucket (check, take, refund, peek, first sighting,
 * penalty): the core's, which answers it (core::Apply).  A key never seen
 * starts as the call's limit says (core::NewBucket). */
using Operation = core::Operation;

struct BucketEngine;

/* One distinct bucket of an all-or-nothing take. */
struct BucketTake {
	text *name;
	text *key;
	core::Limit limit; /* with the start balance of a new key */
	core::Request request;
	const BucketEngine *engine; /* the policy's */
	core::Decision decision;    /* out */
	int max_held;               /* a concurrency limit's places (0: a bucket); request.cost
	                               is then the places to hold */
	int64 lease_us;             /* a concurrency limit's lease (0: held until the
	                               transaction ends) */
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
	/* Concurrency limits: takes (take true) `places` of the `max_held`
	 * places of key (name, key) until the caller's (sub)transaction ends,
	 * or counts whether it could (see holds.hpp).  NULL if the engine keeps
	 * none (rate_limit_define_concurrency refuses its storage). */
	core::Decision (*hold)(text *name, text *key, int max_held, int places, bool take);
};

extern const BucketEngine kTableEngine;  /* storage.cpp */
extern const BucketEngine kMemoryEngine; /* memory_engine.cpp */

/* Every engine, the default (the table) first. */
inline const BucketEngine *const kEngines[] = {&kTableEngine, &kMemoryEngine};

/* The engine storage value `storage` (`bytes` long) chooses, or NULL. */
const BucketEngine *EngineNamed(const char *storage, int bytes);

/* Runs body(context) in a subtransaction of the caller's: kept when it
 * returns true; rolled back when it returns false or raises an error, which
 * undoes whatever it wrote and took (a memory take too), gives back the row
 * locks it took, and leaves only the transaction id it may have taken.
 * Returns what body returned. */
bool InSubtransaction(bool (*body)(void *context), void *context);

} /* namespace ratelimit::pg */

#endif

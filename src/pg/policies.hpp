/*
 * src/pg/policies.hpp
 *
 * Named policies: the rate and burst stored in ratelimit.policies by
 * rate_limit_define(), cached per backend and dropped from the cache as soon
 * as a change to the table commits.
 */
#ifndef RATELIMIT_PG_POLICIES_HPP
#define RATELIMIT_PG_POLICIES_HPP

#include "pg/pg_includes.hpp"

#include "core/shards.hpp"
#include "core/token_bucket.hpp"
#include "pg/engine.hpp"
#include "pg/fmgr_args.hpp"

namespace ratelimit::pg {

/* Most rows a key may be split over (policies_shards_check). */
constexpr int kMaxShards = core::kMaxShards;

/* A stored policy: its limit (with the balance of a new key), the jitter. */
struct Policy {
	core::Limit limit;   /* has_initial: new keys start with `initial` tokens, not burst */
	double rate;         /* tokens per `per`, as defined */
	Interval per;        /* the period of rate, as defined */
	double max_reserved; /* the most debt a key may carry (0 in a 0.2.0 database) */
	double jitter;       /* 0..1: retry_after stretched by up to this fraction */
	bool fixed_window;
	int64 window_us;            /* fixed_window: the window length */
	bool has_window_start;      /* fixed_window: windows start at window_start_us */
	int64 window_start_us;      /* otherwise each key's windows start at its hash */
	int shards;                 /* rows a key is split over (1: not split) */
	const BucketEngine *engine; /* keeps its buckets: the storage it names */
	bool enforce;               /* false: report-only (limit.penalty_us is then 0) */
	int max_held;               /* a concurrency limit: the places a key holds at once
	                               (limit.burst); 0 for a token bucket */
	int64 lease_us;             /* a concurrency limit's lease; 0: held until the
	                               transaction ends */
};

/* The most places a concurrency limit holds at once per key
 * (sql/src/limits.sql's rl_max_held). */
constexpr int kMaxHeld = RATELIMIT_MAX_HELD;

/* Registers the relcache callback that marks the policy cache stale. */
void RegisterPolicyCallbacks();

/* Policy `name` (already checked: not empty, not too long).  Raises 42704
 * if no such policy is defined. */
Policy LookupPolicy(text *name);

/* Like LookupPolicy, but false instead of an error when it is not defined. */
bool FindPolicy(text *name, Policy *policy);

/* The limit policy `policy` sets for bucket (name, key): for fixed windows,
 * where that key's windows start. */
core::Limit PolicyLimit(const Policy &policy, text *name, text *key);

/* What a take or check of `cost` under `policy` asks: reserving within
 * `max_wait` seconds (0: no reservation) as far as the policy's
 * max_reserved allows. */
core::Request PolicyRequest(const Policy &policy, double cost, double max_wait);

/* The places a take or check of `cost` holds under concurrency limit
 * `policy` (max_held > 0): raises 22023 for a cost that is not a whole
 * number from 0 to max_held. */
int PolicyPlaces(const Policy &policy, text *name, double cost);
/* The same check, of a concurrency limit of `max_held` places. */
int CheckPlaces(text *name, double cost, int max_held);

/* A take or check of a report-only policy that `decision` denies: allowed
 * all the same, with every other column the denial's.  Nothing else for an
 * enforced policy or a grant.  Returns whether it was such a would-be
 * denial. */
bool ReportOnly(const Policy &policy, core::Decision *decision);

/* What a decision row says of policy `name`: its rate per its per. */
LimitLabel PolicyLabel(const Policy &policy, text *name);

/* Called by the trigger on ratelimit.policies: every backend's cache is
 * invalidated when the changing transaction commits (this one's at once). */
void PoliciesChanged(Oid policies_relid);

/* A row of ratelimit.policies written (old_row NULL for an insert): if it
 * gives its buckets another limit than before, its engine hears of it
 * (BucketEngine::policy_written). */
void PolicyWritten(TupleDesc desc, HeapTuple old_row, HeapTuple new_row);

/* The engine that keeps the buckets of name `name`: its policy's, or the
 * table, which keeps the buckets of explicit calls. */
const BucketEngine &EngineOfName(text *name);

} /* namespace ratelimit::pg */

#endif

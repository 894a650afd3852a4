/*
 * src/pg/sharding.hpp
 *
 * Keys of a sharded policy, split over several rows of ratelimit.buckets:
 * the PostgreSQL side of src/core/shards.hpp.  It reads shard rows, carries
 * out the core's plan through storage and reports the answer.
 */
#ifndef RATELIMIT_PG_SHARDING_HPP
#define RATELIMIT_PG_SHARDING_HPP

#include "pg/pg_includes.hpp"

#include "core/token_bucket.hpp"
#include "pg/policies.hpp"
#include "pg/storage.hpp"

namespace ratelimit::pg {

/* The row key of shard `shard` of bucket key `key`: the key, U+001F, the
 * shard's number.  Shard rows are ordinary buckets of the same name. */
text *ShardKey(text *key, int shard);

/* The inverse of ShardKey: false unless `row_key` ends in U+001F and a
 * shard number below `shards` as ShardKey writes it; then *key is the bucket
 * key (palloc'd) and *shard the number. */
bool SplitShardKey(text *row_key, int shards, text **key, int *shard);

/*
 * A take or check (`kind`) of `cost` on a key split over policy.shards rows
 * under `limit`, the whole key's: looks, without waiting, at two shards
 * picked at random and takes from the richer.  When neither can serve it
 * alone, it looks at every shard and takes from the richest, as few as can
 * serve it (all or nothing, locked in canonical order), or denies when
 * together they cannot.  Callers of a hot key thus spread over the rows
 * instead of queueing on one.  remaining and reset_after cover the shards
 * looked at: the two, unless they hold less than the cost or one token
 * (core::NeedsEveryShard), then every shard; a denial has looked at every
 * shard, and its retry_after is exact for the whole key (core::ShardOutcome).
 * A request that may reserve and that the shards cannot serve from tokens
 * is reserved on the richest shard, within the shard's share of
 * max_reserved and within max_wait; its retry_after is that shard's wait.
 * refill_after is the time until the shards counted in remaining together
 * hold one more whole token.
 */
core::Decision ShardedDecision(text *name, text *key, const Policy &policy,
                               const core::Limit &limit, Operation::Kind kind,
                               const core::Request &request);

/*
 * A refund of a key split over several rows: `amount` goes to the shards
 * with room for it, shard after shard in canonical order, so that exactly
 * what the whole limit can hold is given back (never more than its burst).
 * remaining and reset_after cover every shard.
 */
core::Decision ShardedRefund(text *name, text *key, const Policy &policy, const core::Limit &limit,
                             double amount);

/* Deletes every shard row of `key` under `policy` (none if it is not
 * sharded), in canonical order.  True if any existed. */
bool ResetShards(text *name, text *key, const Policy &policy);

} /* namespace ratelimit::pg */

#endif

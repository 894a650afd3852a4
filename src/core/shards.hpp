/*
 * src/core/shards.hpp
 *
 * Hot keys split over several buckets ("shards"): pure C++17, noexcept, no
 * heap, time passed in.  Each of a key's `shards` buckets holds and refills
 * a 1/shards share of its limit, so together they admit what the whole
 * limit admits.  A call looks at two shards and takes from the richer; when
 * neither holds enough alone it takes from both at once.  Every decision
 * goes through Refill and Admits, the rules of a single bucket, so fixed
 * windows and floor rates hold for shards as they do for whole keys.
 */
#ifndef RATELIMIT_CORE_SHARDS_HPP
#define RATELIMIT_CORE_SHARDS_HPP

#include <cstdint>

#include "token_bucket.hpp"

namespace ratelimit::core {

/* One shard's share of a limit split over `shards` buckets. */
struct ShardShare {
	Limit limit;    /* rate, burst and floor_rate divided by shards; windows as they are */
	double initial; /* a new shard's starting balance: the key's divided by shards */
};

ShardShare ShareOfShard(const Limit &whole, double initial, int shards) noexcept;

/* How a call is spread over the two shards it looked at. */
struct ShardPlan {
	enum Kind {
		kDeny,   /* neither alone nor both together can serve it */
		kRicher, /* all of the cost from the richer shard */
		kSplit   /* what the richer holds from it, the rest from the other */
	} kind;
	int richer;     /* the shard (0 or 1) that holds more; ties: 0 */
	double cost[2]; /* what to take from each shard (0 from one left alone) */
	Bucket
	    after[2]; /* each shard once the plan is carried out (denied: as seen, refilled to now) */
};

/* The plan for taking `cost` (no reservation) from two shards whose stored
 * states are `seen`, each limited by `shard`, at `now_us`. */
ShardPlan PlanShards(const Bucket seen[2], const Limit &shard, double cost,
                     std::int64_t now_us) noexcept;

/* Like PlanShards, but only a split with `richer` as the richer shard, or a
 * denial: what is left once a take from the richer alone was denied on its
 * latest state (`seen[richer]`). */
ShardPlan PlanSplit(const Bucket seen[2], int richer, const Limit &shard, double cost,
                    std::int64_t now_us) noexcept;

/*
 * The answer to a sharded call of `cost` whose two shards stand at `after`
 * once it is done.  remaining estimates the whole key from the two shards
 * seen: their mean times `shards`.  retry_after, when denied, is the
 * shortest whole-microsecond wait after which PlanShards on these states
 * grants the same cost (+inf if it never will); reset_after is the time
 * until both shards are full.
 */
Decision ShardOutcome(bool allowed, const Bucket after[2], const Limit &shard, int shards,
                      double cost, std::int64_t now_us) noexcept;

/* The canonical order of shard numbers: the bytewise order of their decimal
 * forms (1, 10, 11, 2, ...), which is the order of their buckets' keys and
 * so the order in which rows are locked.  Negative, 0 or positive. */
int CompareShards(int a, int b) noexcept;

/* Shard numbers 0 .. shards - 1 in canonical order, into order[0 .. shards - 1]. */
void ShardOrder(int shards, int *order) noexcept;

} /* namespace ratelimit::core */

#endif

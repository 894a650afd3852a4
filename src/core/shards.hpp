/*
 * src/core/shards.hpp
 *
 * Hot keys split over several buckets ("shards"): pure C++17, noexcept, no
 * heap, time passed in.  Each of a key's `shards` buckets holds and refills
 * a 1/shards share of its limit, so together they admit what the whole
 * limit admits.  A call looks at two shards and takes from the richer; when
 * that cannot serve it, it looks at every shard and takes from the richest,
 * as few as can serve it, so that it is denied only when the whole limit
 * cannot serve it.  A call that may reserve, when the tokens of the shards
 * cannot serve it, reserves the whole cost on the richest shard, within
 * that shard's share of the debt cap.  Every decision
 * goes through Refill and Admits, the rules of a single bucket, so fixed
 * windows and floor rates hold for shards as they do for whole keys.
 */
#ifndef RATELIMIT_CORE_SHARDS_HPP
#define RATELIMIT_CORE_SHARDS_HPP

#include <cstdint>

#include "token_bucket.hpp"

namespace ratelimit::core {

/* One shard's share of limit `whole` split over `shards` buckets: rate,
 * burst, floor_rate and a new key's initial balance divided by shards;
 * windows and the penalty box as they are. */
Limit ShareOfShard(const Limit &whole, int shards) noexcept;

/* Most shards a key may be split over. */
constexpr int kMaxShards = 64;

/* How a call is spread over the shards it looks at. */
struct ShardPlan {
	enum Kind {
		kDeny,    /* together they cannot serve it */
		kOne,     /* all of the cost from the richest shard */
		kSeveral, /* all the richest hold, then the next richest, until it is paid */
		kReserve  /* all of the cost from the richest, by reservation */
	} kind;
	int richest;              /* the shard that holds most; ties: the first */
	double cost[kMaxShards];  /* what to take from each shard (0 from one left alone) */
	Bucket after[kMaxShards]; /* each shard once the plan is carried out (denied: as
	                             seen, refilled to now) */
	double wait;              /* kReserve: seconds until the reserved work may start */
};

/*
 * The plan for taking request.cost from `count` shards (1 to kMaxShards)
 * whose stored states are `seen`, each limited by `shard`, at `now_us`:
 * from the richest alone if it can serve it from its tokens, otherwise from
 * the richest ones, as few as can (shard order breaks ties), all or
 * nothing; failing that, when the request may reserve (a shard's share of
 * the cap: see ShareOfRequest), the whole cost from the richest by
 * reservation.  Over every shard of a key it denies only when the key
 * cannot serve the cost from tokens and the richest shard cannot reserve it.
 */
ShardPlan PlanShards(const Bucket *seen, int count, const Limit &shard, const Request &request,
                     std::int64_t now_us) noexcept;

/* One shard's share of a request on a key split over `shards`: its
 * max_reserved divided by shards (max_wait and cost as they are). */
Request ShareOfRequest(const Request &whole, int shards) noexcept;

/*
 * The answer to a sharded call of `request` that looked at `count` shards,
 * standing at `after` once it is done.  remaining is what they hold
 * together: the key's when they are all of its shards, otherwise at least
 * that much is left (a shard that looked was not counted holds as much as
 * it did, or more).  reset_after is the time until all of them are full;
 * refill_after the time until together they hold one more whole token
 * (NextWholeToken of remaining, capped at their bursts together), exact for
 * the shards counted.  retry_after, when denied, is the shortest
 * whole-microsecond wait after which PlanShards on these states grants the
 * same request (+inf if it never will): exact, reservation included; when
 * granted it is 0 (a reservation's wait is the plan's).
 */
Decision ShardOutcome(bool allowed, const Bucket *after, int count, const Limit &shard,
                      const Request &request, std::int64_t now_us) noexcept;

/* Whether a call that saw only some shards must count them all: what the
 * ones it saw hold (`seen_remaining`) is below its cost, or below one token,
 * so the key may still serve it while they show too little. */
bool NeedsEveryShard(double seen_remaining, double cost) noexcept;

/* The canonical order of shard numbers: the bytewise order of their decimal
 * forms (1, 10, 11, 2, ...), which is the order of their buckets' keys and
 * so the order in which rows are locked.  Negative, 0 or positive. */
int CompareShards(int a, int b) noexcept;

/* Shard numbers 0 .. shards - 1 in canonical order, into order[0 .. shards - 1]. */
void ShardOrder(int shards, int *order) noexcept;

} /* namespace ratelimit::core */

#endif

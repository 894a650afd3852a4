/*
 * src/core/shards.cpp
 *
 * The two-choice plan over a key's shards.  A plan is decided on the two
 * shards' balances refilled to now (Refill) with the one admission rule
 * (Admits); the waits it reports are searched on the same plan at later
 * instants, so whatever refill a shard has (continuous, fixed windows, a
 * floor rate, capped at its burst), "wait retry_after, then retry" is granted.
 */
#include "shards.hpp"

#include <cmath>
#include <limits>

#include "no_postgres.hpp"

namespace ratelimit::core {

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr double kMicros = static_cast<double>(kMicrosPerSecond);
constexpr std::int64_t kEndOfTime = std::numeric_limits<std::int64_t>::max();

/* The kind, richer shard and costs of a plan on balances `tokens`; with
 * `richer` >= 0 only a split with that shard as the richer (or a denial). */
ShardPlan
PlanOnBalances(const double tokens[2], int richer, const Limit &shard, double cost) noexcept
{
	ShardPlan plan{};
	plan.kind = ShardPlan::kDeny;
	const bool split_only = richer >= 0;
	if (!split_only)
		richer = tokens[1] > tokens[0] ? 1 : 0;
	const int other = 1 - richer;
	plan.richer = richer;
	if (!split_only && Admits(tokens[richer], shard, Request::Plain(cost))) {
		plan.kind = ShardPlan::kRicher;
		plan.cost[richer] = cost;
		return plan;
	}
	/* All the richer holds (never more than the cost), the rest from the other. */
	const double from_richer = cost < tokens[richer] ? cost : tokens[richer];
	const double from_other = cost - from_richer;
	if (from_richer > 0.0 && Admits(tokens[richer], shard, Request::Plain(from_richer)) &&
	    Admits(tokens[other], shard, Request::Plain(from_other))) {
		plan.kind = ShardPlan::kSplit;
		plan.cost[richer] = from_richer;
		plan.cost[other] = from_other;
	}
	return plan;
}

ShardPlan
Plan(const Bucket seen[2], int richer, const Limit &shard, double cost,
     std::int64_t now_us) noexcept
{
	const double tokens[2] = {Refill(seen[0], shard, now_us).tokens,
	                          Refill(seen[1], shard, now_us).tokens};
	ShardPlan plan = PlanOnBalances(tokens, richer, shard, cost);
	for (int s = 0; s < 2; s++) {
		const double take = plan.kind == ShardPlan::kDeny ? 0.0 : plan.cost[s];
		plan.after[s] = Decide(seen[s], shard, Request::Plain(take), now_us).next;
	}
	return plan;
}

/* Whether a plan on `states` at `at_us` would serve `cost`. */
bool
Grants(const Bucket states[2], const Limit &shard, double cost, std::int64_t at_us) noexcept
{
	const double tokens[2] = {Refill(states[0], shard, at_us).tokens,
	                          Refill(states[1], shard, at_us).tokens};
	return PlanOnBalances(tokens, -1, shard, cost).kind != ShardPlan::kDeny;
}

/* Whole microseconds until `state` holds all it will ever hold: its burst,
 * the floor level when only a floor refills it, or what it has now when
 * nothing does.  Exact (Decide's own wait), or too far off to be. */
double
MicrosToSettle(const Bucket &state, const Limit &shard, std::int64_t now_us) noexcept
{
	const double settled = Refill(state, shard, kEndOfTime).tokens;
	if (!(settled > Refill(state, shard, now_us).tokens))
		return 0.0;
	return Decide(state, shard, Request::Plain(settled), now_us).retry_after * kMicros;
}

/*
 * The smallest wait w (whole µs) after which Grants() holds for `states`.
 * A plan can only change while a shard still refills, so if it does not
 * grant once both have settled it never will.  In between, a bisection keeps
 * "denied at lo, granted at hi" and ends with hi = lo + 1: waiting hi is
 * enough and a microsecond less is not.
 */
double
RetryMicros(const Bucket states[2], const Limit &shard, double cost, std::int64_t now_us) noexcept
{
	if (Grants(states, shard, cost, now_us))
		return 0.0;
	/* The last instant there is: waits end there at the latest. */
	const std::int64_t room = kEndOfTime - (now_us > 0 ? now_us : 0);
	double settle = MicrosToSettle(states[0], shard, now_us);
	const double settle_other = MicrosToSettle(states[1], shard, now_us);
	if (settle_other > settle)
		settle = settle_other;
	settle = std::ceil(settle); /* whole µs, back from seconds */
	std::int64_t hi = settle < static_cast<double>(room) ? static_cast<std::int64_t>(settle) : room;
	if (hi < 1)
		hi = 1;
	if (!Grants(states, shard, cost, now_us + hi)) {
		if (!(shard.rate > 0.0) || !(cost <= 2.0 * shard.burst))
			return kInfinity;
		/* It gets there, but only beyond the last int64 microsecond. */
		return std::numeric_limits<double>::max();
	}
	std::int64_t lo = 0;
	while (hi - lo > 1) {
		const std::int64_t mid = lo + (hi - lo) / 2;
		if (Grants(states, shard, cost, now_us + mid))
			hi = mid;
		else
			lo = mid;
	}
	return static_cast<double>(hi);
}

/* The decimal digits of `n` (>= 0), most significant first; how many. */
int
Decimal(int n, char digits[12]) noexcept
{
	char reversed[12];
	int count = 0;
	unsigned int v = static_cast<unsigned int>(n);
	do {
		reversed[count++] = static_cast<char>('0' + v % 10);
		v /= 10;
	} while (v > 0);
	for (int i = 0; i < count; i++)
		digits[i] = reversed[count - 1 - i];
	return count;
}

} /* namespace */

ShardShare
ShareOfShard(const Limit &whole, double initial, int shards) noexcept
{
	ShardShare share{whole, initial / shards};
	share.limit.rate /= shards;
	share.limit.burst /= shards;
	share.limit.floor_rate /= shards;
	return share;
}

ShardPlan
PlanShards(const Bucket seen[2], const Limit &shard, double cost, std::int64_t now_us) noexcept
{
	return Plan(seen, -1, shard, cost, now_us);
}

ShardPlan
PlanSplit(const Bucket seen[2], int richer, const Limit &shard, double cost,
          std::int64_t now_us) noexcept
{
	return Plan(seen, richer, shard, cost, now_us);
}

Decision
ShardOutcome(bool allowed, const Bucket after[2], const Limit &shard, int shards, double cost,
             std::int64_t now_us) noexcept
{
	Decision result{};
	result.allowed = allowed;
	double sum = 0.0;
	for (int s = 0; s < 2; s++) {
		const Decision look = Decide(after[s], shard, Request::Plain(0.0), now_us);
		sum += look.remaining;
		if (look.reset_after > result.reset_after)
			result.reset_after = look.reset_after;
	}
	result.remaining = sum / 2.0 * shards;
	if (!allowed)
		result.retry_after = RetryMicros(after, shard, cost, now_us) / kMicros;
	return result;
}

int
CompareShards(int a, int b) noexcept
{
	char x[12];
	char y[12];
	const int x_len = Decimal(a, x);
	const int y_len = Decimal(b, y);
	for (int i = 0; i < x_len && i < y_len; i++)
		if (x[i] != y[i])
			return x[i] < y[i] ? -1 : 1;
	return (x_len > y_len) - (x_len < y_len);
}

void
ShardOrder(int shards, int *order) noexcept
{
	for (int s = 0; s < shards; s++) {
		order[s] = s;
		for (int j = s; j > 0 && CompareShards(order[j - 1], order[j]) > 0; j--) {
			const int swap = order[j];
			order[j] = order[j - 1];
			order[j - 1] = swap;
		}
	}
}

} /* namespace ratelimit::core */

/*
 * src/core/shards.cpp
 *
 * Plans over a key's shards: the richest of those looked at serves a call
 * alone when it can, the richest ones together otherwise.  A plan is decided
 * on the shards' balances refilled to now (Refill) with the one admission rule
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

/* The kind of a plan on balances `tokens` of `count` shards, with what it
 * takes from each into take[0 .. count - 1]; *richest: the richest shard. */
ShardPlan::Kind
Spread(const double *tokens, int count, const Limit &shard, double cost, double *take,
       int *richest) noexcept
{
	/* Shards from the richest down; the first of equals first. */
	int order[kMaxShards] = {};
	for (int s = 0; s < count; s++) {
		take[s] = 0.0;
		order[s] = s;
		for (int j = s; j > 0 && tokens[order[j]] > tokens[order[j - 1]]; j--) {
			const int swap = order[j];
			order[j] = order[j - 1];
			order[j - 1] = swap;
		}
	}
	*richest = order[0];
	if (Admits(tokens[order[0]], shard, Request::Plain(cost))) {
		take[order[0]] = cost;
		return ShardPlan::kOne;
	}
	/* All each holds (never more than is left to pay), richest first. */
	double left = cost;
	for (int i = 0; i < count && left > 0.0; i++) {
		const int s = order[i];
		const double piece = left < tokens[s] ? left : tokens[s];
		if (!(piece > 0.0) || !Admits(tokens[s], shard, Request::Plain(piece)))
			break;
		take[s] = piece;
		left -= piece;
	}
	if (left > 0.0) {
		for (int s = 0; s < count; s++)
			take[s] = 0.0;
		return ShardPlan::kDeny;
	}
	return ShardPlan::kSeveral;
}

/* Whether a plan on `states` at `at_us` would serve `cost`. */
bool
Grants(const Bucket *states, int count, const Limit &shard, double cost,
       std::int64_t at_us) noexcept
{
	double tokens[kMaxShards] = {};
	double take[kMaxShards];
	int richest = 0;
	for (int s = 0; s < count; s++)
		tokens[s] = Refill(states[s], shard, at_us).tokens;
	return Spread(tokens, count, shard, cost, take, &richest) != ShardPlan::kDeny;
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
 * grant once all have settled it never will.  In between, a bisection keeps
 * "denied at lo, granted at hi" and ends with hi = lo + 1: waiting hi is
 * enough and a microsecond less is not.
 */
double
RetryMicros(const Bucket *states, int count, const Limit &shard, double cost,
            std::int64_t now_us) noexcept
{
	if (Grants(states, count, shard, cost, now_us))
		return 0.0;
	/* The last instant there is: waits end there at the latest. */
	const std::int64_t room = kEndOfTime - (now_us > 0 ? now_us : 0);
	double settle = 0.0;
	for (int s = 0; s < count; s++) {
		const double micros = MicrosToSettle(states[s], shard, now_us);
		if (micros > settle)
			settle = micros;
	}
	settle = std::ceil(settle); /* whole µs, back from seconds */
	std::int64_t hi = settle < static_cast<double>(room) ? static_cast<std::int64_t>(settle) : room;
	if (hi < 1)
		hi = 1;
	if (!Grants(states, count, shard, cost, now_us + hi)) {
		if (!(shard.rate > 0.0) || !(cost <= count * shard.burst))
			return kInfinity;
		/* It gets there, but only beyond the last int64 microsecond. */
		return std::numeric_limits<double>::max();
	}
	std::int64_t lo = 0;
	while (hi - lo > 1) {
		const std::int64_t mid = lo + (hi - lo) / 2;
		if (Grants(states, count, shard, cost, now_us + mid))
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
PlanShards(const Bucket *seen, int count, const Limit &shard, double cost,
           std::int64_t now_us) noexcept
{
	ShardPlan plan{};
	double tokens[kMaxShards] = {};
	for (int s = 0; s < count; s++)
		tokens[s] = Refill(seen[s], shard, now_us).tokens;
	plan.kind = Spread(tokens, count, shard, cost, plan.cost, &plan.richest);
	for (int s = 0; s < count; s++)
		plan.after[s] = Decide(seen[s], shard, Request::Plain(plan.cost[s]), now_us).next;
	return plan;
}

Decision
ShardOutcome(bool allowed, const Bucket *after, int count, const Limit &shard, double cost,
             std::int64_t now_us) noexcept
{
	Decision result{};
	result.allowed = allowed;
	for (int s = 0; s < count; s++) {
		const Decision look = Decide(after[s], shard, Request::Plain(0.0), now_us);
		result.remaining += look.remaining;
		if (look.reset_after > result.reset_after)
			result.reset_after = look.reset_after;
	}
	if (!allowed)
		result.retry_after = RetryMicros(after, count, shard, cost, now_us) / kMicros;
	return result;
}

bool
NeedsEveryShard(double seen_remaining, double cost) noexcept
{
	return !(seen_remaining >= cost && seen_remaining >= 1.0);
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

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

/* The kind of the plan for `request` on `states` at `at_us`, with what it
 * takes from each into take[0 .. count - 1]; *richest: the richest shard. */
ShardPlan::Kind
PlanAt(const Bucket *states, int count, const Limit &shard, const Request &request,
       std::int64_t at_us, double *take, int *richest) noexcept
{
	double tokens[kMaxShards] = {};
	for (int s = 0; s < count; s++)
		tokens[s] = Refill(states[s], shard, at_us).tokens;
	const ShardPlan::Kind kind = Spread(tokens, count, shard, request.cost, take, richest);
	if (kind != ShardPlan::kDeny || !request.reserve ||
	    !Admitted(states[*richest], shard, request, at_us))
		return kind;
	take[*richest] = request.cost;
	return ShardPlan::kReserve;
}

/* Whether a plan on `states` at `at_us` would serve `request`. */
bool
Grants(const Bucket *states, int count, const Limit &shard, const Request &request,
       std::int64_t at_us) noexcept
{
	double take[kMaxShards];
	int richest = 0;
	return PlanAt(states, count, shard, request, at_us, take, &richest) != ShardPlan::kDeny;
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
 * The smallest wait w (whole µs) after which `holds(now_us + w)` is true,
 * for a condition that, once true, stays true as `states` refill (they only
 * gain).  Nothing changes once every shard has settled and caught up with
 * its stamp, so if it does not hold then it never will: -1, or -2 when that
 * instant lies beyond the last int64 microsecond.  In between, a bisection
 * keeps "false at lo, true at hi" and ends with hi = lo + 1: waiting hi is
 * enough and a microsecond less is not.
 */
template <typename Condition>
std::int64_t
FirstMicros(const Bucket *states, int count, const Limit &shard, std::int64_t now_us,
            Condition holds) noexcept
{
	if (holds(now_us))
		return 0;
	/* The last instant there is: waits end there at the latest. */
	const std::int64_t room = kEndOfTime - (now_us > 0 ? now_us : 0);
	double settle = 0.0;
	for (int s = 0; s < count; s++) {
		const double micros = MicrosToSettle(states[s], shard, now_us);
		const double lag = static_cast<double>(states[s].stamp_us) - static_cast<double>(now_us);
		if (micros > settle)
			settle = micros;
		if (lag > settle)
			settle = lag;
	}
	settle = std::ceil(settle); /* whole µs, back from seconds */
	const bool beyond = !(settle < static_cast<double>(room));
	std::int64_t hi = beyond ? room : static_cast<std::int64_t>(settle);
	if (hi < 1)
		hi = 1;
	if (!holds(now_us + hi))
		return beyond ? -2 : -1;
	std::int64_t lo = 0;
	while (hi - lo > 1) {
		const std::int64_t mid = lo + (hi - lo) / 2;
		if (holds(now_us + mid))
			hi = mid;
		else
			lo = mid;
	}
	return hi;
}

/* The smallest whole-µs wait after which Grants() holds for `states`
 * (+inf if never; the largest double if only beyond the last int64 µs). */
double
RetryMicros(const Bucket *states, int count, const Limit &shard, const Request &request,
            std::int64_t now_us) noexcept
{
	const std::int64_t wait = FirstMicros(states, count, shard, now_us, [&](std::int64_t at) {
		return Grants(states, count, shard, request, at);
	});
	if (wait >= 0)
		return static_cast<double>(wait);
	if (wait == -2 && shard.rate > 0.0 && (request.cost <= count * shard.burst || request.reserve))
		/* It gets there, but only beyond the last int64 microsecond. */
		return std::numeric_limits<double>::max();
	return kInfinity;
}

/* What `states` hold together at `at_us`. */
double
HeldTogether(const Bucket *states, int count, const Limit &shard, std::int64_t at_us) noexcept
{
	double held = 0.0;
	for (int s = 0; s < count; s++)
		held += Refill(states[s], shard, at_us).tokens;
	return held;
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

Limit
ShareOfShard(const Limit &whole, int shards) noexcept
{
	Limit share = whole;
	share.rate /= shards;
	share.burst /= shards;
	share.floor_rate /= shards;
	share.initial /= shards;
	return share;
}

ShardPlan
PlanShards(const Bucket *seen, int count, const Limit &shard, const Request &request,
           std::int64_t now_us) noexcept
{
	ShardPlan plan{};
	plan.kind = PlanAt(seen, count, shard, request, now_us, plan.cost, &plan.richest);
	for (int s = 0; s < count; s++) {
		const bool reserved = plan.kind == ShardPlan::kReserve && s == plan.richest;
		const Decision d =
		    Decide(seen[s], shard, reserved ? request : Request::Plain(plan.cost[s]), now_us);
		plan.after[s] = d.next;
		if (reserved)
			plan.wait = d.retry_after;
	}
	return plan;
}

Request
ShareOfRequest(const Request &whole, int shards) noexcept
{
	Request share = whole;
	share.max_reserved /= shards;
	return share;
}

Decision
ShardOutcome(bool allowed, const Bucket *after, int count, const Limit &shard,
             const Request &request, std::int64_t now_us) noexcept
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
		result.retry_after = RetryMicros(after, count, shard, request, now_us) / kMicros;
	/* Until the shards counted hold one more whole token together, or all
	 * their bursts (added up as HeldTogether adds them). */
	double full = 0.0;
	for (int s = 0; s < count; s++)
		full += shard.burst;
	const double target = NextWholeToken(result.remaining, full);
	if (result.remaining < target) {
		const std::int64_t wait = FirstMicros(after, count, shard, now_us, [&](std::int64_t at) {
			return HeldTogether(after, count, shard, at) >= target;
		});
		result.refill_after = wait >= 0    ? static_cast<double>(wait) / kMicros
		                      : wait == -2 ? std::numeric_limits<double>::max() / kMicros
		                                   : kInfinity;
	}
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

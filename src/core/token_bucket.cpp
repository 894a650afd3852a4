/*
 * src/core/token_bucket.cpp
 *
 * The token-bucket algebra.  Time is an int64 count of microseconds (the
 * caller's epoch); tokens are doubles, so fractional refill is never lost.
 * Waiting times are rounded up to whole microseconds and checked against the
 * same refill formula, so "wait retry_after, then retry" always succeeds.
 */
#include "token_bucket.hpp"

#include <cmath>
#include <limits>

#include "no_postgres.hpp"

namespace ratelimit::core {

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr double kMicros = static_cast<double>(kMicrosPerSecond);
/* Beyond 2^53 µs doubles no longer hold whole microseconds. */
constexpr double kExactMicrosLimit = 9007199254740992.0;

bool
IsFiniteNonNegative(double v) noexcept
{
	return std::isfinite(v) && v >= 0.0;
}

/* Tokens credited for `elapsed_us` microseconds: the one refill formula. */
double
Credit(double rate, double elapsed_us) noexcept
{
	return rate * (elapsed_us / kMicros);
}

/* Whole microseconds until `tokens` reaches `target` at `rate` (+inf if never). */
double
MicrosUntil(double tokens, double target, double rate) noexcept
{
	if (!(tokens < target))
		return 0.0;
	if (!(rate > 0.0))
		return kInfinity;
	double us = std::ceil((target - tokens) / rate * kMicros);
	if (!(us < kExactMicrosLimit))
		return us; /* far future (or +inf): whole-µs exactness is moot */
	/* Rounding may leave the credit a hair short; a few µs more settle it. */
	for (int i = 0; i < 8 && tokens + Credit(rate, us) < target; i++)
		us += 1.0;
	return us;
}

} /* namespace */

Status
Validate(const Limit &limit, const Request &request) noexcept
{
	if (!IsFiniteNonNegative(request.cost))
		return Status::kCostInvalid;
	if (!IsFiniteNonNegative(limit.rate))
		return Status::kRateInvalid;
	if (!(std::isfinite(limit.burst) && limit.burst > 0.0))
		return Status::kBurstInvalid;
	if (request.debt_capped && !IsFiniteNonNegative(request.max_reserved))
		return Status::kMaxReservedInvalid;
	if (!request.reserve && request.cost > limit.burst)
		return Status::kCostExceedsBurst;
	if (request.reserve && request.debt_capped &&
		request.cost > limit.burst + request.max_reserved)
		return Status::kCostExceedsDebtCap;
	return Status::kOk;
}

Bucket
FullBucket(const Limit &limit, std::int64_t now_us) noexcept
{
	return Bucket{limit.burst, now_us};
}

Bucket
Refill(const Bucket &stored, const Limit &limit, std::int64_t now_us) noexcept
{
	double tokens = stored.tokens < limit.burst ? stored.tokens : limit.burst;
	std::int64_t elapsed = 0;
	if (now_us <= stored.stamp_us)
		return Bucket{tokens, stored.stamp_us};
	if (__builtin_sub_overflow(now_us, stored.stamp_us, &elapsed))
		return Bucket{limit.burst, now_us};
	double room = limit.burst - tokens;
	double added = Credit(limit.rate, static_cast<double>(elapsed));
	tokens = added >= room ? limit.burst : tokens + added;
	if (tokens > limit.burst)
		tokens = limit.burst;
	return Bucket{tokens, now_us};
}

double
SecondsUntil(double tokens, double target, double rate) noexcept
{
	return MicrosUntil(tokens, target, rate) / kMicros;
}

Decision
Decide(const Bucket &stored, const Limit &limit, const Request &request,
	   std::int64_t now_us) noexcept
{
	Bucket current = Refill(stored, limit, now_us);
	/* After a backward clock step refill resumes at the stamp, not at now. */
	double lag_us = static_cast<double>(current.stamp_us - now_us);
	if (now_us > current.stamp_us)
		lag_us = 0.0;
	double after = current.tokens - request.cost;

	bool allowed;
	if (after >= 0.0)
		allowed = true;
	else if (!request.reserve || !(limit.rate > 0.0))
		allowed = false; /* without refill a debt is never repaid */
	else
		allowed = !(request.debt_capped && -after > request.max_reserved);

	Decision d{};
	d.allowed = allowed;
	if (allowed) {
		d.remaining = after;
		d.write = request.cost > 0.0;
		d.next = Bucket{after, current.stamp_us};
		d.retry_after =
			after >= 0.0 ? 0.0 : (lag_us + MicrosUntil(after, 0.0, limit.rate)) / kMicros;
	} else {
		double target = request.cost;
		if (request.reserve && request.debt_capped && limit.rate > 0.0)
			target = request.cost - request.max_reserved;
		d.remaining = current.tokens;
		d.write = false;
		d.next = current;
		d.retry_after = (lag_us + MicrosUntil(current.tokens, target, limit.rate)) / kMicros;
	}
	d.reset_after = d.remaining >= limit.burst
						? 0.0
						: (lag_us + MicrosUntil(d.remaining, limit.burst, limit.rate)) / kMicros;
	return d;
}

} /* namespace ratelimit::core */

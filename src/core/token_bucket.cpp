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
#include "sliding_window.hpp"

namespace ratelimit::core {

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr double kMicros = static_cast<double>(kMicrosPerSecond);
/* Beyond 2^53 µs doubles no longer hold whole microseconds. */
constexpr double kExactMicrosLimit = 9007199254740992.0;
/* The longest finite wait, in µs: what a positive rate too slow for float8
 * seconds is reported as. */
constexpr double kLargestWait = std::numeric_limits<double>::max();

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
		/* Far future: whole-µs exactness is moot.  A positive rate gets there
		 * in the end, so the wait stays finite (Infinity means "never"). */
		return us < kLargestWait ? us : kLargestWait;
	/* Rounding may leave the credit a hair short; a few µs more settle it. */
	for (int i = 0; i < 8 && tokens + Credit(rate, us) < target; i++)
		us += 1.0;
	return us;
}

/* a + b for waits in µs: +inf ("never") stays so, a finite sum too large for
 * float8 becomes the longest finite wait. */
double
AddWaits(double a, double b) noexcept
{
	if (std::isinf(a) || std::isinf(b))
		return kInfinity;
	double sum = a + b;
	return sum < kLargestWait ? sum : kLargestWait;
}

/* Window arithmetic is done in 128 bits: a window may be as long as int64
 * microseconds allow, and a timestamp minus a phase, or a boundary plus a
 * window, can then leave int64. */
using Wide = __int128;

/* floor(a / b) for b > 0, also for negative a. */
Wide
FloorDiv(Wide a, Wide b) noexcept
{
	Wide q = a / b;
	return (a % b != 0 && a < 0) ? q - 1 : q;
}

/* The first window boundary after `us`. */
Wide
NextBoundary(const Limit &limit, std::int64_t us) noexcept
{
	Wide phase = limit.phase_us;
	return phase + (FloorDiv(Wide(us) - phase, limit.window_us) + 1) * limit.window_us;
}

/* Window boundaries in (from_us, to_us]. */
std::int64_t
BoundariesCrossed(const Limit &limit, std::int64_t from_us, std::int64_t to_us) noexcept
{
	Wide phase = limit.phase_us;
	return static_cast<std::int64_t>(FloorDiv(Wide(to_us) - phase, limit.window_us) -
	                                 FloorDiv(Wide(from_us) - phase, limit.window_us));
}

/* How far ahead of the clock a stamp may be before it restarts at the
 * clock: an hour, or the time refill takes from empty to full if longer;
 * +inf when the bucket never refills. */
double
RestartMicros(const Limit &limit) noexcept
{
	constexpr double kHour = 3600.0 * kMicros;
	double rate = limit.rate > limit.floor_rate ? limit.rate : limit.floor_rate;
	if (!(rate > 0.0))
		return kInfinity;
	double fill = limit.burst / rate * kMicros;
	if (limit.window_us > 0) /* tokens arrive at window boundaries only */
		fill = static_cast<double>(limit.window_us) *
		       (std::ceil(fill / static_cast<double>(limit.window_us)) + 1.0);
	return fill > kHour ? fill : kHour;
}

/* Tokens one window adds. */
double
PerWindow(const Limit &limit) noexcept
{
	return limit.rate * (static_cast<double>(limit.window_us) / kMicros);
}

/* Below this balance refill runs at FastRate(); at most burst. */
double
FloorLevel(const Limit &limit) noexcept
{
	return limit.floor_rate < limit.burst ? limit.floor_rate : limit.burst;
}

double
FastRate(const Limit &limit) noexcept
{
	return limit.floor_rate > limit.rate ? limit.floor_rate : limit.rate;
}

/* Whether the bucket ever gains tokens: without refill a debt is never repaid. */
bool
Refills(const Limit &limit) noexcept
{
	return limit.window_us > 0 ? PerWindow(limit) > 0.0
	                           : limit.rate > 0.0 || limit.floor_rate > 0.0;
}

/* Waits are whole microseconds rounded up, and a few more may settle a
 * rounding short credit: the time cap on debt keeps this much in hand. */
constexpr double kWaitSlackMicros = 16.0;

/* The debt refill repays within `seconds` (>= 0; +inf: any debt), such that
 * the wait until the balance is back at zero never exceeds `seconds`. */
double
RepaidWithin(const Limit &limit, double seconds) noexcept
{
	if (!(seconds < kInfinity))
		return kInfinity;
	if (limit.window_us > 0) {
		/* Whole windows that fit, whatever the phase: the k-th boundary from
		 * now is at most k windows away. */
		const double micros = std::floor(seconds * kMicros);
		const double window = static_cast<double>(limit.window_us);
		double windows = std::floor(micros / window);
		if (windows * window > micros)
			windows -= 1.0;
		return windows > 0.0 ? windows * PerWindow(limit) : 0.0;
	}
	const double usable = seconds - kWaitSlackMicros / kMicros;
	return usable > 0.0 ? FastRate(limit) * usable : 0.0;
}

/* `request` decided at an instant `lag_us` before refill resumes (a stamp
 * ahead of the clock): reserved work then starts that much later, so it has
 * that much less of max_wait. */
Request
Lagging(const Request &request, double lag_us) noexcept
{
	Request lagging = request;
	if (lag_us > 0.0 && request.max_wait < kInfinity) {
		const double left = request.max_wait - lag_us / kMicros;
		lagging.max_wait = left > 0.0 ? left : 0.0;
	}
	return lagging;
}

/* How far `refilled` (Refill's answer at `at_us`) is from earning again. */
double
LagMicros(const Bucket &refilled, std::int64_t at_us) noexcept
{
	return refilled.stamp_us > at_us
	           ? static_cast<double>(refilled.stamp_us) - static_cast<double>(at_us)
	           : 0.0;
}

/* Continuous refill of `tokens` over `elapsed_us`, floor included. */
double
CreditContinuous(const Limit &limit, double tokens, double elapsed_us) noexcept
{
	double level = FloorLevel(limit);
	if (limit.floor_rate > 0.0 && tokens < level) {
		double fast = FastRate(limit);
		double to_level_us = (level - tokens) / fast * kMicros;
		if (elapsed_us <= to_level_us)
			return tokens + Credit(fast, elapsed_us);
		tokens = level;
		elapsed_us -= to_level_us;
	}
	double added = Credit(limit.rate, elapsed_us);
	return added >= limit.burst - tokens ? limit.burst : tokens + added;
}

/* Closed-form guess of the wait until `tokens` (held at `stamp_us`, refilled
 * to now) reach `target`: exact for continuous refill up to rounding, and
 * the right window boundary for fixed windows.  WaitMicros() corrects it. */
double
EstimateMicros(const Limit &limit, std::int64_t stamp_us, std::int64_t now_us, double tokens,
               double target) noexcept
{
	/* After a backward clock step refill resumes at the stamp, not at now. */
	double lag_us =
	    now_us < stamp_us ? static_cast<double>(stamp_us) - static_cast<double>(now_us) : 0.0;
	if (limit.window_us <= 0) {
		double level = FloorLevel(limit);
		if (!(limit.floor_rate > 0.0) || !(tokens < level))
			return AddWaits(lag_us, MicrosUntil(tokens, target, limit.rate));
		double fast = FastRate(limit);
		if (target <= level)
			return AddWaits(lag_us, MicrosUntil(tokens, target, fast));
		return AddWaits(lag_us, AddWaits(MicrosUntil(tokens, level, fast),
		                                 MicrosUntil(level, target, limit.rate)));
	}
	if (!(tokens < target))
		return 0.0;
	double per_window = PerWindow(limit);
	if (!(per_window > 0.0))
		return kInfinity;
	double windows = std::ceil((target - tokens) / per_window);
	std::int64_t base = stamp_us > now_us ? stamp_us : now_us;
	Wide next = NextBoundary(limit, base);
	/* Overflow here is a long wait, not "never": tokens do arrive. */
	double later = (windows - 1.0) * static_cast<double>(limit.window_us);
	return AddWaits(static_cast<double>(next - Wide(now_us)),
	                later < kLargestWait ? later : kLargestWait);
}

/*
 * The smallest whole-microsecond wait w such that `holds` is true of
 * Refill(from, now + w) at now + w: "wait w, then retry" succeeds and
 * w - 1 would not.  `estimate_us` (from the closed form) is corrected against
 * Refill itself, so rounding in either cannot make the answer wrong.
 */
template <typename Condition>
double
WaitMicros(const Bucket &from, const Limit &limit, std::int64_t now_us, double estimate_us,
           Condition holds) noexcept
{
	if (!(estimate_us < kExactMicrosLimit))
		return estimate_us; /* never (+inf), or too far off for whole µs */
	if (limit.window_us > 0) {
		/* Tokens arrive only at boundaries: try the estimated one and its
		 * neighbours, earliest first. */
		Wide first = Wide(static_cast<std::int64_t>(estimate_us)) - 2 * Wide(limit.window_us);
		for (int k = 0; k < 6; k++) {
			Wide wait = first + k * Wide(limit.window_us);
			if (wait < 1)
				continue;
			if (Wide(now_us) + wait > Wide(INT64_MAX))
				break; /* beyond every timestamp */
			std::int64_t at = static_cast<std::int64_t>(Wide(now_us) + wait);
			if (holds(Refill(from, limit, at), at))
				return static_cast<double>(wait);
		}
		return estimate_us;
	}
	std::int64_t wait = estimate_us < 1.0 ? 1 : static_cast<std::int64_t>(estimate_us);
	std::int64_t at = 0;
	if (__builtin_add_overflow(now_us, wait, &at))
		return static_cast<double>(wait);
	for (int i = 0; i < 64 && wait > 1 && holds(Refill(from, limit, at - 1), at - 1); i++) {
		wait--;
		at--;
	}
	for (int i = 0; i < 64 && !holds(Refill(from, limit, at), at); i++) {
		if (__builtin_add_overflow(at, 1, &at))
			break;
		wait++;
	}
	return static_cast<double>(wait);
}

/* Seconds until `tokens` (what `after_call` holds once refilled to now, with
 * its stamp at `stamp_us`) reach `level`: 0 if already there. */
double
SecondsToLevel(const Bucket &after_call, const Limit &limit, std::int64_t now_us,
               std::int64_t stamp_us, double tokens, double level) noexcept
{
	if (tokens >= level)
		return 0.0;
	return WaitMicros(after_call, limit, now_us,
	                  EstimateMicros(limit, stamp_us, now_us, tokens, level),
	                  [level](const Bucket &b, std::int64_t) { return b.tokens >= level; }) /
	       kMicros;
}

/* Seconds until the whole tokens of `tokens` next grow (see Decision). */
double
SecondsToRefill(const Bucket &after_call, const Limit &limit, std::int64_t now_us,
                std::int64_t stamp_us, double tokens) noexcept
{
	return SecondsToLevel(after_call, limit, now_us, stamp_us, tokens,
	                      NextWholeToken(tokens, limit.burst));
}

/* Where a penalty box started at `now_us` ends (saturating). */
std::int64_t
BoxEnd(const Limit &limit, std::int64_t now_us) noexcept
{
	std::int64_t end = INT64_MAX;
	return __builtin_add_overflow(now_us, limit.penalty_us, &end) ? INT64_MAX : end;
}

/* `retry_after` (s), or the time until `next`'s penalty box ends if later. */
double
NoEarlierThanBoxEnd(double retry_after, const Bucket &next, std::int64_t now_us) noexcept
{
	if (next.blocked_until_us <= now_us)
		return retry_after;
	const double box =
	    (static_cast<double>(next.blocked_until_us) - static_cast<double>(now_us)) / kMicros;
	return box > retry_after ? box : retry_after;
}

} /* namespace */

Status
Validate(const Limit &limit, const Request &request) noexcept
{
	if (limit.sliding)
		return SlidingValidate(limit, request);
	if (!IsFiniteNonNegative(request.cost))
		return Status::kCostInvalid;
	if (!IsFiniteNonNegative(limit.rate))
		return Status::kRateInvalid;
	if (!(std::isfinite(limit.burst) && limit.burst > 0.0))
		return Status::kBurstInvalid;
	if (request.debt_capped && !IsFiniteNonNegative(request.max_reserved))
		return Status::kMaxReservedInvalid;
	if (!IsFiniteNonNegative(limit.floor_rate))
		return Status::kFloorRateInvalid;
	if (!(request.max_wait >= 0.0))
		return Status::kMaxWaitInvalid;
	if (!request.reserve && request.cost > limit.burst)
		return Status::kCostExceedsBurst;
	if (request.reserve && request.cost > limit.burst + DebtCap(limit, request))
		return Status::kCostExceedsDebtCap;
	return Status::kOk;
}

double
DebtCap(const Limit &limit, const Request &request) noexcept
{
	if (!request.reserve)
		return 0.0;
	const double by_time = RepaidWithin(limit, request.max_wait);
	if (request.debt_capped && request.max_reserved < by_time)
		return request.max_reserved;
	return by_time;
}

/* Never when the balance left would not be a finite number: a debt beyond
 * float8 could never be repaid, and the row would be locked out for good. */
bool
Admits(double tokens, const Limit &limit, const Request &request) noexcept
{
	double after = tokens - request.cost;
	if (after >= 0.0)
		return true;
	if (!std::isfinite(after))
		return false;
	if (!request.reserve || !Refills(limit))
		return false; /* without refill a debt is never repaid */
	return -after <= DebtCap(limit, request);
}

bool
Admitted(const Bucket &stored, const Limit &limit, const Request &request,
         std::int64_t now_us) noexcept
{
	if (limit.sliding)
		return SlidingDecide(stored, limit, request, now_us).allowed;
	const Bucket current = Refill(stored, limit, now_us);
	return Admits(current.tokens, limit, Lagging(request, LagMicros(current, now_us)));
}

double
NextWholeToken(double tokens, double burst) noexcept
{
	const double whole = tokens > 0.0 ? std::floor(tokens) : 0.0;
	double next = whole + 1.0;
	if (!(next > tokens)) /* beyond 2^53 a token more is not representable */
		next = std::nextafter(tokens, kInfinity);
	return next < burst ? next : burst;
}

Bucket
FullBucket(const Limit &limit, std::int64_t now_us) noexcept
{
	return Bucket{limit.burst, now_us};
}

bool
operator==(const Limit &a, const Limit &b) noexcept
{
	return a.rate == b.rate && a.burst == b.burst && a.window_us == b.window_us &&
	       a.phase_us == b.phase_us && a.floor_rate == b.floor_rate &&
	       a.penalty_us == b.penalty_us && StartTokens(a) == StartTokens(b) &&
	       a.sliding == b.sliding;
}

bool
operator!=(const Limit &a, const Limit &b) noexcept
{
	return !(a == b);
}

double
StartTokens(const Limit &limit) noexcept
{
	return limit.has_initial ? limit.initial : limit.burst;
}

bool
StartsBelowFull(const Limit &limit) noexcept
{
	return limit.has_initial && limit.initial < limit.burst;
}

Bucket
NewBucket(const Limit &limit, std::int64_t now_us) noexcept
{
	return Bucket{StartTokens(limit), now_us};
}

Bucket
Refill(const Bucket &stored, const Limit &limit, std::int64_t now_us) noexcept
{
	if (limit.sliding)
		return SlidingRefill(stored, limit, now_us);
	double tokens = stored.tokens < limit.burst ? stored.tokens : limit.burst;
	std::int64_t elapsed = 0;
	if (now_us <= stored.stamp_us) {
		/* A clock that stepped back: refill pauses until it catches up, so
		 * no time is credited twice.  A stamp far further ahead (a fixed
		 * clock set in the future, say) would freeze the bucket for no
		 * gain: it restarts at the clock. */
		if (static_cast<double>(stored.stamp_us) - static_cast<double>(now_us) >
		    RestartMicros(limit))
			return Bucket{tokens, now_us, stored.blocked_until_us};
		return Bucket{tokens, stored.stamp_us, stored.blocked_until_us};
	}
	if (limit.window_us > 0) {
		std::int64_t windows = BoundariesCrossed(limit, stored.stamp_us, now_us);
		if (windows > 0) {
			double added = PerWindow(limit) * static_cast<double>(windows);
			tokens = added >= limit.burst - tokens ? limit.burst : tokens + added;
		}
		return Bucket{tokens, now_us, stored.blocked_until_us};
	}
	if (__builtin_sub_overflow(now_us, stored.stamp_us, &elapsed))
		return Bucket{limit.burst, now_us, stored.blocked_until_us};
	tokens = CreditContinuous(limit, tokens, static_cast<double>(elapsed));
	if (tokens > limit.burst)
		tokens = limit.burst;
	return Bucket{tokens, now_us, stored.blocked_until_us};
}

Decision
Decide(const Bucket &stored, const Limit &limit, const Request &request,
       std::int64_t now_us) noexcept
{
	if (limit.sliding)
		return SlidingDecide(stored, limit, request, now_us);
	Bucket current = Refill(stored, limit, now_us);

	/* A stamp that restarted at the clock must be stored, even by a denial
	 * or a look, or every later call would restart it again and the bucket
	 * would never earn. */
	const bool restarted = current.stamp_us < stored.stamp_us;
	const Request now_request = Lagging(request, LagMicros(current, now_us));
	/* A penalty box denies every take until it ends; a look still answers. */
	const bool boxed = request.cost > 0.0 && now_us < stored.blocked_until_us;
	const bool admits = Admits(current.tokens, limit, now_request);
	Decision d{};
	d.allowed = !boxed && admits;
	if (d.allowed) {
		double after = current.tokens - request.cost;
		d.remaining = after;
		d.write = request.cost > 0.0 || restarted;
		d.next = Bucket{after, current.stamp_us, current.blocked_until_us};
	} else {
		d.remaining = current.tokens;
		d.next = current;
		const bool starts_box = !boxed && limit.penalty_us > 0 && request.cost > 0.0;
		if (starts_box)
			d.next.blocked_until_us = BoxEnd(limit, now_us);
		d.write = restarted || starts_box;
	}
	/* Waits are measured on what is stored after the call: the new state for
	 * a grant or a restart, the untouched stored state for a denial. */
	const Bucket &after_call = d.write || d.allowed ? d.next : stored;

	if (d.allowed) {
		d.retry_after =
		    SecondsToLevel(after_call, limit, now_us, current.stamp_us, d.remaining, 0.0);
	} else {
		/* Denied by the box alone, the bucket could serve the call now: the
		 * box's end is the wait.  Otherwise the bucket admits once the
		 * balance reaches cost less the debt allowed then.  Either way
		 * admission only grows with time, so the later of the bucket's wait
		 * and the box's end is exact. */
		double wait = 0.0;
		if (!admits) {
			const double cap = Refills(limit) ? DebtCap(limit, now_request) : 0.0;
			const double target = cap < kInfinity ? request.cost - cap : request.cost;
			wait =
			    WaitMicros(after_call, limit, now_us,
			               EstimateMicros(limit, current.stamp_us, now_us, d.remaining, target),
			               [&limit, &request](const Bucket &b, std::int64_t at) {
				               return Admits(b.tokens, limit, Lagging(request, LagMicros(b, at)));
			               }) /
			    kMicros;
		}
		d.retry_after = NoEarlierThanBoxEnd(wait, d.next, now_us);
	}
	d.reset_after =
	    SecondsToLevel(after_call, limit, now_us, current.stamp_us, d.remaining, limit.burst);
	d.refill_after = SecondsToRefill(after_call, limit, now_us, current.stamp_us, d.remaining);
	return d;
}

std::int64_t
FullAtMicros(const Decision &decision, std::int64_t now_us) noexcept
{
	const double wait_us = std::round(decision.reset_after * kMicros);
	std::int64_t at = INT64_MAX;
	if (!(wait_us < kExactMicrosLimit) ||
	    __builtin_add_overflow(now_us, static_cast<std::int64_t>(wait_us), &at))
		return INT64_MAX;
	return at > decision.next.blocked_until_us ? at : decision.next.blocked_until_us;
}

bool
IsFull(const Bucket &stored, const Limit &limit, std::int64_t now_us) noexcept
{
	if (limit.sliding)
		return SlidingIsFull(stored, limit, now_us);
	return stored.stamp_us <= now_us && stored.blocked_until_us <= now_us &&
	       Refill(stored, limit, now_us).tokens >= limit.burst;
}

double
Jittered(double retry_after, double fraction, std::uint64_t key_hash) noexcept
{
	if (!(retry_after > 0.0) || !std::isfinite(retry_after) || !(fraction > 0.0))
		return retry_after;
	/* The top 53 bits of the hash as a double in [0, 1). */
	double share = static_cast<double>(key_hash >> 11) * (1.0 / 9007199254740992.0);
	double stretched = std::ceil(retry_after * (1.0 + fraction * share) * kMicros) / kMicros;
	return stretched < retry_after ? retry_after : stretched;
}

Status
ValidateRefund(double amount) noexcept
{
	return IsFiniteNonNegative(amount) ? Status::kOk : Status::kCostInvalid;
}

Decision
Refund(const Bucket &stored, const Limit &limit, double amount, std::int64_t now_us) noexcept
{
	if (limit.sliding)
		return SlidingRefund(stored, limit, amount, now_us);
	Bucket current = Refill(stored, limit, now_us);
	double tokens = current.tokens + amount;
	bool capped = tokens > limit.burst;
	if (capped)
		tokens = limit.burst;

	Decision d{};
	d.allowed = true;
	d.remaining = tokens;
	/* Exactly `amount` unless capped: no rounding residue is left over. */
	d.refunded = capped ? limit.burst - current.tokens : amount;
	d.next = Bucket{tokens, current.stamp_us, current.blocked_until_us};
	d.write = tokens != stored.tokens || current.stamp_us != stored.stamp_us;
	d.retry_after = SecondsToLevel(d.next, limit, now_us, current.stamp_us, tokens, 0.0);
	d.reset_after = SecondsToLevel(d.next, limit, now_us, current.stamp_us, tokens, limit.burst);
	d.refill_after = SecondsToRefill(d.next, limit, now_us, current.stamp_us, tokens);
	return d;
}

} /* namespace ratelimit::core */

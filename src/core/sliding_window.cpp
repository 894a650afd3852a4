/*
 * src/core/sliding_window.cpp
 *
 * The sliding-window counter.  Waits are found by bisection over whole
 * microseconds on the same room formula that decides a call, so "wait
 * retry_after, then retry" is granted and a microsecond less would not be:
 * the room never shrinks with time alone, and two windows after the call
 * the whole of N is free again.
 */
#include "sliding_window.hpp"

#include <cmath>
#include <limits>

#include "no_postgres.hpp"

namespace ratelimit::core {

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr double kMicros = static_cast<double>(kMicrosPerSecond);

/* Window arithmetic in 128 bits: a window may be as long as int64 allows. */
using Wide = __int128;

/* The start of the window `us` is in. */
Wide
WindowStart(const Limit &limit, std::int64_t us) noexcept
{
	const Wide offset = Wide(us) - limit.phase_us;
	Wide windows = offset / limit.window_us;
	if (offset % limit.window_us != 0 && offset < 0)
		windows -= 1;
	return Wide(limit.phase_us) + windows * limit.window_us;
}

/* previous's weight at `us`: (s + W - us) / W, in (0, 1]. */
double
PreviousWeight(const Limit &limit, std::int64_t us) noexcept
{
	const Wide left = WindowStart(limit, us) + limit.window_us - us;
	return static_cast<double>(left) / static_cast<double>(limit.window_us);
}

/* How far ahead of the clock a stamp may be before it restarts at it. */
double
RestartMicros(const Limit &limit) noexcept
{
	constexpr double kHour = 3600.0 * kMicros;
	const double two_windows = 2.0 * static_cast<double>(limit.window_us);
	return two_windows > kHour ? two_windows : kHour;
}

/* The room of `refilled` (SlidingRefill's answer at at_us) at at_us.  A
 * clock behind the stamp (which SlidingRefill keeps) weighs previous as it
 * weighs at at_us in the stamp's window, and in full in an earlier one:
 * what is granted then counts as the stamp's window's, while the window
 * at_us is in holds previous already (the one just before the stamp's), or
 * an unknown count (one further back).  So the room never shrinks as the
 * clock moves on. */
double
RoomAt(const Bucket &refilled, const Limit &limit, std::int64_t at_us) noexcept
{
	if (!(refilled.previous > 0.0))
		return refilled.tokens;
	double weight = 1.0;
	if (at_us >= refilled.stamp_us)
		weight = PreviousWeight(limit, refilled.stamp_us);
	else if (WindowStart(limit, at_us) == WindowStart(limit, refilled.stamp_us))
		weight = PreviousWeight(limit, at_us);
	return refilled.tokens - refilled.previous * weight;
}

/* Seconds from now_us until the room of `from` reaches `target`: 0 if it
 * has; +inf if it never does (target above N). */
double
SecondsToRoom(const Bucket &from, const Limit &limit, std::int64_t now_us, double target) noexcept
{
	auto holds = [&](std::int64_t at) { return SlidingRoom(from, limit, at) >= target; };
	if (holds(now_us))
		return 0.0;
	if (!(target <= limit.burst))
		return kInfinity;
	/* Two boundaries after the stamp (or now, if later), nothing counts any
	 * more: the room is N. */
	const std::int64_t later = from.stamp_us > now_us ? from.stamp_us : now_us;
	Wide last = WindowStart(limit, later) + 2 * Wide(limit.window_us);
	if (last > Wide(INT64_MAX))
		last = INT64_MAX;
	std::int64_t hi = static_cast<std::int64_t>(last);
	if (!holds(hi))
		return kInfinity;
	std::int64_t lo = now_us; /* does not hold */
	while (hi - lo > 1) {
		const std::int64_t mid = lo + (hi - lo) / 2;
		if (holds(mid))
			hi = mid;
		else
			lo = mid;
	}
	return (static_cast<double>(hi) - static_cast<double>(now_us)) / kMicros;
}

/* The waits of a decision whose state after the call is `after_call`. */
void
SetWaits(Decision &d, const Bucket &after_call, const Limit &limit, std::int64_t now_us,
         double cost) noexcept
{
	d.retry_after = d.allowed ? 0.0 : SecondsToRoom(after_call, limit, now_us, cost);
	d.reset_after = SecondsToRoom(after_call, limit, now_us, limit.burst);
	d.refill_after =
	    d.remaining >= limit.burst
	        ? 0.0
	        : SecondsToRoom(after_call, limit, now_us, NextWholeToken(d.remaining, limit.burst));
}

} /* namespace */

Status
SlidingValidate(const Limit &limit, const Request &request) noexcept
{
	if (!(std::isfinite(request.cost) && request.cost >= 0.0))
		return Status::kCostInvalid;
	if (!(std::isfinite(limit.burst) && limit.burst > 0.0))
		return Status::kBurstInvalid;
	if (limit.window_us <= 0)
		return Status::kRateInvalid;
	if (!(request.max_wait >= 0.0))
		return Status::kMaxWaitInvalid;
	if (request.reserve)
		return Status::kReserveUnsupported;
	if (request.cost > limit.burst)
		return Status::kCostExceedsBurst;
	return Status::kOk;
}

Bucket
SlidingRefill(const Bucket &stored, const Limit &limit, std::int64_t now_us) noexcept
{
	Bucket b = stored;
	if (b.tokens > limit.burst)
		b.tokens = limit.burst;
	if (now_us <= stored.stamp_us) {
		if (static_cast<double>(stored.stamp_us) - static_cast<double>(now_us) >
		    RestartMicros(limit))
			b.stamp_us = now_us;
		return b;
	}
	const Wide from = WindowStart(limit, stored.stamp_us);
	const Wide to = WindowStart(limit, now_us);
	if (to != from) {
		const double current = limit.burst - b.tokens;
		b.previous = to - from == limit.window_us && current > 0.0 ? current : 0.0;
		b.tokens = limit.burst;
	}
	b.stamp_us = now_us;
	return b;
}

double
SlidingRoom(const Bucket &stored, const Limit &limit, std::int64_t at_us) noexcept
{
	return RoomAt(SlidingRefill(stored, limit, at_us), limit, at_us);
}

Decision
SlidingDecide(const Bucket &stored, const Limit &limit, const Request &request,
              std::int64_t now_us) noexcept
{
	const Bucket current = SlidingRefill(stored, limit, now_us);
	/* A restarted stamp must be stored, even by a denial (as for a bucket). */
	const bool restarted = current.stamp_us < stored.stamp_us;
	const double room = RoomAt(current, limit, now_us);
	Decision d{};
	d.allowed = request.cost <= room;
	d.next = current;
	if (d.allowed) {
		d.next.tokens -= request.cost;
		d.write = request.cost > 0.0 || restarted;
		d.remaining = RoomAt(d.next, limit, now_us);
	} else {
		d.write = restarted;
		d.remaining = room;
	}
	SetWaits(d, d.write || d.allowed ? d.next : stored, limit, now_us, request.cost);
	return d;
}

Decision
SlidingRefund(const Bucket &stored, const Limit &limit, double amount, std::int64_t now_us) noexcept
{
	const Bucket current = SlidingRefill(stored, limit, now_us);
	Decision d{};
	d.allowed = true;
	d.next = current;
	const bool capped = current.tokens + amount > limit.burst;
	d.next.tokens = capped ? limit.burst : current.tokens + amount;
	d.refunded = capped ? limit.burst - current.tokens : amount;
	d.write = d.next.tokens != stored.tokens || d.next.stamp_us != stored.stamp_us ||
	          d.next.previous != stored.previous;
	d.remaining = RoomAt(d.next, limit, now_us);
	SetWaits(d, d.next, limit, now_us, 0.0);
	return d;
}

bool
SlidingIsFull(const Bucket &stored, const Limit &limit, std::int64_t now_us) noexcept
{
	return stored.stamp_us <= now_us && SlidingRoom(stored, limit, now_us) >= limit.burst;
}

} /* namespace ratelimit::core */

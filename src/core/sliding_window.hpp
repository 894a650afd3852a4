/*
 * src/core/sliding_window.hpp
 *
 * The sliding-window counter ("at most N in any window of W"), as Cloudflare
 * and Upstash count it: pure C++17, noexcept, no heap, time passed in.
 *
 * Windows of length W = limit.window_us start at limit.phase_us + k * W (k
 * integer; the extension aligns them on the Unix epoch).  A call at time t in
 * the window [s, s + W) estimates what was taken in the last W as
 *
 *     estimate(t) = previous * (s + W - t) / W + current
 *
 * where current is what was granted in this window and previous what was
 * granted in the one before (0 if that one is not the window just before).
 * A take of `cost` is granted when estimate(t) + cost <= N (limit.burst),
 * and then current += cost; a denial changes nothing.  The estimate is
 * continuous and never grows with time alone: within a window previous's
 * share shrinks, and at a boundary current becomes previous at full weight.
 * It reaches 0 at the second boundary after the last grant.
 *
 * The state is a core::Bucket: tokens = N - current (so that a take lowers
 * tokens, a new key is FullBucket and the escrow's arithmetic holds as for
 * a bucket), stamp_us the last instant it was brought to, previous.  What a
 * call answers, as for a bucket: remaining = N - estimate after the call;
 * retry_after (denied) the whole microseconds until the same call would be
 * granted if nothing else were taken; reset_after until the estimate is 0;
 * refill_after until remaining reaches min(floor(max(remaining, 0)) + 1, N).
 *
 * How inexact it is: within one aligned window grants never exceed N (the
 * estimate counts current in full).  Over an arbitrary span of W it may
 * grant up to nearly 2N (the previous window's grants crowded at its end,
 * weighted down as if spread evenly), and it may deny before N were granted
 * in the last W (the previous window's grants were early, yet still count).
 *
 * No reservation (no debt: kReserveUnsupported), no penalty box, no floor
 * rate, no initial balance: the policy table refuses them for this kind.
 */
#ifndef RATELIMIT_CORE_SLIDING_WINDOW_HPP
#define RATELIMIT_CORE_SLIDING_WINDOW_HPP

#include <cstdint>

#include "token_bucket.hpp"

namespace ratelimit::core {

/* Validate() of a sliding window (limit.sliding). */
Status SlidingValidate(const Limit &limit, const Request &request) noexcept;

/* Refill() of a sliding window: brings `stored` to the window of `now_us`
 * (current becomes previous one window on, both go to 0 two or more on).
 * A clock that stepped back keeps the stamp, unless it is further ahead
 * than an hour and two windows: then it restarts at now_us.  (Behind the
 * stamp, SlidingRoom weighs previous as at now_us in the stamp's window,
 * in full before it: a clock that steps back at most a window grants no
 * more than N in the window it steps into either.) */
Bucket SlidingRefill(const Bucket &stored, const Limit &limit, std::int64_t now_us) noexcept;

/* N - estimate(at_us) of `bucket` brought to at_us: what a take may cost. */
double SlidingRoom(const Bucket &stored, const Limit &limit, std::int64_t at_us) noexcept;

/* Decide() of a sliding window (see the header). */
Decision SlidingDecide(const Bucket &stored, const Limit &limit, const Request &request,
                       std::int64_t now_us) noexcept;

/* Refund() of a sliding window: lowers current by `amount`, not below 0;
 * previous stays. */
Decision SlidingRefund(const Bucket &stored, const Limit &limit, double amount,
                       std::int64_t now_us) noexcept;

/* IsFull() of a sliding window: its estimate is 0 at now_us, its stamp not
 * ahead of the clock. */
bool SlidingIsFull(const Bucket &stored, const Limit &limit, std::int64_t now_us) noexcept;

} /* namespace ratelimit::core */

#endif

/*
 * src/core/token_bucket.hpp
 *
 * The token-bucket algebra: pure C++17 value types and noexcept functions.
 * No PostgreSQL, no heap, no clock: the caller passes the time in.
 *
 * A bucket holds `tokens` (at most `burst`; negative while reserved debt is
 * outstanding) and the microsecond `stamp` up to which refill has been
 * credited.  Refill is continuous and lazy: tokens += rate * elapsed, capped
 * at burst.  Fractional tokens are kept; the stamp moves forward only, so a
 * clock that steps back pauses refill instead of minting tokens, except that
 * a stamp more than an hour (and a full refill) ahead restarts at the clock.
 */
#ifndef RATELIMIT_CORE_TOKEN_BUCKET_HPP
#define RATELIMIT_CORE_TOKEN_BUCKET_HPP

#include <cstdint>
#include <limits>

namespace ratelimit::core {

/* Why a request cannot be evaluated.  kOk means it can. */
enum class Status : int {
	kOk = 0,
	kCostInvalid,        /* cost is NaN, infinite or negative */
	kRateInvalid,        /* rate is NaN, infinite or negative */
	kBurstInvalid,       /* burst is NaN, infinite, zero or negative */
	kMaxReservedInvalid, /* max_reserved is NaN, infinite or negative */
	kCostExceedsBurst,   /* cost > burst and no reservation: can never succeed */
	kCostExceedsDebtCap, /* reservation: cost > burst + DebtCap(), likewise */
	kFloorRateInvalid,   /* floor_rate is NaN, infinite or negative */
	kMaxWaitInvalid,     /* max_wait is NaN or negative */
	kReserveUnsupported  /* a sliding window cannot reserve: it has no debt to repay */
};

/* The limit: `rate` tokens per second (0 = never refills), `burst` capacity.
 * With `window_us` > 0 refill is a fixed window: at every instant
 * phase_us + k * window_us (k integer) the bucket gains rate * window
 * seconds' worth of tokens at once, capped at burst; in between, nothing.
 * Two limits are equal when they refill, cap, box and start a new key
 * alike (operator==). */
struct Limit {
	double rate;
	double burst;
	std::int64_t window_us = 0; /* 0: continuous refill */
	std::int64_t phase_us = 0;  /* where windows start, modulo window_us */
	/* Continuous refill only: while the bucket holds less than one second's
	 * worth of floor_rate, it refills at max(rate, floor_rate), so a client
	 * that spent its burst still gets floor_rate tokens per second. */
	double floor_rate = 0.0;
	/* Penalty box: once a take is denied, every take is denied for this many
	 * µs (0: none).  The denial that starts it must be stored. */
	std::int64_t penalty_us = 0;
	/* A key never seen starts with `initial` tokens (at most burst), or,
	 * without has_initial, full.  The algebra above never reads them: they
	 * matter where a bucket is first stored (NewBucket).  Zeroed memory
	 * reads as "starts full". */
	bool has_initial = false;
	/* A sliding-window counter (sliding_window.hpp) instead of a bucket:
	 * at most `burst` in any window of window_us, windows aligned on
	 * phase_us; rate, floor_rate, penalty_us and the initial balance are
	 * not read.  (Beside has_initial, in its padding.) */
	bool sliding = false;
	double initial = 0.0;
};

/* Whether `a` and `b` are the same limit: every field of the algebra equal,
 * and a new key starting with the same balance (an initial balance equal to
 * the burst is the same as none). */
bool operator==(const Limit &a, const Limit &b) noexcept;
bool operator!=(const Limit &a, const Limit &b) noexcept;

/* What a key never seen starts with under `limit`: initial, or burst. */
double StartTokens(const Limit &limit) noexcept;

/* Whether a key never seen starts below a full bucket: its first sighting
 * must then be stored, or it would never start earning. */
bool StartsBelowFull(const Limit &limit) noexcept;

/* One call: take `cost` tokens (0 = look only).  With `reserve` the bucket may
 * go negative, by at most DebtCap(): `max_reserved` tokens when `debt_capped`,
 * and no more than refill repays within `max_wait` seconds (+inf: no time
 * cap), so that reserved work may start within max_wait. */
struct Request {
	double cost;
	bool reserve;
	bool debt_capped;
	double max_reserved;
	double max_wait = std::numeric_limits<double>::infinity();

	/* A request for `cost` tokens without reservation. */
	static constexpr Request
	Plain(double cost) noexcept
	{
		return Request{cost, false, false, 0.0};
	}

	/* A request for `cost` tokens that may reserve when the work can start
	 * within `max_wait` seconds (+inf: no time cap); 0 means no reservation.
	 * No token cap: set debt_capped and max_reserved for one. */
	static constexpr Request
	Within(double cost, double max_wait) noexcept
	{
		Request request = Plain(cost);
		if (max_wait > 0.0) {
			request.reserve = true;
			request.max_wait = max_wait;
		}
		return request;
	}
};

/* No penalty box: Bucket::blocked_until_us of a bucket never denied under one. */
constexpr std::int64_t kNotBlocked = INT64_MIN;

/* Stored state of one bucket. */
struct Bucket {
	double tokens;
	std::int64_t stamp_us;
	/* Takes are denied until this instant (a penalty box), whatever the
	 * balance; refill goes on meanwhile. */
	std::int64_t blocked_until_us = kNotBlocked;
	/* A sliding window only: what was taken in the window before the one
	 * `stamp_us` is in (tokens is then burst less what was taken in that
	 * one).  0 for a token bucket. */
	double previous = 0.0;
};

/* The answer to one call. */
struct Decision {
	bool allowed;
	bool write;          /* `next` must be stored: granted with cost > 0, or the
	                        stamp restarted at the clock */
	double remaining;    /* tokens after the call (negative = reserved debt) */
	double retry_after;  /* s: denied: until the same call succeeds; reserved: until
	                        the work may start; otherwise 0.  +inf if never. */
	double reset_after;  /* s until the bucket is full again; +inf if never */
	double refill_after; /* s until the whole tokens remaining, floor(max(remaining, 0)),
	                        next grow: until the balance reaches
	                        min(floor(max(remaining, 0)) + 1, burst); for fixed windows a
	                        window boundary; 0 when full; +inf if never */
	double refunded;     /* Refund only: tokens actually added (the rest is over burst) */
	Bucket next;         /* state after the call */
};

constexpr std::int64_t kMicrosPerSecond = 1000000;

/* Checks the numbers of a call; everything else requires kOk. */
Status Validate(const Limit &limit, const Request &request) noexcept;

/* The most tokens `request` may owe once granted (+inf: no cap; 0 without
 * `reserve`): the least of max_reserved (when debt_capped) and what refill
 * repays within max_wait.  Continuous refill repays at max(rate, floor_rate)
 * below zero; the time cap is that rate times max_wait less 16 µs, so that
 * whole-µs rounding of the wait never takes it past max_wait.  Fixed
 * windows: floor(max_wait / window) windows' worth, so the work may start
 * within max_wait whatever the phase.  Validate and Admits both use it. */
double DebtCap(const Limit &limit, const Request &request) noexcept;

/* A bucket seen for the first time: full at `now_us`. */
Bucket FullBucket(const Limit &limit, std::int64_t now_us) noexcept;

/* A bucket seen for the first time: at its start balance (StartTokens) at
 * `now_us`. */
Bucket NewBucket(const Limit &limit, std::int64_t now_us) noexcept;

/* Credits refill up to `now_us`.  Elapsed <= 0 adds nothing and keeps the
 * stamp, unless the stamp is further ahead of `now_us` than an hour and than
 * refilling the whole burst takes: then the stamp restarts at `now_us`.  Tokens never
 * exceed burst (a lowered burst caps at once). */
Bucket Refill(const Bucket &stored, const Limit &limit, std::int64_t now_us) noexcept;

/* The one admission rule: may `request` be granted from a bucket holding
 * `tokens` (refilled to now)?  Decide() and the shard plans ask only this. */
bool Admits(double tokens, const Limit &limit, const Request &request) noexcept;

/* Whether Decide(stored, limit, request, now_us) grants: Admits on the
 * balance refilled to now, with the time cap counted from when refill
 * resumes (a stamp ahead of the clock delays reserved work that much). */
bool Admitted(const Bucket &stored, const Limit &limit, const Request &request,
              std::int64_t now_us) noexcept;

/* The balance at which the whole tokens of `tokens` next grow:
 * min(floor(max(tokens, 0)) + 1, burst). */
double NextWholeToken(double tokens, double burst) noexcept;

/* Refills `stored` to `now_us` and decides the request.  A denial leaves the
 * stored state as it is (write == false), unless its stamp restarted at the
 * clock (see Refill), or the limit has a penalty box and the denial of a take
 * (cost > 0) starts one: then `next` must be stored.  Inside a box every
 * take (cost > 0) is denied, with retry_after the later of its end and when
 * the bucket could serve the call: its end when the bucket could now.
 * Requires Validate() == kOk. */
Decision Decide(const Bucket &stored, const Limit &limit, const Request &request,
                std::int64_t now_us) noexcept;

/* The first whole microsecond at which the bucket a decision made at `now_us`
 * stored (`next`) is full again and out of any penalty box: now +
 * reset_after, or the box's end if later.  INT64_MAX when it never is, or
 * when that lies beyond every timestamp. */
std::int64_t FullAtMicros(const Decision &decision, std::int64_t now_us) noexcept;

/* Whether forgetting `stored` at `now_us` changes no later answer: refilled
 * to now it holds its whole burst (no debt), its stamp is not ahead of the
 * clock and no penalty box holds it.  Then it behaves exactly as
 * FullBucket(limit, now_us) does. */
bool IsFull(const Bucket &stored, const Limit &limit, std::int64_t now_us) noexcept;

/* Gives `amount` tokens back: refills to `now_us`, adds, caps at burst.  The
 * result is a grant that writes when anything changed; remaining is the new
 * balance.  Requires Validate() == kOk for `limit` and a finite amount >= 0
 * (ValidateRefund). */
Decision Refund(const Bucket &stored, const Limit &limit, double amount,
                std::int64_t now_us) noexcept;

/* kCostInvalid when `amount` is NaN, infinite or negative. */
Status ValidateRefund(double amount) noexcept;

/* `retry_after` (whole microseconds, as Decide gives) stretched by a deterministic jitter: by
 * `fraction` (0..1) times a share in [0, 1) taken from `key_hash`, so the same key always gets the
 * same jitter and different keys spread out.  Never shorter than
 * `retry_after`, rounded up to whole microseconds; 0 and +inf unchanged. */
double Jittered(double retry_after, double fraction, std::uint64_t key_hash) noexcept;

} /* namespace ratelimit::core */

#endif

/*
 * src/core/escrow.hpp
 *
 * Escrow accounting for one bucket shared by concurrent transactions, as the
 * memory engine keeps it: pure C++17, noexcept, no heap, value types, time
 * passed in.  The engine finds the state, holds the lock around these calls
 * and keeps each transaction's records; everything they compute is here.
 *
 * The state holds the bucket as committed transactions left it and the sum
 * of the costs of takes not yet committed (pending).  A take decides on the
 * committed bucket refilled to now, less what is pending, as if the pending
 * takes were spent, and adds its cost to pending.  Its transaction keeps the
 * record Decide returns: Finish at commit moves the cost from pending into
 * the committed bucket, Finish at abort (of the transaction, or of the
 * subtransaction that took) only removes it from pending, which leaves the
 * bucket exactly as if the take had never been.  A record committed with
 * nothing else pending when it was decided, and nothing committed since,
 * stores what its call decided (`next`), as the table stores it; otherwise
 * it is taken from the committed bucket refilled to when it was decided (a
 * later stamp stays: refill is never counted twice).  Refill a full bucket
 * could not hold while a take was pending is not credited: the balance is
 * never above what committing the same transactions one after another would
 * leave, and equal to it when no take is pending across a refill.
 *
 * Refunds and resets, which raise a balance, take effect when their
 * transaction commits (a refund is recorded, maybe of nothing, whenever it
 * would write on the committed bucket, or is made under another limit than
 * open records were: its commit then stores the refill and the cap of its
 * limit, as the table does); a refund then adds no more than its amount
 * less the refill counted on the bucket since it was decided (the table
 * adds it at once, and the bucket it raised may have met its burst
 * meanwhile).  While
 * a reset is open (`resets`), every call counts on no more than a new key
 * leaves either (as its limit, or the last recorded call's, starts it),
 * less what is pending.  A call decided before a reset and committed after
 * it leaves nothing (the table's reset waits for it); one decided while the
 * reset was open counts after it, on the new key: it stores the key's
 * first sighting if the key starts below full (a denial too), a refund
 * stores nothing on a key that starts full, and a box holds on the new key
 * however the key was stored since, but stores no key that starts full by
 * itself unless the new key alone would deny the call too (the escrow may
 * have denied on takes the reset ends, where the table's new key grants).
 * A take denied inside a box the reset ends, that the new key alone would
 * deny, starts a box for the new key, stored if the reset commits.
 *
 * A penalty box is stored at once, on the committed bucket as it stands
 * (the refill to the denial, which the table stores with it, is added when
 * the box commits, no further than the denial), and lifted by an abort
 * that finds it unchanged.  The first sighting of a key that starts below
 * full is stored at once too, but counts as the key's only once committed:
 * until then (`unsettled`) every call sees the key as new, under any box
 * stored since and less what is pending; a commit of a take, a refund or a
 * box settles it (a box stored meanwhile keeps the lesser of the balance
 * stored and the new key's).  An abort forgets a bucket its transaction stored new,
 * if no commit has touched it since (a refund that left it full, as a new
 * key starts, does not count: the table's refund, waiting for that
 * transaction, would find the key new and store nothing).
 *
 * The state is judged by the limit of its last recorded call.  When a call
 * brings another (the policy was redefined) while transactions hold the
 * state, the limit before is kept with the count of those holds, and until
 * they end every call counts on no more than either limit leaves; a change
 * while takes from two definitions back are still open keeps no refill at
 * all, with the lesser burst and start of the two.
 *
 * Invariants (InvariantsHold), between any two calls:
 * - holds >= 0: one for each record an open transaction keeps;
 * - pending == 0 when holds == 0 (exactly: no rounding is left behind), and
 *   pending is finite;
 * - 0 <= prior_holds <= holds: the records from before the last change of
 *   limit (limit_epoch) still open;
 * - 0 <= provisional <= holds: the first sightings still open;
 * - unsettled only while provisional > 0;
 * - resets <= holds: the resets still open.
 * version changes whenever the committed state does, commits whenever a
 * commit changes the bucket (a reset's included, but for such a refund),
 * limit_epoch whenever `limit` does: Finish compares them with what a
 * record saw.
 */
#ifndef RATELIMIT_CORE_ESCROW_HPP
#define RATELIMIT_CORE_ESCROW_HPP

#include <cstdint>

#include "operation.hpp"
#include "token_bucket.hpp"

namespace ratelimit::core {

/* The escrow of one bucket. */
struct EscrowState {
	Bucket bucket;             /* as committed (but see absent and unsettled) */
	double pending;            /* costs of takes not yet committed */
	Limit limit;               /* of the last recorded call: how it refills, when it is full,
	                              what a new key starts with */
	Limit prior_limit;         /* the limit before the last change, while prior_holds > 0 */
	std::int64_t holds;        /* records of open transactions */
	std::int64_t prior_holds;  /* of them, those from before the last change of limit */
	std::int64_t provisional;  /* of them, first sightings: not yet the key's */
	std::uint64_t version;     /* changes whenever the committed state does */
	std::uint32_t commits;     /* commits that changed the bucket */
	std::uint32_t limit_epoch; /* changes whenever `limit` does */
	bool absent;               /* reset: the key counts as never seen (its pending takes stay) */
	bool unsettled;            /* an open transaction stored the key new, starting below full,
	                              and no commit has settled it since: calls see it as new
	                              (under any penalty box stored meanwhile) */
	std::uint32_t resets;      /* of the holds, resets: while any is open, calls count on no
	                              more than a new key leaves either */
};

/* What an open transaction did to a state: to finish at its commit, or to
 * undo at its abort (or its subtransaction's), with the limit it was
 * decided under, which the caller keeps (one transaction's records mostly
 * share one).  72 bytes (64 before the previous window of a sliding
 * window joined Bucket): a transaction may keep millions. */
struct EscrowRecord {
	Bucket next;        /* the bucket its call decided, as the table stores it */
	std::int64_t at_us; /* when it was decided */
	union {
		double amount;                 /* takes: the cost; refunds: the tokens refunded
		                                  (maybe 0) */
		std::int64_t prior_blocked_us; /* boxed: the box it replaced */
	};
	std::uint64_t version_after; /* the state's version once it was recorded */
	std::uint32_t limit_epoch;   /* the state's limit_epoch then */
	std::uint32_t commits_at;    /* the state's commits then */
	bool takes : 1;              /* a take of `amount`, pending until it commits */
	bool refunds : 1;            /* a refund of `amount`, applied when it commits */
	bool exact : 1;              /* nothing else was pending: at commit, `next` is the
	                                bucket if nothing committed since */
	bool reset : 1;              /* a reset, applied when it commits */
	bool created : 1;            /* the key was stored new: forgotten at abort if no commit
	                                touched it since */
	bool provisional : 1;        /* a first sighting below full, not yet the key's */
	bool boxed : 1;              /* a penalty box was started (until next.blocked_until_us):
	                                lifted at abort if still in place */
	bool relimits : 1;           /* the call judged the state by another limit than before */
	bool after_reset : 1;        /* decided while a reset of the key was open: at commit it
	                                counts after that reset, not before */
	bool reboxes : 1;            /* boxed, and the new key that reset leaves alone would start
	                                the box too: stored with the new key if the reset commits */
};

static_assert(sizeof(EscrowRecord) <= 72, "an escrow record takes 72 bytes");

/* A call's answer, and what its transaction keeps. */
struct EscrowStep {
	Decision decision;
	bool recorded;       /* the state changed: the transaction keeps `record` (else the
	                        state is as it was) */
	EscrowRecord record; /* when recorded */
};

/* What a finished record leaves to the engine, beyond the state. */
struct EscrowEnd {
	bool keep;   /* aborted after judging the state by a limit that may never commit,
	                and no call has judged it since: the bucket must outlive that limit
	                (not be forgotten while full under it) until a call judges it again */
	bool forget; /* aborted, and the bucket its transaction stored new is gone with it:
	                nobody holds it, its slot is free */
};

/* A key the engine does not hold, as a call under `limit` finds it: never
 * seen, nothing open.  A step recorded on it is kept by storing the state
 * (if the engine finds room), or dropped with it. */
EscrowState UnseenEscrow(const Limit &limit) noexcept;

/* `bucket` as committed under `limit`, nothing open (as loaded at start). */
EscrowState SettledEscrow(const Bucket &bucket, const Limit &limit) noexcept;

/* Decides `operation` under `limit` at `now_us` on `state`, and records it
 * when it must be: a take granted with a cost, a refund that writes, a
 * penalty box started, or the first sighting of a key that starts below full
 * (by any operation but a check or a peek).  `state` changes only when the
 * step is recorded; the caller then keeps the record, and `limit`, until the
 * transaction (or subtransaction) ends, and hands them to Finish.  Requires
 * what Apply requires. */
EscrowStep Decide(EscrowState &state, const Operation &operation, const Limit &limit,
                  std::int64_t now_us) noexcept;

/* A reset of `state`, applied when its transaction commits; requires
 * !state.absent (a key absent is not reset).  The caller keeps the record,
 * with state.limit as the limit it was decided under. */
EscrowRecord RecordReset(EscrowState &state) noexcept;

/* Finishes `record`, decided under `limit`, on `state`, which the record's
 * transaction holds: at commit its take leaves the committed bucket and its
 * refund or reset takes effect; at abort whatever it changed is undone.
 * Records of one transaction commit oldest first and abort newest first. */
EscrowEnd Finish(EscrowState &state, const EscrowRecord &record, const Limit &limit,
                 bool commit) noexcept;

/* Forgets the key at once (a reset of its whole limit): absent from now on,
 * its pending takes still counting.  True if nobody holds it: the engine may
 * free its slot. */
bool Forget(EscrowState &state) noexcept;

/* What `state` holds at `now_us` for a call under `limit`: the committed
 * bucket (new, at limit's start, if absent or unsettled) refilled to now,
 * pending takes spent.  Decide counts on no more than this, and on no more
 * than the limits it keeps from before leave. */
Bucket Available(const EscrowState &state, const Limit &limit, std::int64_t now_us) noexcept;

/* The bucket a listing or a sweep shows at `now_us`: as stored, refilled
 * to now and less what is pending when takes are pending. */
Bucket Listed(const EscrowState &state, std::int64_t now_us) noexcept;

/* Whether forgetting the bucket would change answers whatever its balance:
 * under its limit a new key starts below full. */
bool Remembered(const EscrowState &state) noexcept;

/* Whether forgetting `state` at `now_us` changes no answer: nobody holds it,
 * and it is absent, or it is full under its limit, starts full, and is not
 * `kept` (an engine's mark: a limit other than its own may judge it). */
bool Forgettable(const EscrowState &state, bool kept, std::int64_t now_us) noexcept;

/* Whether the invariants of the file header hold. */
bool InvariantsHold(const EscrowState &state) noexcept;

} /* namespace ratelimit::core */

#endif

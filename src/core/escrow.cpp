/*
 * src/core/escrow.cpp
 *
 * Escrow accounting: what a call decides on, what it records, and what a
 * commit or an abort of its record does (see escrow.hpp).
 */
#include "escrow.hpp"

#include <cmath>

#include "check.hpp"
#include "no_postgres.hpp"

namespace ratelimit::core {

namespace {

double
Least(double a, double b) noexcept
{
	return a < b ? a : b;
}

/* The committed bucket of `state` at `now_us`: new (at `limit`'s start) if
 * it was reset, or if only an open transaction has stored it new; a
 * penalty box stored since, which holds at once, stays. */
Bucket
Committed(const EscrowState &state, const Limit &limit, std::int64_t now_us) noexcept
{
	if (!state.absent && !state.unsettled)
		return state.bucket;
	Bucket fresh = NewBucket(limit, now_us);
	if (!state.absent)
		fresh.blocked_until_us = state.bucket.blocked_until_us;
	return fresh;
}

/* `committed` with `pending` takes spent: refilled to now first when any
 * are pending (refill is counted on what is committed); as it is
 * otherwise, for the call to refill under its own limit. */
Bucket
Spent(const Bucket &committed, double pending, const Limit &limit, std::int64_t now_us) noexcept
{
	if (pending <= 0.0)
		return committed;
	Bucket seen = Refill(committed, limit, now_us);
	seen.tokens -= pending;
	return seen;
}

/* The state is about to be judged by another limit: the one it was judged
 * by is kept while records decided under it are open. */
void
KeepLimitBefore(EscrowState &state) noexcept
{
	if (state.holds > 0) {
		if (state.prior_holds > 0) {
			/* Takes from two definitions back are open too: until they all
			 * end, count on no refill at all, and the lesser burst and start
			 * of the two kept. */
			Limit frozen{0.0, Least(state.prior_limit.burst, state.limit.burst)};
			frozen.has_initial = true;
			frozen.initial = Least(StartTokens(state.prior_limit), StartTokens(state.limit));
			state.prior_limit = frozen;
		} else {
			state.prior_limit = state.limit;
		}
		state.prior_holds = state.holds;
	}
	state.limit_epoch++;
}

/* A record of `state` at `now_us`, holding it. */
EscrowRecord
Hold(EscrowState &state, std::int64_t now_us) noexcept
{
	EscrowRecord record{};
	record.at_us = now_us;
	record.limit_epoch = state.limit_epoch;
	state.holds++;
	return record;
}

/* The committed bucket as the call of `record`, decided under `limit`,
 * found it: refilled no further than then (a later stamp stays: refill is
 * never counted twice) and capped at its burst; refill it could not hold
 * since is not credited. */
Bucket
AsDecided(const EscrowState &state, const EscrowRecord &record, const Limit &limit) noexcept
{
	Bucket bucket = Committed(state, limit, record.at_us);
	if (bucket.stamp_us < record.at_us) {
		const Bucket from = bucket;
		bucket = Refill(from, limit, record.at_us);
		/* Takes decided under the limit before are still open: no more
		 * refill than it gives either. */
		if (state.prior_holds > 0)
			bucket.tokens =
			    Least(bucket.tokens, Refill(from, state.prior_limit, record.at_us).tokens);
	} else {
		bucket.tokens = Least(bucket.tokens, limit.burst);
	}
	return bucket;
}

/* Whether `record` was decided on the committed bucket, which nothing has
 * changed since: what it decided is then the bucket, as the table stores
 * it. */
bool
Unchanged(const EscrowState &state, const EscrowRecord &record) noexcept
{
	return record.exact && state.version == record.version_after && !state.absent;
}

/* What the refund of `record`, decided under `limit`, adds at its commit:
 * the table adds it at its instant, and the bucket it raised may meet its
 * burst as refill is counted after, refill that is lost.  Its amount, less
 * the most refill counted on the committed bucket since that instant (all
 * of it if a call under another limit was recorded since). */
double
Unspent(const EscrowState &state, const EscrowRecord &record, const Limit &limit) noexcept
{
	const double amount = record.amount;
	if (state.absent || state.unsettled || state.bucket.stamp_us <= record.at_us)
		return amount;
	if (state.limit_epoch != record.limit_epoch)
		return 0.0;
	/* From a bucket as far below zero as the amount, refill runs at its
	 * fastest until it has credited the amount at least. */
	const Bucket low{-amount, record.at_us};
	const double refill = Refill(low, limit, state.bucket.stamp_us).tokens + amount;
	return refill < amount ? amount - refill : 0.0;
}

/* At commit: the take or refund of `record`, decided under `limit`, leaves
 * the committed bucket. */
void
CommitTakeOrRefund(EscrowState &state, const EscrowRecord &record, const Limit &limit) noexcept
{
	/* A refund on a key reset since, which starts full: the table's finds
	 * the key new, full, and stores nothing. */
	if (record.refunds && state.absent && !StartsBelowFull(limit))
		return;
	if (Unchanged(state, record)) {
		state.bucket = record.next;
	} else {
		/* Taken from the bucket as it was then. */
		Bucket bucket = AsDecided(state, record, limit);
		if (record.takes)
			bucket.tokens -= record.amount;
		const double amount = record.refunds ? Unspent(state, record, limit) : 0.0;
		if (amount > 0.0) {
			const std::int64_t at = record.at_us > bucket.stamp_us ? record.at_us : bucket.stamp_us;
			bucket = Refund(bucket, limit, amount, at).next;
		}
		state.bucket = bucket;
	}
	state.absent = false;
	/* Committed now, whatever sighting is still open. */
	state.unsettled = false;
	state.version++;
	/* A refund that leaves the bucket as a key never seen would be (full,
	 * under a limit whose new keys start full) stores nothing the table
	 * would keep if the transaction that stored the key new aborts: the
	 * table's refund, waiting for it, finds the key new and writes
	 * nothing.  It does not keep the key from being forgotten then. */
	const Bucket &stored = state.bucket;
	const std::int64_t at = record.at_us > stored.stamp_us ? record.at_us : stored.stamp_us;
	if (!record.refunds || StartsBelowFull(limit) || !IsFull(stored, limit, at))
		state.commits++;
}

/* Finish, but for its checks. */
EscrowEnd
FinishHeld(EscrowState &state, const EscrowRecord &record, const Limit &limit, bool commit) noexcept
{
	EscrowEnd end{};
	state.holds--;
	if (record.limit_epoch != state.limit_epoch && state.prior_holds > 0)
		state.prior_holds--;
	state.provisional -= record.provisional;
	if (state.provisional == 0)
		state.unsettled = false;
	if (record.takes)
		state.pending -= record.amount;
	if (state.holds == 0)
		state.pending = 0.0; /* no rounding left behind */
	state.resets -= record.reset;
	if (commit) {
		/* Decided before a reset that has committed since, and not while
		 * it was open: the table's reset waits for it, and leaves nothing
		 * of it. */
		if (state.absent && !record.reset && !record.after_reset &&
		    state.commits != record.commits_at)
			return end;
		/* Decided while a reset that has committed since was open: on the
		 * new key, which its call stores if it starts below full (a first
		 * sighting, maybe boxed), or if it takes or refunds.  A box alone
		 * does not store a key that starts full: the escrow may have denied
		 * on what the reset ends (the takes before it), where the new key,
		 * full, grants. */
		const bool renews = state.absent && record.after_reset && !record.reset;
		if (record.takes || record.refunds) {
			CommitTakeOrRefund(state, record, limit);
		} else if (renews && (StartsBelowFull(limit) || record.reboxes)) {
			state.bucket = NewBucket(limit, record.at_us);
			state.absent = false;
			state.version++;
			state.commits++;
		}
		if (record.boxed && !state.absent) {
			/* Refilled to the denial, as the table stores it: what the call
			 * decided if nothing has changed since, else the committed bucket
			 * as it found it (a key reset since keeps no box). */
			if (Unchanged(state, record))
				state.bucket = record.next;
			else
				state.bucket = AsDecided(state, record, limit);
			/* Decided after a reset, on the new key: the box holds there,
			 * however the key was stored since. */
			if (record.after_reset && state.bucket.blocked_until_us < record.next.blocked_until_us)
				state.bucket.blocked_until_us = record.next.blocked_until_us;
			/* A committed box settles the key as stored with it, and
			 * outlives the abort of whoever stored the key first. */
			state.unsettled = false;
			state.version++;
			state.commits++;
		}
		if (record.reset) {
			state.absent = true;
			state.version++;
			state.commits++;
		}
		return end;
	}
	/* Its call judged the state by its limit, which may be one that never
	 * commits (a definition its own transaction wrote): unless a call has
	 * judged it since, the bucket must outlive it until one does. */
	end.keep = record.relimits && state.limit_epoch == record.limit_epoch;
	if (record.boxed && state.bucket.blocked_until_us == record.next.blocked_until_us) {
		state.bucket.blocked_until_us = record.prior_blocked_us;
		state.version++;
	}
	/* A bucket this transaction stored new, that no commit has touched
	 * since, goes again: freed, or forgotten while others hold it. */
	if (record.created && state.commits == record.commits_at) {
		if (state.holds == 0) {
			end.forget = true;
		} else if (!state.absent) {
			state.absent = true;
			state.version++;
		}
	}
	return end;
}

} /* namespace */

EscrowState
UnseenEscrow(const Limit &limit) noexcept
{
	EscrowState state{};
	state.bucket = NewBucket(limit, 0);
	state.limit = limit;
	state.prior_limit = limit;
	state.absent = true;
	return state;
}

EscrowState
SettledEscrow(const Bucket &bucket, const Limit &limit) noexcept
{
	EscrowState state = UnseenEscrow(limit);
	state.bucket = bucket;
	state.absent = false;
	return state;
}

EscrowStep
Decide(EscrowState &state, const Operation &operation, const Limit &limit,
       std::int64_t now_us) noexcept
{
	RL_CORE_ASSERT(InvariantsHold(state));
	const bool is_new = state.absent;
	const bool starts_below_full = StartsBelowFull(limit);
	const double pending = state.pending;
	const Bucket committed = Committed(state, limit, now_us);
	Bucket seen = Spent(committed, pending, limit, now_us);
	/* A limit changed while open transactions hold the state: their takes
	 * were decided under the limit before, and the table engine would make
	 * this call wait for them.  Until they end, a call counts on no more
	 * than each limit leaves. */
	const bool changed = state.limit != limit;
	const bool other_now = changed && state.holds > 0;
	if (other_now || state.prior_holds > 0 || state.resets > 0) {
		/* Compared refilled to now, each under its own limit, whether or
		 * not takes are pending. */
		seen = Available(state, limit, now_us);
		if (other_now)
			seen.tokens = Least(seen.tokens, Available(state, state.limit, now_us).tokens);
		if (state.prior_holds > 0)
			seen.tokens = Least(seen.tokens, Available(state, state.prior_limit, now_us).tokens);
		/* A reset is open: the table engine would make this call wait for
		 * it, and, committed, find the key new.  Until it ends, a call
		 * counts on no more than a new key leaves either, less what is
		 * pending. */
		if (state.resets > 0) {
			/* The new key as this call, or the last recorded one (which may
			 * have seen it first), starts it. */
			double start = Least(StartTokens(limit), StartTokens(state.limit));
			if (state.prior_holds > 0)
				start = Least(start, StartTokens(state.prior_limit));
			seen.tokens = Least(seen.tokens, start - pending);
		}
	}

	EscrowStep step{};
	step.decision = Apply(operation, seen, limit, now_us);
	const Decision &decision = step.decision;
	const bool take =
	    operation.kind == Operation::kTake && decision.allowed && operation.request.cost > 0.0;
	/* A refund that changes nothing but the refill stamp is recorded too, as
	 * the table stores it, so that later refill counts from the same point;
	 * so is one that would write on the committed bucket (its refill, a
	 * lowered burst's cap), which the table, waiting for what is pending,
	 * may find, and one under another limit than records still open were
	 * decided under (their refunds may raise the balance above its burst,
	 * which its commit then caps). */
	const bool refund = operation.kind == Operation::kRefund &&
	                    (decision.write || other_now || state.prior_holds > 0 ||
	                     Apply(operation, committed, limit, now_us).write);
	const bool boxed = decision.next.blocked_until_us != seen.blocked_until_us;
	/* Any call that writes stores a key never seen that starts below full,
	 * as the table does (a refund of nothing included), so that it earns
	 * from its first sighting. */
	const bool sighting = is_new && starts_below_full;
	/* So does it on the new key a reset open leaves, if that commits. */
	const bool sighting_if_reset = state.resets > 0 && starts_below_full;
	/* A denial while a reset is open that the new key alone would deny
	 * too, starting a box: the table's, waiting for the reset, starts it
	 * on the new key, also where a box the reset ends denies the call now
	 * (the box then waits for the reset's commit). */
	Bucket box_on_new = NewBucket(limit, now_us);
	if (state.resets > 0 && !decision.allowed)
		box_on_new = Apply(operation, box_on_new, limit, now_us).next;
	const bool reboxes = box_on_new.blocked_until_us != kNotBlocked;
	const bool boxes_if_reset = reboxes && !boxed;
	if (operation.kind == Operation::kCheck || operation.kind == Operation::kPeek ||
	    (!take && !refund && !boxed && !sighting && !sighting_if_reset && !boxes_if_reset))
		return step;

	step.recorded = true;
	/* The limit the state is judged by from now on; the one before is kept
	 * while records decided under it are open. */
	if (changed)
		KeepLimitBefore(state);
	state.limit = limit;
	EscrowRecord &record = step.record;
	record = Hold(state, now_us);
	/* A first sighting, a key reset before, or a penalty box is stored now
	 * (a box only ever on a denial, so with nothing pending of its own); a
	 * take or refund waits for its commit.  A box is stored on the committed
	 * bucket as it is: the refill to now that the table stores with it
	 * counts once it commits, so that an abort leaves nothing of it. */
	if (is_new || boxed) {
		/* On a key an open transaction stored new (unsettled), which calls
		 * see as new under their own limit, a box keeps the lesser balance
		 * of the two: the table's box finds the key as that transaction
		 * stored it, or, if it aborts, new. */
		const double sighted = state.bucket.tokens;
		const bool unsettled = !is_new && state.unsettled;
		state.bucket = committed;
		if (unsettled)
			state.bucket.tokens = Least(state.bucket.tokens, sighted);
		state.absent = false;
		state.version++;
	}
	if (boxed)
		state.bucket.blocked_until_us = decision.next.blocked_until_us;
	if (boxed || boxes_if_reset) {
		record.boxed = true;
		record.prior_blocked_us = committed.blocked_until_us;
	}
	if (take) {
		state.pending += operation.request.cost;
		record.takes = true;
		record.amount = operation.request.cost;
	}
	if (refund) {
		record.refunds = true;
		record.amount = decision.refunded;
	}
	record.exact = pending == 0.0;
	record.relimits = changed;
	record.after_reset = state.resets > 0;
	record.next = decision.next;
	if (boxes_if_reset)
		record.next.blocked_until_us = box_on_new.blocked_until_us;
	record.reboxes = reboxes;
	record.created = is_new;
	record.commits_at = state.commits;
	/* Stored new, starting below full (a first sighting, or a refund or a
	 * box on a key never seen): the others must not earn from it before it
	 * is committed. */
	if (sighting) {
		record.provisional = true;
		state.provisional++;
		state.unsettled = true;
	}
	record.version_after = state.version;
	RL_CORE_ASSERT(!record.boxed || (!take && !refund)); /* `amount` is the box before */
	RL_CORE_ASSERT(InvariantsHold(state));
	return step;
}

EscrowRecord
RecordReset(EscrowState &state) noexcept
{
	RL_CORE_ASSERT(!state.absent);
	EscrowRecord record = Hold(state, 0);
	state.resets++;
	record.reset = true;
	record.version_after = state.version;
	return record;
}

EscrowEnd
Finish(EscrowState &state, const EscrowRecord &record, const Limit &limit, bool commit) noexcept
{
	RL_CORE_ASSERT(state.holds > 0);
	const EscrowEnd end = FinishHeld(state, record, limit, commit);
	RL_CORE_ASSERT(InvariantsHold(state));
	return end;
}

bool
Forget(EscrowState &state) noexcept
{
	/* A bucket an open transaction holds stays, forgotten, until that
	 * transaction ends; its pending takes still count. */
	state.absent = true;
	state.version++;
	return state.holds == 0;
}

Bucket
Available(const EscrowState &state, const Limit &limit, std::int64_t now_us) noexcept
{
	Bucket available = Refill(Committed(state, limit, now_us), limit, now_us);
	available.tokens -= state.pending;
	return available;
}

Bucket
Listed(const EscrowState &state, std::int64_t now_us) noexcept
{
	return Spent(state.bucket, state.pending, state.limit, now_us);
}

bool
Remembered(const EscrowState &state) noexcept
{
	return StartsBelowFull(state.limit);
}

bool
Forgettable(const EscrowState &state, bool kept, std::int64_t now_us) noexcept
{
	if (state.holds > 0)
		return false;
	return state.absent ||
	       (!Remembered(state) && !kept && IsFull(state.bucket, state.limit, now_us));
}

bool
InvariantsHold(const EscrowState &state) noexcept
{
	return state.holds >= 0 && state.prior_holds >= 0 && state.prior_holds <= state.holds &&
	       state.provisional >= 0 && state.provisional <= state.holds &&
	       static_cast<std::int64_t>(state.resets) <= state.holds && std::isfinite(state.pending) &&
	       (state.holds > 0 || state.pending == 0.0) && (!state.unsettled || state.provisional > 0);
}

} /* namespace ratelimit::core */

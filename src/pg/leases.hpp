/*
 * src/pg/leases.hpp
 *
 * Places of a concurrency limit held as leases: rows of the unlogged table
 * ratelimit.leases, each `places` places of key (name, key) until
 * `expires_at` (the limiter's clock) or until rate_limit_release deletes
 * it.  A lease is written in the caller's transaction: a rollback gives it
 * back; once committed it outlives the transaction.  An expired lease
 * counts as free without a sweeper; rate_limit_purge deletes it later.
 * Leases of policies of either storage live in this table.
 */
#ifndef RATELIMIT_PG_LEASES_HPP
#define RATELIMIT_PG_LEASES_HPP

#include "pg/pg_includes.hpp"

#include "core/token_bucket.hpp"
#include "pg/policies.hpp"

namespace ratelimit::pg {

/* The lease a take wrote, if it wrote one. */
struct LeaseGrant {
	bool written; /* false: denied, or no place asked */
	pg_uuid_t id;
	TimestampTz expires_at;
};

/* Takes (take true) `places` places of key (name, key) of a limit of
 * `max_held` as one lease of `lease_us` microseconds, or only counts
 * whether it could (take false).  The decision: allowed, the places free
 * after the call (remaining), retry_after 0 when allowed, and when denied
 * the seconds until enough of the earliest leases expire; reset_after the
 * seconds until the last lease expires; refill_after the seconds until the
 * earliest expires (both 0 when no place is held).  A denial writes
 * nothing.  `grant` (may be NULL) receives the lease written.  A take's
 * policy must come from LookupPolicyToTake. */
core::Decision LeasePlaces(text *name, text *key, int max_held, int places, int64 lease_us,
                           bool take, LeaseGrant *grant);

/* Policy `name` (LookupPolicy's), for a call that takes by it (take) or
 * only checks: where it takes a lease, looked up again once the call holds
 * the name's lease lock, until its transaction ends, so that a drop of the
 * policy waits for the lease, and the call goes by the definition that
 * drop left (42704 if none). */
Policy LookupPolicyToTake(text *name, bool take);

/* Deletes every lease of policy `name` in the caller's transaction, as its
 * drop does: waits first for every transaction taking a lease of the name
 * to end, and keeps any other from taking one until the caller's ends.
 * How many. */
int64 DropLeases(text *name);

/* Deletes lease `id` in the caller's transaction: true if it was in force
 * (neither expired nor released). */
bool ReleaseLease(const pg_uuid_t *id);

/* Deletes, in the caller's transaction, the leases (of `name`, or of every
 * name when NULL) that expired by the clock and that no open transaction
 * is writing; how many (none where the table does not exist: a database
 * not yet updated). */
int64 PurgeLeases(text *name);

} /* namespace ratelimit::pg */

#endif

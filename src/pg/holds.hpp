/*
 * src/pg/holds.hpp
 *
 * Places of a concurrency limit held until the transaction ends, as the
 * table engine keeps them: each place is a transaction-level lock of
 * PostgreSQL's lock manager, taken without waiting, so that commit,
 * rollback, ROLLBACK TO SAVEPOINT, a cancelled statement, a terminated
 * backend and a crash all give it back, with no sweeper.
 */
#ifndef RATELIMIT_PG_HOLDS_HPP
#define RATELIMIT_PG_HOLDS_HPP

#include "pg/pg_includes.hpp"

#include "core/token_bucket.hpp"

namespace ratelimit::pg {

/* Takes (take true) `places` places of key (name, key) of a limit of
 * `max_held` places at once, for the caller's (sub)transaction, or only
 * counts whether it could (take false).  `places` is a whole number from 0
 * to max_held.  The decision: allowed, the places free after the call
 * (remaining), retry_after 0 when allowed and unknown (NaN, shown as NULL)
 * when denied, reset_after and refill_after 0 when no place is held and
 * unknown otherwise.  A denial holds nothing. */
core::Decision HoldPlaces(text *name, text *key, int max_held, int places, bool take);

} /* namespace ratelimit::pg */

#endif

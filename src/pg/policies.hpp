/*
 * src/pg/policies.hpp
 *
 * Named policies: the rate and burst stored in ratelimit.policies by
 * rate_limit_define(), cached per backend and dropped from the cache as soon
 * as a change to the table commits.
 */
#ifndef RATELIMIT_PG_POLICIES_HPP
#define RATELIMIT_PG_POLICIES_HPP

#include "pg/pg_includes.hpp"

#include "core/token_bucket.hpp"

namespace ratelimit::pg {

/* Registers the relcache callback that marks the policy cache stale. */
void RegisterPolicyCallbacks();

/* The limit of policy `name` (already checked: not empty, not too long).
 * Raises 42704 if no such policy is defined. */
core::Limit LookupPolicy(text *name);

/* Called by the trigger on ratelimit.policies: every backend's cache is
 * invalidated when the changing transaction commits (this one's at once). */
void PoliciesChanged(Oid policies_relid);

} /* namespace ratelimit::pg */

#endif

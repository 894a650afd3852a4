/* sql/update--0.3.0--0.4.0.sql: the upgrade from 0.3.0 to 0.4.0 */

-- scripts/sql-script --upgrade makes sql/ratelimit--0.3.0--0.4.0.sql from
-- this file (the Makefile); once 0.4.0 is released, that script is kept
-- and frozen, and this file goes.

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
--extension: \echo Use "ALTER EXTENSION ratelimit UPDATE TO '0.4.0'" to load this file. \quit

\ir names.sql

-- 0.4.0 makes its install script from one source per object (src/, shared
-- with the portable limiter and the router).  Its objects are those of
-- 0.3.0 but for the comment of rate_limit_headers(decision, policy, rate),
-- which named the native table, and the memory engine's counters of places
-- (rate_limit_memory_stats), new, and rate_limit_define's new last
-- parameter, enforce, with its column in ratelimit.policies and the view
-- rate_limit_policies, and concurrency limits (rate_limit_define_concurrency,
-- the columns kind, lease and lease_us, and rate_limit_headers, which
-- accepts the NULL wait of a concurrency limit's denial), and sliding
-- windows (rate_limit_define_sliding_window, the kind 'sliding', the column
-- previous of ratelimit.buckets, which rate_limit_buckets shows last), and
-- ratelimit.check_policy_options, the checks the define functions share.
\ir concurrency.sql
--upgrade: REVOKE ALL ON FUNCTION ratelimit.require_concurrency(text, interval) FROM PUBLIC;
\ir sliding.sql
--upgrade: REVOKE ALL ON FUNCTION ratelimit.require_sliding(text) FROM PUBLIC;
\ir src/enforce_upgrade.sql
-- Sliding windows (rate_limit_define_sliding_window, the kind 'sliding')
-- keep the count of the window before in each bucket's row.
ALTER TABLE ratelimit.buckets ADD COLUMN previous float8 NOT NULL DEFAULT '0'::float8;
COMMENT ON COLUMN ratelimit.buckets.previous IS
    'a sliding window''s count of the window before the one last_refill is in (tokens is then the window''s limit less its own count); 0 for a token bucket';
\ir src/headers_policy.sql
\ir src/headers.sql
\ir src/lease_headers.sql
\ir memory_stats.sql
--upgrade: REVOKE ALL ON FUNCTION @extschema@.rate_limit_memory_stats() FROM PUBLIC;
--upgrade: REVOKE ALL ON @extschema@.rate_limit_memory_stats FROM PUBLIC;
--upgrade: GRANT EXECUTE ON FUNCTION @extschema@.rate_limit_memory_stats() TO pg_read_all_stats;
--upgrade: GRANT SELECT ON @extschema@.rate_limit_memory_stats TO pg_read_all_stats;
-- rate_limit_buckets shows previous, last (src/buckets_upgrade.sql).
ALTER FUNCTION @extschema@.rate_limit_buckets(text) RENAME TO rate_limit_buckets_0_3_0;
\ir buckets.sql
\ir src/buckets_upgrade.sql

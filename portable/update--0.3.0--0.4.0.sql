-- portable/update--0.3.0--0.4.0.sql: the upgrade of the extension
-- ratelimit_portable from 0.3.0 to 0.4.0.
--
-- scripts/sql-script --upgrade makes ratelimit_portable--0.3.0--0.4.0.sql
-- from this file (the Makefile); once 0.4.0 is released, that script is
-- kept and frozen, and this file goes.

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
--extension: \echo Use "ALTER EXTENSION ratelimit_portable UPDATE TO '0.4.0'" to load this file. \quit

\ir names.sql

-- 0.4.0 makes rate_limit_define, rate_limit_drop and rate_limit_headers
-- from the native extension's sources (../sql/src/).  A definition or
-- removal of a policy is counted by a trigger on rl_policies, which the two
-- called before: the function they called goes.
DROP FUNCTION rl_policies_change();
\ir policy_changes.sql
\ir memory_engine.sql
\ir concurrency.sql
-- A sliding window's count of the window before, beside a bucket's state
-- (a token bucket keeps 0 there), and its algebra (sliding.sql), which
-- replaces 0.3.0's refusal.
ALTER TABLE @extschema@.rl_buckets ADD COLUMN previous float8 NOT NULL DEFAULT '0'::pg_catalog.float8;
\ir sliding.sql
-- rl_apply stores sliding windows too (its new last parameter, sliding),
-- and a token bucket's write stores previous 0 (apply.sql, the quick path
-- of policy_take.sql and take_all.sql's rl_take_buckets).
DROP FUNCTION rl_apply(text, text, rl_limit, rl_request, text, float8, float8);
\ir apply.sql
-- rate_limit_define's new last parameter, enforce, with its column in
-- rl_policies and the view rate_limit_policies; the columns of concurrency
-- limits and rate_limit_define_concurrency (places held until the
-- transaction ends, concurrency.sql); rate_limit_headers, which accepts a
-- NULL wait.
\ir ../sql/src/enforce_upgrade.sql
\ir ../sql/src/headers_policy.sql
\ir ../sql/src/headers.sql
\ir ../sql/src/lease_headers.sql

-- 0.4.0 takes and checks by a policy's name, and with explicit parameters
-- in tokens a second, in one read and at most one write in the common case,
-- in expressions PostgreSQL inlines (quick.sql), and tells YugabyteDB from
-- PostgreSQL (platform.sql): there it reads policies and purges without
-- system columns (policy_lookup.sql, maintenance.sql).
\ir platform.sql
\ir quick.sql
\ir policy_lookup.sql
\ir policy_take.sql
-- A report-only policy (enforce false) starts no penalty box and answers
-- its would-be denials as allowed, also among several limits at once.
\ir policy_decide.sql
-- rl_take_buckets takes sliding windows too (b_sliding).
DROP FUNCTION rl_take_buckets(text[], text[], rl_limit[], rl_request[], float8[]);
\ir take_all.sql
-- rate_limit_refund refuses a concurrency limit.
\ir policy_refund.sql
\ir explicit_take.sql
-- rate_limit_buckets shows previous, last (../sql/src/buckets_upgrade.sql).
ALTER FUNCTION @extschema@.rate_limit_buckets(text) RENAME TO rate_limit_buckets_0_3_0;
\ir maintenance.sql
\ir ../sql/src/buckets_upgrade.sql

-- The new routines' privileges, as an install gives them.
\ir rights.sql
\ir owner.sql

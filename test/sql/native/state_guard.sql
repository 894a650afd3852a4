--
-- What only the native module guards (the portable limiter, in SQL, has
-- none of it, or less: portable_maintenance.sql): a parallel worker may not
-- write, the clock setting is the superuser's, the direct path refuses a
-- state table altered behind its back, and the procedures that commit as
-- they go refuse to run where they cannot.  (Moved here from errors.sql,
-- purge.sql and reset_limit.sql, which both limiters run.)
--
\i test/sql/include/error_of.sql
-- The module loaded first, so that its settings are defined.
SELECT allowed FROM rate_limit_check('err', 'k', 1, 1, 5);
SET ratelimit.fixed_clock = 1000;

-- A parallel worker may not write: 25000 (the functions are PARALLEL UNSAFE,
-- so it takes a wrapper that lies about its safety to get there).
CREATE FUNCTION pg_temp.unsafe_take() RETURNS boolean
    LANGUAGE sql PARALLEL SAFE
    AS $$SELECT allowed FROM rate_limit_take('err', 'parallel', 1, 1, 5)$$;
-- force_parallel_mode up to PostgreSQL 15, debug_parallel_query from 16
SELECT CASE WHEN current_setting('server_version_num')::int >= 160000
            THEN 'debug_parallel_query' ELSE 'force_parallel_mode' END AS parallel_setting \gset
SET :parallel_setting = on;
SET parallel_setup_cost = 0;
SET max_parallel_workers_per_gather = 1;
SELECT pg_temp.error_of($$SELECT pg_temp.unsafe_take()$$) ~ '^25000: cannot execute rate_limit_take\(\) during a parallel operation' AS refused;
RESET :parallel_setting;
RESET parallel_setup_cost;
RESET max_parallel_workers_per_gather;

-- Nobody but a superuser (or a role granted SET on it) may move the clock.
CREATE ROLE ratelimit_app NOLOGIN;
SET ROLE ratelimit_app;
SELECT pg_temp.error_of($$SET ratelimit.fixed_clock = 5$$);
RESET ROLE;
DROP ROLE ratelimit_app;

-- The direct path bypasses triggers, RLS, constraints and extra indexes, so a
-- table that has any is refused (55000) rather than silently bypassed.  DDL
-- is rolled back, and the limiter works again afterwards.
CREATE FUNCTION pg_temp.no_op() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END$$;
BEGIN;
CREATE TRIGGER no_op BEFORE UPDATE ON ratelimit.buckets FOR EACH ROW EXECUTE FUNCTION pg_temp.no_op();
SELECT pg_temp.error_of($$SELECT rate_limit_take('err', 'k', 1, 1, 5)$$);
ROLLBACK;
BEGIN;
ALTER TABLE ratelimit.buckets ENABLE ROW LEVEL SECURITY;
SELECT pg_temp.error_of($$SELECT rate_limit_check('err', 'k', 1, 1, 5)$$);
ROLLBACK;
BEGIN;
ALTER TABLE ratelimit.buckets ADD CONSTRAINT positive CHECK (tokens > -1e9);
SELECT pg_temp.error_of($$SELECT rate_limit_take('err', 'k', 1, 1, 5)$$);
ROLLBACK;
BEGIN;
CREATE INDEX ON ratelimit.buckets (tokens);
SELECT pg_temp.error_of($$SELECT rate_limit_take('err', 'k', 1, 1, 5)$$);
ROLLBACK;
BEGIN;
ALTER TABLE ratelimit.buckets ADD COLUMN note text;
SELECT pg_temp.error_of($$SELECT rate_limit_take('err', 'k', 1, 1, 5)$$);
ROLLBACK;
BEGIN;
ALTER TABLE ratelimit.buckets RENAME TO buckets_moved;
SELECT pg_temp.error_of($$SELECT rate_limit_take('err', 'k', 1, 1, 5)$$);
ROLLBACK;
SELECT allowed, remaining FROM rate_limit_take('err', 'k', 1, 1, 5);
-- The procedures that commit as they go refuse to run where they cannot:
-- inside a transaction block, or from a function.
BEGIN;
CALL rate_limit_purge();
ROLLBACK;
SELECT pg_temp.error_of($$CALL rate_limit_purge()$$);
BEGIN;
CALL rate_limit_reset_limit('err');
ROLLBACK;
SELECT pg_temp.error_of($$CALL rate_limit_reset_limit('err')$$);

RESET ratelimit.fixed_clock;

--
-- The fixed clock in application tests: only a superuser may set it (or a
-- role granted SET on it: fixed_clock_grant, PostgreSQL 15 and later), and a
-- bucket stamped far in the future of the real clock by a fixed clock is not
-- frozen once the clock is unset.
--
\i test/sql/include/error_of.sql

-- The library defines the setting when it loads; before that, SET would
-- only make a placeholder.
LOAD 'ratelimit';
CREATE ROLE ratelimit_clock_other NOLOGIN;
SET ROLE ratelimit_clock_other;
SELECT pg_temp.error_of($$SET ratelimit.fixed_clock = 1000$$);
RESET ROLE;
DROP ROLE ratelimit_clock_other;

-- A take under a fixed clock in 2096 stamps the bucket there.  Back on the
-- real clock the stamp restarts at now: the bucket earns at once, and the
-- same call succeeds after retry_after.
SET ratelimit.fixed_clock = 4000000000;
SELECT allowed, remaining FROM rate_limit_take('future', 'k', 1.0, 10.0, 1.0);
RESET ratelimit.fixed_clock;
SELECT allowed, remaining, retry_after <= 0.1 AS short_wait FROM rate_limit_take('future', 'k', 1.0, 10.0, 1.0);
SELECT last_refill < now() + interval '1 hour' AS restamped FROM ratelimit.buckets WHERE name = 'future';
SELECT pg_sleep(0.15);
SELECT allowed FROM rate_limit_take('future', 'k', 1.0, 10.0, 1.0);
SELECT rate_limit_reset('future', 'k');

--
-- GRANT SET ON PARAMETER (PostgreSQL 15 and later; the Makefile leaves this
-- test out before): a role granted SET on ratelimit.fixed_clock may use it,
-- and another role still may not.
--
\i test/sql/include/error_of.sql

CREATE ROLE ratelimit_clock_tester NOLOGIN;
CREATE ROLE ratelimit_clock_other NOLOGIN;
GRANT SET ON PARAMETER ratelimit.fixed_clock TO ratelimit_clock_tester;
SET ROLE ratelimit_clock_tester;
SET ratelimit.fixed_clock = 1000;
SELECT allowed, remaining FROM rate_limit_take('clock', 'k', 1.0, 1.0, 5.0);
SET ratelimit.fixed_clock = 1002;
SELECT allowed, remaining FROM rate_limit_take('clock', 'k', 1.0, 1.0, 5.0);
RESET ratelimit.fixed_clock;
RESET ROLE;
SET ROLE ratelimit_clock_other;
SELECT pg_temp.error_of($$SET ratelimit.fixed_clock = 1000$$);
RESET ROLE;
REVOKE SET ON PARAMETER ratelimit.fixed_clock FROM ratelimit_clock_tester;
DROP ROLE ratelimit_clock_tester;
DROP ROLE ratelimit_clock_other;
SELECT rate_limit_reset('clock', 'k');

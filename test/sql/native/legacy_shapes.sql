--
-- Databases whose extension is not yet updated: the native module works
-- with the row types and the policy table of 0.1.0 and 0.2.0.  (Moved here
-- from take_all_wait.sql and reserve_by_policy.sql, which the portable
-- limiter runs too: it has one version, no older shapes.)
--
SET ratelimit.fixed_clock = 1000;
SELECT name FROM rate_limit_define('tw-hour', 100, '1 hour', 100);
SELECT name FROM rate_limit_define('llm', 6, '1 minute', 6, max_reserved => 6);

-- The 0.1.0/0.2.0 row shapes (a database not yet updated) still work: the
-- decisions column, and the decision's new columns, are simply not there.
BEGIN;
ALTER TYPE rate_limit_all_decision DROP ATTRIBUTE decisions;
ALTER TYPE rate_limit_decision DROP ATTRIBUTE name, DROP ATTRIBUTE quota, DROP ATTRIBUTE per,
    DROP ATTRIBUTE refill_after;
SELECT * FROM rate_limit_take_all(ARRAY['tw-hour'], ARRAY['legacy'], NULL, '1 second');
SELECT * FROM rate_limit_take('tw-hour', 'legacy', 1, '1 second');
SELECT * FROM rate_limit_take('tw-legacy', 'k', 1, 1, 5);
SELECT * FROM rate_limit_take_explicit('tw-legacy', 'k', 1, 1, per => '1 second');
ROLLBACK;

-- A database still at 0.2.0 has no max_reserved column: no reservation.
BEGIN;
-- (rate_limit_policies reads the column: the view goes first, until ROLLBACK.)
ALTER EXTENSION ratelimit DROP VIEW rate_limit_policies;
DROP VIEW rate_limit_policies;
ALTER TABLE ratelimit.policies DROP COLUMN max_reserved;
SELECT allowed, remaining, retry_after FROM rate_limit_take('llm', 'old', 6);
SELECT allowed, remaining, retry_after FROM rate_limit_take('llm', 'old', 1, '1 hour');
ROLLBACK;

SELECT rate_limit_drop('tw-hour'), rate_limit_drop('llm');
DELETE FROM ratelimit.buckets WHERE name IN ('tw-hour', 'tw-legacy', 'llm');
RESET ratelimit.fixed_clock;

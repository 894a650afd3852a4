--
-- The maintenance procedures of the portable limiter, where they differ
-- from the native ones (state_guard.sql): rate_limit_purge commits after
-- each batch of 1000 keys, so it refuses a transaction block (25001) and,
-- called from a function, fails at its first COMMIT (2D000, PostgreSQL's
-- own error); rate_limit_reset_limit runs as the limiter's owner, which a
-- procedure that commits cannot, so it deletes in the caller's transaction,
-- inside a block too, and rolls back with it.
--
SET ratelimit.fixed_clock = 1000;
\i test/sql/include/error_of.sql
SELECT (rate_limit_take('pm', 'k' || g, 1, 1, 5)).allowed FROM generate_series(1, 3) AS g;

BEGIN;
CALL rate_limit_purge();
ROLLBACK;
SELECT pg_temp.error_of($$CALL rate_limit_purge()$$);
-- Nothing was purged: the buckets are still spending.
SELECT count(*) FROM ratelimit.buckets WHERE name = 'pm';

BEGIN;
CALL rate_limit_reset_limit('pm');
SELECT count(*) FROM ratelimit.buckets WHERE name = 'pm';
ROLLBACK;
SELECT count(*) FROM ratelimit.buckets WHERE name = 'pm';
SELECT pg_temp.error_of($$CALL rate_limit_reset_limit('pm')$$);
SELECT count(*) FROM ratelimit.buckets WHERE name = 'pm';

-- Purge's batches, which it calls with its caller's rights, are anyone's:
-- a batch forgets only full buckets, and these are not full yet.
SELECT (rate_limit_take('pm', 'k' || g, 1, 1, 5)).allowed FROM generate_series(1, 3) AS g;
CREATE ROLE ratelimit_portable_app NOLOGIN;
SET ROLE ratelimit_portable_app;
SELECT deleted FROM rl_purge_batch(NULL, NULL, NULL, 1000);
RESET ROLE;
DROP ROLE ratelimit_portable_app;
-- Once they are, purge forgets them, batch by batch.
SET ratelimit.fixed_clock = 2000;
CALL rate_limit_purge('pm');
SELECT count(*) FROM ratelimit.buckets WHERE name = 'pm';
RESET ratelimit.fixed_clock;

-- The portable limiter has no memory engine: storage => 'memory' is
-- refused and nothing is stored.
SELECT rate_limit_define('pm-memory', 1, storage => 'memory');
SELECT count(*) FROM rate_limit_policies WHERE name = 'pm-memory';
SELECT (rate_limit_define('pm-table', 1, storage => 'table')).storage;
SELECT rate_limit_drop('pm-table');

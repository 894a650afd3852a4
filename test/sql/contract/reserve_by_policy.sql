--
-- Reservation by policy: rate_limit_take(name, key, cost, max_wait) may grant
-- with a debt when the reserved work may start within max_wait and the debt
-- stays within the policy's max_reserved (0, the default, allows none).
-- (Before 0.3.0 a policy could not be reserved against at all.)
--
SET ratelimit.fixed_clock = 1000;
\i test/sql/include/error_of.sql

-- pg_temp.retry(policy, key, cost, max_wait, at, wait): whether
-- rate_limit_check grants one microsecond before `at` + `wait` seconds, and
-- at that instant.
CREATE FUNCTION pg_temp.retry(policy text, k text, cost float8, max_wait interval, at numeric,
                              wait numeric, OUT sooner boolean, OUT at_retry_after boolean)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_catalog.set_config('ratelimit.fixed_clock', (at + wait - 0.000001)::text, true);
    SELECT allowed INTO sooner FROM rate_limit_check(policy, k, cost, max_wait);
    PERFORM pg_catalog.set_config('ratelimit.fixed_clock', (at + wait)::text, true);
    SELECT allowed INTO at_retry_after FROM rate_limit_check(policy, k, cost, max_wait);
END $$;

-- 6 a minute (one every 10 s), burst 6; a key may owe up to 6.
SELECT name, rate, per, burst, max_reserved
  FROM rate_limit_define('llm', 6, '1 minute', 6, max_reserved => 6);
SELECT * FROM rate_limit_take('llm', 'team:7', 6);
-- 3 more, accepting to wait 31 s: granted now for work that starts in 30 s.
SELECT * FROM rate_limit_take('llm', 'team:7', 3, max_wait => '31 seconds');
-- 3 more within 31 s would start in 60 s: denied.  The debt allowed is what
-- refills within max_wait less 16 us (3.0999984), so the same call is granted
-- once 2.9000016 tokens have refilled: 29.000016 s, exactly.
SELECT * FROM rate_limit_take('llm', 'team:7', 3, max_wait => '31 seconds');
SELECT * FROM pg_temp.retry('llm', 'team:7', 3, '31 seconds', 1000, 29.000016);
SET ratelimit.fixed_clock = 1029.000016;
SELECT allowed, remaining, retry_after FROM rate_limit_take('llm', 'team:7', 3, '31 seconds');
-- max_reserved caps the debt whatever max_wait allows: 6 tokens.
SET ratelimit.fixed_clock = 1000;
SELECT allowed, remaining, retry_after FROM rate_limit_take('llm', 'team:8', 12, '1 hour');
SELECT allowed, remaining, retry_after FROM rate_limit_take('llm', 'team:8', 1, '1 hour');
-- NULL or zero max_wait: no reservation; negative: an error.
SELECT allowed, remaining, retry_after FROM rate_limit_take('llm', 'team:9', 6);
SELECT allowed, remaining, retry_after FROM rate_limit_take('llm', 'team:9', 1, NULL);
SELECT allowed, remaining, retry_after FROM rate_limit_take('llm', 'team:9', 1, '0 seconds');
SELECT pg_temp.error_of($$SELECT rate_limit_take('llm', 'team:9', 1, '-1 second')$$);
-- (an interval compares as 30-day months but lasts as date_part('epoch') counts it)
SELECT pg_temp.error_of($$SELECT rate_limit_check('llm', 'team:9', 1, '1 mon -31 days')$$);

-- A cost that could never be granted, even by reservation: 22023.
SELECT pg_temp.error_of($$SELECT rate_limit_take('llm', 'team:9', 13, '1 hour')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take('llm', 'team:9', 8, '5 seconds')$$);

-- max_reserved 0 (the default): no reservation, whatever max_wait; a cost
-- above burst is then an error, with advice fit for a policy.
SELECT name, max_reserved FROM rate_limit_define('strict', 6, '1 minute');
SELECT allowed, remaining FROM rate_limit_take('strict', 'k', 6);
SELECT allowed, remaining, retry_after FROM rate_limit_take('strict', 'k', 1, '1 hour');
SELECT pg_temp.error_of($$SELECT rate_limit_take('strict', 'k', 7, '1 hour')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take('strict', 'k', 7)$$);

-- A role with the default grants can take from a policy, and reserve where
-- its owner allows it, but cannot push a bucket of a policy with
-- max_reserved 0 into debt.
CREATE ROLE ratelimit_reserve_app;
SET ROLE ratelimit_reserve_app;
SELECT allowed, remaining FROM rate_limit_take('strict', 'app', 6, '1 hour');
SELECT allowed, remaining, retry_after FROM rate_limit_take('strict', 'app', 1, '1 hour');
SELECT allowed, remaining, retry_after FROM rate_limit_take('llm', 'app', 7, '1 minute');
RESET ROLE;
SELECT key, tokens FROM ratelimit.buckets WHERE key = 'app' ORDER BY name;
DROP ROLE ratelimit_reserve_app;

-- Fixed windows of a minute, 10 at each minute's start (the next at 1020 s):
-- a reservation counts whole windows within max_wait, whatever the phase.
SELECT name, max_reserved FROM rate_limit_define('win', 10, '1 minute', fixed_window => true,
                                                 window_start => '0', max_reserved => 100);
SELECT allowed, remaining, retry_after, refill_after FROM rate_limit_take('win', 'k', 10);
SELECT allowed, remaining, retry_after, refill_after FROM rate_limit_take('win', 'k', 10, '1 minute');
SELECT allowed, remaining, retry_after, refill_after FROM rate_limit_take('win', 'k', 5, '1 minute');
SELECT allowed, remaining, retry_after, refill_after FROM rate_limit_take('win', 'k', 5, '2 minutes');
SELECT allowed, remaining, retry_after FROM rate_limit_take('win', 'k', 1, '59 seconds');

-- A floor rate: 1 an hour, but at least 3600 an hour (1 a second) below one
-- second's worth: a debt is repaid at the floor rate.
SELECT name FROM rate_limit_define('floor', 1, '1 hour', 10, floor_rate => 3600, max_reserved => 10);
SELECT allowed, remaining FROM rate_limit_take('floor', 'k', 10);
SELECT allowed, remaining, retry_after FROM rate_limit_take('floor', 'k', 5, '10 seconds');
SELECT allowed, remaining, retry_after FROM rate_limit_take('floor', 'k', 6, '10 seconds');

-- Jitter stretches denials, never a reservation's wait (it stays within max_wait).
SELECT name FROM rate_limit_define('jit', 1, '1 second', 1, jitter => 1, max_reserved => 5);
SELECT allowed FROM rate_limit_take('jit', 'k', 1);
SELECT allowed, remaining, retry_after FROM rate_limit_take('jit', 'k', 2, '2.5 seconds');
SELECT allowed, retry_after > 0.5 AS stretched FROM rate_limit_take('jit', 'k', 1, '2.5 seconds');

-- A sharded key (2 shards of 5 a second, burst 5, each may owe 4 / 2 = 2):
-- when the shards cannot serve the cost from tokens, the richest shard
-- reserves it within its share.
SELECT name FROM rate_limit_define('sh', 10, '1 second', 10, shards => 2, max_reserved => 4);
SELECT allowed, remaining FROM rate_limit_take('sh', 'k', 10);
SELECT allowed, remaining, retry_after FROM rate_limit_take('sh', 'k', 2, '1 second');
SELECT allowed, remaining, retry_after FROM rate_limit_take('sh', 'k', 2, '1 second');
SELECT array_agg(tokens ORDER BY key) AS shard_tokens FROM ratelimit.buckets WHERE name = 'sh';
-- Both shards owe 2: a third reservation waits until one may owe 1 more.
SELECT allowed, remaining, retry_after FROM rate_limit_take('sh', 'k', 1, '1 second');
SELECT * FROM pg_temp.retry('sh', 'k', 1, '1 second', 1000, 0.2);
-- A cost above what two shards hold may still be reserved on one shard
-- (here each may owe 10, as much as refills in 2 s).
SELECT name FROM rate_limit_define('sh2', 10, '1 second', 10, shards => 2, max_reserved => 20);
SELECT allowed, remaining, retry_after FROM rate_limit_take('sh2', 'k', 12, '3 seconds');
SELECT array_agg(tokens ORDER BY key) AS shard_tokens FROM ratelimit.buckets WHERE name = 'sh2';
SELECT pg_temp.error_of($$SELECT rate_limit_take('sh2', 'k2', 16, '3 seconds')$$);

-- A reservation belongs to the caller's transaction: rolled back, the debt
-- is gone.
SELECT allowed, remaining FROM rate_limit_take('llm', 'rb', 6);
BEGIN;
SELECT allowed, remaining FROM rate_limit_take('llm', 'rb', 3, '1 minute');
ROLLBACK;
SELECT remaining FROM rate_limit_check('llm', 'rb', 0);

-- rate_limit_check with max_wait answers as the take would, writing nothing.
SELECT tokens FROM ratelimit.buckets WHERE name = 'llm' AND key = 'rb';
SELECT allowed, remaining, retry_after FROM rate_limit_check('llm', 'rb', 3, '1 minute');
SELECT tokens FROM ratelimit.buckets WHERE name = 'llm' AND key = 'rb';
SELECT count(*) FROM ratelimit.buckets WHERE name = 'llm' AND key = 'never-seen';
SELECT allowed, remaining, retry_after FROM rate_limit_check('llm', 'never-seen', 9, '1 minute');
SELECT count(*) FROM ratelimit.buckets WHERE name = 'llm' AND key = 'never-seen';

SELECT rate_limit_drop(name) FROM ratelimit.policies WHERE name IN ('llm', 'strict', 'win', 'floor', 'jit', 'sh', 'sh2')
 ORDER BY name;
DELETE FROM ratelimit.buckets WHERE name IN ('llm', 'strict', 'win', 'floor', 'jit', 'sh', 'sh2');

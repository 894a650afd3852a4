--
-- Named policies (rate_limit_define / rate_limit_drop, and take/check by name)
-- and refunds.
--
SET ratelimit.fixed_clock = 1000;

-- pg_temp.error_of(statement): the error a statement raises, field by field.
\i test/sql/include/error_of.sql

-- 10 per minute, burst 5; tiers are just several policies.
SELECT rate_limit_define('api-free', 10, '1 minute', 5);
SELECT rate_limit_define('api-pro', 600, '1 minute', 100);
SELECT rate_limit_define('login', 5, '15 minutes');   -- burst defaults to the rate
SELECT name, rate, per, burst, tokens_per_second FROM ratelimit.policies ORDER BY name;

-- take and check by name; cost defaults to 1.
SELECT * FROM rate_limit_take('api-free', 'user:1');
SELECT * FROM rate_limit_take('api-free', 'user:1', 4);
SELECT * FROM rate_limit_take('api-free', 'user:1');
SELECT * FROM rate_limit_check('api-free', 'user:1');
SELECT * FROM rate_limit_take('api-pro', 'user:1', 50);
SET ratelimit.fixed_clock = 1030;
SELECT * FROM rate_limit_take('api-free', 'user:1');
SELECT * FROM rate_limit_check('login', 'alice', 5);

-- Redefining replaces the policy; the next call uses it (stored tokens are
-- capped at the new burst).
SELECT * FROM rate_limit_take('api-pro', 'user:1', 0);
SELECT rate_limit_define('api-pro', 60, '1 minute', 20);
SELECT * FROM rate_limit_take('api-pro', 'user:1', 0);
-- A definition rolled back is forgotten by this backend's cache too.
BEGIN;
SELECT rate_limit_define('api-pro', 1, '1 hour', 1000);
SELECT capacity FROM rate_limit_check('api-pro', 'user:2');
ROLLBACK;
SELECT capacity FROM rate_limit_check('api-pro', 'user:2');

-- Refund: exact, never beyond burst; the state as stored.
SELECT * FROM rate_limit_refund('api-free', 'user:1', 0.5);
SELECT * FROM rate_limit_refund('api-free', 'user:1', 100);
SELECT tokens FROM ratelimit.buckets WHERE name = 'api-free' AND key = 'user:1';
-- A refund to a key never seen writes nothing (it is full already).
SELECT * FROM rate_limit_refund('api-free', 'nobody', 1);
SELECT count(*) FROM ratelimit.buckets WHERE key = 'nobody';
-- Reserve an estimate, then refund what was not used (explicit-rate form).
SELECT allowed, remaining, retry_after FROM rate_limit_take('llm-budget', 'team:7', 800, 100, 1000);
SELECT allowed, remaining, retry_after FROM rate_limit_take('llm-budget', 'team:7', 500, 100, 1000, reserve => true);
SELECT allowed, remaining, retry_after FROM rate_limit_refund('llm-budget', 'team:7', 350, 100, 1000);
-- A refund rolls back with its transaction.
BEGIN;
SELECT remaining FROM rate_limit_refund('llm-budget', 'team:7', 50, 100, 1000);
ROLLBACK;
SELECT remaining FROM rate_limit_check('llm-budget', 'team:7', 0, 100, 1000);

-- Initial balance: new keys of a policy may start with fewer tokens than the
-- burst (here 2 of 10); so does a key that is reset.
SELECT rate_limit_define('trial', 1, '1 second', 10, initial => 2);
SELECT * FROM rate_limit_check('trial', 'new-user', 1);
SELECT * FROM rate_limit_take('trial', 'new-user', 2);
SELECT * FROM rate_limit_take('trial', 'new-user', 1);
SELECT remaining FROM rate_limit_refund('trial', 'other-user', 3);
SELECT rate_limit_reset('trial', 'new-user');
SELECT remaining FROM rate_limit_check('trial', 'new-user', 0);

-- Jitter: retry_after stretched by up to the fraction, the same for the same
-- key, different across keys, never shorter than the exact wait (1 s here).
SELECT rate_limit_define('jittery', 1, '1 second', 1, jitter => 0.5);
SELECT rate_limit_define('steady', 1, '1 second', 1);
SELECT count(*) FROM generate_series(1, 100) AS g,
    LATERAL rate_limit_take('jittery', 'k' || g) AS r, LATERAL rate_limit_take('steady', 'k' || g) AS s;
SELECT count(DISTINCT r.retry_after) > 90 AS spread,
       min(r.retry_after) >= 1 AS never_shorter, max(r.retry_after) <= 1.5 AS bounded,
       bool_and(s.retry_after = 1) AS steady_exact,
       bool_and(r.retry_after = again.retry_after) AS same_key_same_jitter
  FROM generate_series(1, 100) AS g,
       LATERAL rate_limit_check('jittery', 'k' || g) AS r,
       LATERAL rate_limit_check('jittery', 'k' || g) AS again,
       LATERAL rate_limit_check('steady', 'k' || g) AS s;
SELECT retry_after FROM rate_limit_check('jittery', 'k1');
SELECT pg_temp.error_of($$SELECT rate_limit_define('p', 1, '1 second', 10, initial => 11)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define('p', 1, '1 second', 10, initial => -1)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define('p', 1, jitter => 2)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define('p', 1, jitter => NULL)$$);

-- Fixed windows: 10 tokens a minute, added at once on the minute (windows
-- counted from midnight UTC); retry_after points at the window that serves.
SET ratelimit.fixed_clock = 1000;   -- 00:16:40 UTC; the next window starts at 00:17:00
SELECT rate_limit_define('per-minute', 10, '1 minute', fixed_window => true, window_start => '0 seconds');
SELECT * FROM rate_limit_take('per-minute', 'k', 10);
SELECT * FROM rate_limit_take('per-minute', 'k');
SET ratelimit.fixed_clock = 1019.999999;
SELECT allowed, retry_after FROM rate_limit_take('per-minute', 'k');
SET ratelimit.fixed_clock = 1020;
SELECT allowed, remaining FROM rate_limit_take('per-minute', 'k');
-- a capacity above one window lets unused tokens roll over, up to it
SELECT rate_limit_define('rollover', 10, '1 minute', 25, fixed_window => true, window_start => '0 seconds');
SELECT remaining, reset_after FROM rate_limit_take('rollover', 'k', 25);
SELECT allowed, retry_after FROM rate_limit_take('rollover', 'k', 15);
SET ratelimit.fixed_clock = 1140;
SELECT remaining FROM rate_limit_check('rollover', 'k', 0);
-- without window_start, each key's windows start at its own point of the
-- minute, so all clients do not come back at the same instant
SELECT rate_limit_define('spread', 10, '1 minute', fixed_window => true);
SELECT count(*) FROM generate_series(1, 100) AS g, LATERAL rate_limit_take('spread', 'k' || g, 10) AS d;
SELECT count(DISTINCT d.retry_after) > 90 AS spread, min(d.retry_after) > 0 AS waits,
       max(d.retry_after) <= 60 AS within_a_window
  FROM generate_series(1, 100) AS g, LATERAL rate_limit_check('spread', 'k' || g) AS d;
-- the header window of a fixed-window policy is its period
SELECT h.ratelimit_policy FROM rate_limit_check('per-minute', 'k') AS d,
    LATERAL rate_limit_headers(d, 'per-minute') AS h;
SELECT pg_temp.error_of($$SELECT rate_limit_define('p', 1, window_start => '0 seconds')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define('p', 1, fixed_window => true, window_start => '-1 second')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define('p', 1, fixed_window => NULL)$$);
SET ratelimit.fixed_clock = 1030;

-- Floor rate: a burst of 100 that refills at only 100 an hour, but a client
-- that spent it still gets 2 a second (7,200 an hour).
SET ratelimit.fixed_clock = 2000;
SELECT rate_limit_define('floored', 100, '1 hour', floor_rate => 7200);
SELECT remaining FROM rate_limit_take('floored', 'k', 100);
SELECT allowed, retry_after FROM rate_limit_take('floored', 'k');
SET ratelimit.fixed_clock = 2000.5;
SELECT allowed, remaining FROM rate_limit_take('floored', 'k');
-- the floor refills up to 2 tokens (one second's worth); beyond, the slow rate
SET ratelimit.fixed_clock = 2011;
SELECT round(remaining::numeric, 6) AS remaining FROM rate_limit_check('floored', 'k', 0);
SELECT pg_temp.error_of($$SELECT rate_limit_define('p', 1, floor_rate => -1)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define('p', 1, fixed_window => true, floor_rate => 5)$$);
SET ratelimit.fixed_clock = 1030;

-- Sharding: a global sign-up limit of 10 (2 a second) split over 2 rows.
-- Together the shards admit exactly the whole limit; a cost above one
-- shard's share is taken from both at once; reset and refund reach every
-- shard.  (With 2 shards every call sees both, so the output is fixed.)
SET ratelimit.fixed_clock = 3000;
SELECT rate_limit_define('signups', 2, '1 second', 10, shards => 2);
SELECT count(*) FILTER (WHERE d.allowed) AS granted, min(d.retry_after) FILTER (WHERE NOT d.allowed) AS retry_after
  FROM generate_series(1, 12) AS g, LATERAL rate_limit_take('signups', '', 1 + 0 * g) AS d;
SELECT count(*) AS shard_rows, sum(tokens) AS tokens FROM ratelimit.buckets WHERE name = 'signups';
SELECT rate_limit_reset('signups', '');
SELECT count(*) AS shard_rows FROM ratelimit.buckets WHERE name = 'signups';
SELECT * FROM rate_limit_take('signups', '', 6);
SELECT array_agg(tokens ORDER BY tokens) AS shard_tokens FROM ratelimit.buckets WHERE name = 'signups';
SELECT remaining FROM rate_limit_refund('signups', '', 4);
SELECT sum(tokens) AS shard_total FROM ratelimit.buckets WHERE name = 'signups';
SELECT allowed, remaining FROM rate_limit_check('signups', '', 7);
SELECT pg_temp.error_of($$SELECT rate_limit_take('signups', '', 11)$$);
-- with 4 shards a take draws on two of them: 5 of the 10 tokens at most
SELECT rate_limit_define('signups4', 2, '1 second', 10, shards => 4);
SELECT pg_temp.error_of($$SELECT rate_limit_take('signups4', '', 6)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take_all(ARRAY['signups'], ARRAY[''])$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define('p', 1, shards => 0)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define('p', 1, shards => 65)$$);
SET ratelimit.fixed_clock = 1030;

-- Dropping a policy: calls by name then fail with 42704; buckets remain.
SELECT rate_limit_drop('api-free');
SELECT rate_limit_drop('api-free');
SELECT pg_temp.error_of($$SELECT * FROM rate_limit_take('api-free', 'user:1')$$);
SELECT pg_temp.error_of($$SELECT * FROM rate_limit_check('never-defined', 'user:1')$$);
SELECT pg_temp.error_of($$SELECT * FROM rate_limit_refund('never-defined', 'user:1', 1)$$);
SELECT count(*) FROM ratelimit.buckets WHERE name = 'api-free';

-- Errors of the new functions.
SELECT pg_temp.error_of($$SELECT rate_limit_define(NULL, 1)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define('', 1)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define(repeat('p', 257), 1)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define('p', -1)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define('p', 'NaN')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define('p', 1, '0 seconds')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define('p', 1, '-1 minute')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define('p', 1, '1 second', 0)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define('p', 0)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take('login', 'alice', 6)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take('login', NULL)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take('login', 'alice', NULL)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take('', 'alice')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_refund('login', 'alice', -1)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_refund('login', 'alice', 'NaN')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_refund('login', 'alice', NULL)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_refund('llm-budget', 'k', 1, -1, 10)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_refund('llm-budget', 'k', 1, 1, NULL)$$);
SELECT count(*) AS policies_named_p FROM ratelimit.policies WHERE name = 'p';
BEGIN TRANSACTION READ ONLY;
SELECT pg_temp.error_of($$SELECT rate_limit_take('login', 'alice')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_refund('login', 'alice', 1)$$);
SELECT allowed FROM rate_limit_check('login', 'alice');
COMMIT;

-- Privileges: PUBLIC may take and check by name; defining, dropping and
-- refunding are granted on purpose.
CREATE ROLE ratelimit_policy_app NOLOGIN;
SET ROLE ratelimit_policy_app;
SELECT allowed FROM rate_limit_take('login', 'bob');
SELECT allowed FROM rate_limit_check('login', 'bob');
SELECT pg_temp.error_of($$SELECT rate_limit_define('login', 1000)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_drop('login')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_refund('login', 'bob', 1)$$);
SELECT pg_temp.error_of($$SELECT * FROM ratelimit.policies$$);
RESET ROLE;
DROP ROLE ratelimit_policy_app;

-- Policies are configuration: pg_dump keeps them (buckets are state: not).
-- (The portable limiter, ratelimit_portable, keeps them in rl_policies.)
SELECT unnest(extconfig)::regclass = coalesce(to_regclass('rl_policies'), 'ratelimit.policies'::regclass)
       AS policies_dumped
  FROM pg_extension WHERE extname IN ('ratelimit', 'ratelimit_portable');

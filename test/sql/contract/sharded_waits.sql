--
-- The waits of a sharded key follow its policy's refill: fixed windows, floor
-- rates and shards held at their burst.  A denial's retry_after is honoured
-- and exact: one microsecond sooner the same call is still denied, at
-- retry_after it is granted.  (With 2 shards every call sees both, so the
-- output is fixed.)
--
\set VERBOSITY terse

-- pg_temp.retry(policy, cost, at, wait): whether rate_limit_check grants
-- `cost` one microsecond before `at` + `wait` seconds and at that instant.
CREATE FUNCTION pg_temp.retry(policy text, cost float8, at numeric, wait numeric,
                              OUT sooner boolean, OUT at_retry_after boolean)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_catalog.set_config('ratelimit.fixed_clock', (at + wait - 0.000001)::text, true);
    SELECT allowed INTO sooner FROM rate_limit_check(policy, '', cost);
    PERFORM pg_catalog.set_config('ratelimit.fixed_clock', (at + wait)::text, true);
    SELECT allowed INTO at_retry_after FROM rate_limit_check(policy, '', cost);
END $$;

-- Fixed windows of a minute: 10 a minute over 2 shards, 5 each at every
-- minute's start.  Emptied half a second into a window, the next token
-- arrives with the next window, 59.5 s later (not after 1/(10/60) s).
SET ratelimit.fixed_clock = 6000.5;
SELECT rate_limit_define('sw-window', 10, '1 minute', 10, fixed_window => true,
                         window_start => '0', shards => 2);
SELECT allowed, remaining, retry_after, reset_after FROM rate_limit_take('sw-window', '', 10);
SELECT allowed, remaining, retry_after, reset_after FROM rate_limit_take('sw-window', '', 1) \gset
SELECT :'allowed' AS allowed, :remaining AS remaining, :retry_after AS retry_after,
       :reset_after AS reset_after;
SELECT * FROM pg_temp.retry('sw-window', 1, 6000.5, :retry_after);
-- and a cost above one shard's share needs both shards' next window
SELECT retry_after FROM rate_limit_check('sw-window', '', 7) \gset
SELECT :retry_after AS retry_after, * FROM pg_temp.retry('sw-window', 7, 6000.5, :retry_after);

-- A floor rate: 1 an hour over 2 shards, but never less than 2 a second
-- while a shard holds less than its share of one second's floor.  Emptied,
-- the key serves 1 token again after 0.5 s, not after half an hour.
SET ratelimit.fixed_clock = 7000;
SELECT rate_limit_define('sw-floor', 1, '1 hour', 10, floor_rate => 7200, shards => 2);
SELECT allowed, remaining, retry_after, reset_after FROM rate_limit_take('sw-floor', '', 10);
SELECT allowed, retry_after, reset_after FROM rate_limit_take('sw-floor', '', 1) \gset
SELECT :'allowed' AS allowed, :retry_after AS retry_after, :reset_after AS reset_after;
SELECT * FROM pg_temp.retry('sw-floor', 1, 7000, :retry_after);

-- Continuous refill with one shard full: 2 a second over 2 shards, 1 each.
-- The full shard earns nothing, so a cost of 6 waits until the empty one
-- holds 1 token: 1 s, not the 0.5 s that both shards refilling would take.
SET ratelimit.fixed_clock = 8000;
SELECT rate_limit_define('sw-full', 2, '1 second', 10, shards => 2);
SELECT allowed, remaining FROM rate_limit_take('sw-full', '', 5);
SELECT array_agg(tokens ORDER BY tokens) AS shard_tokens FROM ratelimit.buckets WHERE name = 'sw-full';
SELECT allowed, retry_after, reset_after FROM rate_limit_take('sw-full', '', 6) \gset
SELECT :'allowed' AS allowed, :retry_after AS retry_after, :reset_after AS reset_after;
SELECT * FROM pg_temp.retry('sw-full', 6, 8000, :retry_after);
SET ratelimit.fixed_clock = 8001;
SELECT allowed, remaining FROM rate_limit_take('sw-full', '', 6);

SELECT rate_limit_drop('sw-window'), rate_limit_drop('sw-floor'), rate_limit_drop('sw-full');
DELETE FROM ratelimit.buckets WHERE name LIKE 'sw-%';
RESET ratelimit.fixed_clock;

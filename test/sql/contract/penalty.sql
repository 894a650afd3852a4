--
-- The penalty box: a policy setting that, once a take is denied, keeps the
-- key denied for an interval, whatever it holds.  The denial that starts the
-- box is stored; nothing else changes about denials.
--
\i test/sql/include/error_of.sql
\set SHOW_CONTEXT never
SET ratelimit.fixed_clock = 1000;
SELECT name, penalty, penalty_us FROM rate_limit_define('pb', 2, '1 second', 2, penalty => '10 seconds');
SELECT (rate_limit_define('pb-other', 2, '1 second', 2)).name;

-- Two grants empty the bucket; the third take is denied and starts the box.
SELECT allowed, remaining, retry_after FROM rate_limit_take('pb', 'k', 1);
SELECT allowed, remaining, retry_after FROM rate_limit_take('pb', 'k', 1);
SELECT allowed, remaining, retry_after FROM rate_limit_take('pb', 'k', 1);
SELECT tokens, blocked_until - to_timestamp(1000) AS box FROM ratelimit.buckets WHERE name = 'pb';

-- Three seconds on the bucket is full again and still denies, until the box
-- ends; a check answers the same, a look (cost 0) answers, Retry-After says
-- when; a denial inside the box does not extend it.
SET ratelimit.fixed_clock = 1003;
SELECT allowed, remaining, retry_after FROM rate_limit_take('pb', 'k', 1);
SELECT allowed, remaining, retry_after FROM rate_limit_check('pb', 'k', 1);
SELECT allowed FROM rate_limit_take('pb', 'k', 0);
SELECT h.retry_after FROM rate_limit_take('pb', 'k', 1) AS d, rate_limit_headers(d) AS h;
SELECT blocked_until - to_timestamp(1000) AS box FROM ratelimit.buckets WHERE name = 'pb';
SELECT key, balance, blocked_until - to_timestamp(1000) AS box FROM rate_limit_buckets('pb');
-- Purge leaves a boxed bucket, full as it is.
CALL rate_limit_purge('pb');
SET ratelimit.fixed_clock = 1010;
SELECT allowed, remaining FROM rate_limit_take('pb', 'k', 1);
SELECT key, blocked_until FROM rate_limit_buckets('pb');

-- A check never starts a box; a denial without a penalty writes nothing.
SET ratelimit.fixed_clock = 1020;
SELECT allowed FROM rate_limit_take('pb', 'c', 2);
SELECT allowed, retry_after FROM rate_limit_check('pb', 'c', 1);
SELECT blocked_until FROM ratelimit.buckets WHERE name = 'pb' AND key = 'c';
SELECT allowed FROM rate_limit_take('pb-other', 'c', 2);
SELECT allowed, retry_after FROM rate_limit_take('pb-other', 'c', 1);
SELECT tokens, blocked_until FROM ratelimit.buckets WHERE name = 'pb-other' AND key = 'c';

-- A refund inside the box gives the tokens back and leaves the box; a reset
-- lifts it.
SET ratelimit.fixed_clock = 1030;
SELECT allowed FROM rate_limit_take('pb', 'r', 2);
SELECT allowed, retry_after FROM rate_limit_take('pb', 'r', 1);
SELECT remaining FROM rate_limit_refund('pb', 'r', 2);
SELECT allowed, remaining, retry_after FROM rate_limit_take('pb', 'r', 1);
SELECT rate_limit_reset('pb', 'r');
SELECT allowed, remaining FROM rate_limit_take('pb', 'r', 1);

-- All or nothing: the limit that denied is boxed, the other is not.
SET ratelimit.fixed_clock = 1040;
SELECT allowed FROM rate_limit_take('pb', 'a', 2);
SELECT allowed, binding_name, retry_after
FROM rate_limit_take_all(ARRAY['pb-other', 'pb'], ARRAY['a', 'a'], NULL);
SELECT name, blocked_until - to_timestamp(1040) AS box FROM ratelimit.buckets
WHERE key = 'a' AND name IN ('pb', 'pb-other') ORDER BY name;
SET ratelimit.fixed_clock = 1041;
SELECT allowed, retry_after FROM rate_limit_take_all(ARRAY['pb'], ARRAY['a'], NULL);

-- A box on a fixed window: 100 an hour in hourly windows, a minute's box.
-- Once the box starts, a take the window can serve waits for the box's
-- end (59 s here, not the hour), and one it cannot serve for the window
-- that brings the tokens; take, check, a reservation and take_all agree.
SET ratelimit.fixed_clock = 7210;
SELECT (rate_limit_define('pb-window', 100, '1 hour', fixed_window => true, window_start => '0 seconds',
                          max_reserved => 10, penalty => '1 minute')).name;
SELECT (rate_limit_define('pb-window-jitter', 100, '1 hour', fixed_window => true,
                          window_start => '0 seconds', jitter => 0.5, penalty => '1 minute')).name;
SELECT allowed, remaining FROM rate_limit_take('pb-window', 'w', 95);
SELECT allowed, remaining, retry_after FROM rate_limit_take('pb-window', 'w', 6);
SET ratelimit.fixed_clock = 7211;
SELECT allowed, remaining, retry_after FROM rate_limit_take('pb-window', 'w', 1);
SELECT allowed, remaining, retry_after FROM rate_limit_check('pb-window', 'w', 1);
SELECT allowed, remaining, retry_after FROM rate_limit_take('pb-window', 'w', 8, '2 hours');
SELECT h.retry_after FROM rate_limit_take('pb-window', 'w', 1) AS d, rate_limit_headers(d) AS h;
SELECT allowed, retry_after, (decisions[1]).retry_after AS decided
FROM rate_limit_take_all(ARRAY['pb-window'], ARRAY['w'], ARRAY[1]);
SELECT allowed, remaining, retry_after FROM rate_limit_take('pb-window', 'w', 6);
-- Jitter stretches the box's end, as any wait: by less than half of 59 s here.
SELECT allowed FROM rate_limit_take('pb-window-jitter', 'w', 95);
SELECT allowed FROM rate_limit_take('pb-window-jitter', 'w', 6);
SELECT allowed, retry_after >= 59 AND retry_after < 59 * 1.5 AS stretched_box
FROM rate_limit_take('pb-window-jitter', 'w', 1);
-- At the box's end the window serves the take; a second earlier it did not.
SET ratelimit.fixed_clock = 7269;
SELECT allowed FROM rate_limit_check('pb-window', 'w', 1);
SET ratelimit.fixed_clock = 7270;
SELECT allowed, remaining FROM rate_limit_take('pb-window', 'w', 1);

-- The admission bound: takes of 1 token every quarter second for 30 s (4
-- asked per second, 2 refilled) never grant more than burst + rate * t,
-- and nothing while a box holds the key.
CREATE TEMP TABLE calls (at float8, allowed boolean, boxed_before boolean);
DO $$
DECLARE
    at float8;
    boxed boolean;
BEGIN
    FOR i IN 0..120 LOOP
        at := 2000 + i * 0.25;
        PERFORM pg_catalog.set_config('ratelimit.fixed_clock', at::text, false);
        SELECT coalesce(bool_or(b.blocked_until > to_timestamp(at)), false) INTO boxed
          FROM ratelimit.buckets AS b WHERE b.name = 'pb' AND b.key = 'bound';
        INSERT INTO calls SELECT at, d.allowed, boxed FROM rate_limit_take('pb', 'bound', 1) AS d;
    END LOOP;
END
$$;
SELECT count(*) FILTER (WHERE allowed) AS granted,
       count(*) FILTER (WHERE allowed AND boxed_before) AS granted_in_a_box,
       count(*) FILTER (WHERE allowed) <= 2 + 2 * 30 AS within_bound
FROM calls;
-- Where the answers change: grants, a denial that starts a 10 s box, grants.
SELECT c.at - 2000 AS t, c.allowed
FROM (SELECT at, allowed, lag(allowed) OVER (ORDER BY at) AS before FROM calls) AS c
WHERE c.allowed IS DISTINCT FROM c.before ORDER BY c.at;

-- Errors: a negative penalty, a penalty with shards.
SELECT pg_temp.error_of($$SELECT rate_limit_define('pb-bad', 1, '1 second', penalty => '-1 second')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define('pb-bad', 1, '1 second', shards => 2, penalty => '1 minute')$$);
SELECT name, penalty FROM rate_limit_policies WHERE name LIKE 'pb%' ORDER BY name;

DELETE FROM ratelimit.buckets WHERE name LIKE 'pb%';
SELECT rate_limit_drop(n) FROM unnest(ARRAY['pb', 'pb-other', 'pb-window', 'pb-window-jitter']) AS n;
RESET ratelimit.fixed_clock;

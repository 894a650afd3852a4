--
-- rate_limit_take_all with max_wait: every limit is granted, each possibly
-- by reservation within max_wait under its own policy's max_reserved, or
-- none is.  Each limit's own decision is in `decisions`, in argument order.
--
SET ratelimit.fixed_clock = 1000;
\i test/sql/include/error_of.sql

SELECT name FROM rate_limit_define('tw-minute', 6, '1 minute', 6, max_reserved => 6);
SELECT name FROM rate_limit_define('tw-hour', 100, '1 hour', 100);     -- no reservation
SELECT name FROM rate_limit_define('tw-day', 1000, '1 day', 10, max_reserved => 100);

SELECT * FROM rate_limit_take_all(ARRAY['tw-minute', 'tw-hour'], ARRAY['u', 'u'], ARRAY[6, 1]);
-- tw-minute is empty: within 31 s it reserves 3 (work starts in 30 s); the
-- grant's retry_after is the longest wait among the limits.
SELECT allowed, retry_after, binding_name, remaining
  FROM rate_limit_take_all(ARRAY['tw-minute', 'tw-hour'], ARRAY['u', 'u'], ARRAY[3, 1], '31 seconds');
SELECT d.* FROM rate_limit_take_all(ARRAY['tw-hour', 'tw-minute'], ARRAY['v', 'v'], NULL, '10 seconds') AS a,
       unnest(a.decisions) AS d;
-- Beyond max_wait for one limit: none is taken; each limit says whether it
-- alone would have granted, and its own wait.
SELECT allowed, retry_after, binding_name, binding_key, remaining
  FROM rate_limit_take_all(ARRAY['tw-hour', 'tw-minute'], ARRAY['u', 'u'], ARRAY[1, 3], '31 seconds');
SELECT d.allowed, d.remaining, d.retry_after, d.name, d.quota, d.per, d.refill_after
  FROM rate_limit_take_all(ARRAY['tw-hour', 'tw-minute'], ARRAY['u', 'u'], ARRAY[1, 3], '31 seconds') AS a,
       unnest(a.decisions) WITH ORDINALITY AS d(allowed, remaining, retry_after, reset_after,
                                                capacity, name, quota, per, refill_after, n)
 ORDER BY n;
SELECT name, key, tokens FROM ratelimit.buckets WHERE name LIKE 'tw-%' ORDER BY name, key;
-- Without max_wait (or NULL, or 0) nothing is reserved.
SELECT pg_temp.error_of($$SELECT rate_limit_take_all(ARRAY['tw-minute'], ARRAY['w'], ARRAY[7])$$);
SELECT allowed, retry_after FROM rate_limit_take_all(ARRAY['tw-minute'], ARRAY['w'], ARRAY[6], NULL);
SELECT allowed, retry_after FROM rate_limit_take_all(ARRAY['tw-minute'], ARRAY['w'], ARRAY[1], '0 seconds');
-- A bucket named twice: its costs add up, under its cap.
SELECT allowed, remaining, retry_after
  FROM rate_limit_take_all(ARRAY['tw-day', 'tw-day'], ARRAY['x', 'x'], ARRAY[10, 5], '1 day');
SELECT pg_temp.error_of($$SELECT rate_limit_take_all(ARRAY['tw-day', 'tw-day'], ARRAY['y', 'y'], ARRAY[60, 60], '1 day')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take_all(ARRAY['tw-hour'], ARRAY['y'], ARRAY[101], '1 day')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take_all(ARRAY['tw-hour'], ARRAY['y'], NULL, '-1 day')$$);
-- Rolled back, a reservation is gone with it.
BEGIN;
SELECT allowed, remaining FROM rate_limit_take_all(ARRAY['tw-day'], ARRAY['z'], ARRAY[20], '1 day');
ROLLBACK;
SELECT count(*) FROM ratelimit.buckets WHERE name = 'tw-day' AND key = 'z';

SELECT rate_limit_drop('tw-minute'), rate_limit_drop('tw-hour'), rate_limit_drop('tw-day');
DELETE FROM ratelimit.buckets WHERE name LIKE 'tw-%';

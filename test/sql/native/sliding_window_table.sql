--
-- Sliding windows in the table engine: the row keeps tokens (max_count less
-- the current window's count), last_refill and previous (the count of the
-- window before); the policy table's constraint holds the kind to its shape.
--
\i test/sql/include/error_of.sql
\set SHOW_CONTEXT never
SET ratelimit.fixed_clock = 1000;
SELECT name FROM rate_limit_define_sliding_window('sw', 5, '10 seconds');
SELECT allowed FROM rate_limit_take('sw', 'k', 3);
SELECT key, tokens, extract(epoch FROM last_refill)::float8 AS last_refill, previous,
       extract(epoch FROM full_at)::float8 AS full_at
  FROM ratelimit.buckets WHERE name = 'sw';
SET ratelimit.fixed_clock = 1012;
SELECT allowed FROM rate_limit_take('sw', 'k', 1);
SELECT key, tokens, extract(epoch FROM last_refill)::float8 AS last_refill, previous,
       extract(epoch FROM full_at)::float8 AS full_at
  FROM ratelimit.buckets WHERE name = 'sw';
-- A denial writes nothing: the row's version is the one before it.
SELECT xmin::text AS version_xmin, ctid::text AS version_ctid
  FROM ratelimit.buckets WHERE name = 'sw' \gset
SELECT allowed FROM rate_limit_take('sw', 'k', 3);
SELECT xmin::text = :'version_xmin' AND ctid::text = :'version_ctid' AS same_version
  FROM ratelimit.buckets WHERE name = 'sw';
SELECT key, tokens, previous FROM ratelimit.buckets WHERE name = 'sw';
-- A token bucket keeps previous at 0.
SELECT name FROM rate_limit_define('tb', 2, '1 second');
SELECT allowed FROM rate_limit_take('tb', 'k');
SELECT key, tokens, previous FROM ratelimit.buckets WHERE name = 'tb';

-- Defined again as a token bucket, the key keeps its row: the window's
-- room (tokens) is the bucket's balance, which refills from last_refill;
-- defined a sliding window again, the balance is the window's room.
SELECT name, kind FROM rate_limit_define('sw', 5, '10 seconds');
SELECT allowed, remaining FROM rate_limit_check('sw', 'k', 0);
SELECT allowed, remaining FROM rate_limit_take('sw', 'k', 4);
SELECT key, tokens, previous FROM ratelimit.buckets WHERE name = 'sw';
SELECT name, kind FROM rate_limit_define_sliding_window('sw', 5, '10 seconds');
SELECT allowed, remaining FROM rate_limit_check('sw', 'k', 0);

-- Defined again with a smaller max_count, a key's room in the current
-- window is capped at the new max_count: what the window granted before
-- is not counted against it (3 of 10, then 5 of 5: 8 in one window).
SELECT name FROM rate_limit_define_sliding_window('sw', 10, '10 seconds');
SELECT allowed FROM rate_limit_take('sw', 'smaller', 3);
SELECT name FROM rate_limit_define_sliding_window('sw', 5, '10 seconds');
SELECT allowed, remaining FROM rate_limit_take('sw', 'smaller', 5);

-- A sliding window has no penalty box: defined again as one, a token
-- bucket's key that is boxed is judged by the window alone.
-- (8 of 10 taken, a denial of 3 starts the box, which then denies 1.)
SELECT name FROM rate_limit_define('sw', 1, '1 hour', 10, penalty => '1 hour');
SELECT allowed FROM rate_limit_take('sw', 'boxed', 8);
SELECT allowed FROM rate_limit_take('sw', 'boxed', 3);
SELECT allowed, remaining, retry_after FROM rate_limit_take('sw', 'boxed');
SELECT name FROM rate_limit_define_sliding_window('sw', 10, '10 seconds');
SELECT allowed, remaining FROM rate_limit_take('sw', 'boxed');
SELECT name FROM rate_limit_define_sliding_window('sw', 5, '10 seconds');

-- The constraint: rate equal to burst, every bucket option at its default.
SELECT pg_temp.error_of($$UPDATE ratelimit.policies SET rate = 4 WHERE name = 'sw'$$);
SELECT pg_temp.error_of($$UPDATE ratelimit.policies SET fixed_window = true WHERE name = 'sw'$$);
SELECT pg_temp.error_of($$UPDATE ratelimit.policies SET penalty = '1 second' WHERE name = 'sw'$$);
SELECT pg_temp.error_of($$UPDATE ratelimit.policies SET max_reserved = 1 WHERE name = 'sw'$$);
SELECT pg_temp.error_of($$UPDATE ratelimit.policies SET initial = 1 WHERE name = 'sw'$$);
SELECT pg_temp.error_of($$UPDATE ratelimit.policies SET shards = 2 WHERE name = 'sw'$$);
SELECT pg_temp.error_of($$UPDATE ratelimit.policies SET lease = '1 second' WHERE name = 'sw'$$);
SELECT rate_limit_drop('sw'), rate_limit_drop('tb');

-- Windows are multiples of their length since the Unix epoch, the length
-- counted as date_part('epoch', ...) counts an interval: a day starts at
-- 00:00 UTC, a week on a Thursday (1970-01-01 was one), a month is 30 days
-- (not a calendar month), a year 365.25 days.  A take at 2026-11-26
-- 00:00:00 UTC counts until the second boundary after it (reset_after).
SET ratelimit.fixed_clock = 1795651200;
SELECT w AS "window",
       to_timestamp(1795651200 + d.reset_after
                    - 2 * date_part('epoch', w::interval)) AT TIME ZONE 'UTC' AS window_start,
       to_timestamp(1795651200 + d.reset_after
                    - date_part('epoch', w::interval)) AT TIME ZONE 'UTC' AS window_end
  FROM unnest(ARRAY['1 day', '1 week', '1 month', '1 year']) WITH ORDINALITY AS u(w, i),
       LATERAL rate_limit_define_sliding_window('sw ' || w, 1, w::interval) AS p,
       LATERAL rate_limit_take('sw ' || w, 'k') AS d
 ORDER BY i;
SELECT count(*) FILTER (WHERE rate_limit_drop(name)) FROM ratelimit.policies WHERE name LIKE 'sw %';
RESET ratelimit.fixed_clock;

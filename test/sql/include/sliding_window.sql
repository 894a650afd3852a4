-- test/sql/include/sliding_window.sql: included by regression tests (\i)
-- after error_of.sql: sliding windows (rate_limit_define_sliding_window),
-- at most max_count in any window, estimated as
-- previous * (1 - (t - s) / W) + current, windows aligned on multiples of W
-- since the Unix epoch (the fixed clock counts from it: 1000 s is a
-- boundary of 10 s windows).  A denial writes nothing.  Run by the table
-- engine (test/sql/native/sliding_window.sql) and the memory engine
-- (test/sql/memory/memory_sliding_window.sql), with the same answers.
-- Leaves policies "sw" (report-only) and "sw-bucket" defined.
SET ratelimit.fixed_clock = 1000;
SELECT name, rate, per, burst, initial, jitter, fixed_window, window_start, floor_rate, shards,
       max_reserved, penalty, enforce, kind, lease
  FROM rate_limit_define_sliding_window('sw', 5, '10 seconds');
SELECT name, rate, per, burst, kind FROM rate_limit_policies WHERE name = 'sw';

-- Five in the window, then a denial: one fits again 2 s into the next
-- window (5 * 0.8 + 1 = 5), and the estimate is 0 two boundaries on.
SELECT * FROM rate_limit_take('sw', 'k', 2);
SELECT * FROM rate_limit_take('sw', 'k', 3);
SET ratelimit.fixed_clock = 1004;
SELECT * FROM rate_limit_take('sw', 'k');
SELECT * FROM rate_limit_check('sw', 'k');
SELECT * FROM rate_limit_check('sw', 'k', 0);
SELECT h.* FROM rate_limit_take('sw', 'k') AS d, rate_limit_headers(d) AS h;
SELECT h.* FROM rate_limit_take('sw', 'k') AS d, rate_limit_headers(d, 'sw') AS h;
SET ratelimit.fixed_clock = 1011.999999;
SELECT allowed, remaining, retry_after FROM rate_limit_take('sw', 'k');
SET ratelimit.fixed_clock = 1012;
SELECT * FROM rate_limit_take('sw', 'k');
SELECT allowed, remaining FROM rate_limit_take('sw', 'k');
-- 4 s in: 5 * 0.6 + 1 = 4, room for one more.
SET ratelimit.fixed_clock = 1014;
SELECT allowed, remaining FROM rate_limit_take('sw', 'k');

-- How inexact it is.  At most 2N - 1 in an arbitrary span of W: five at
-- the window's last microsecond, then four in the next window, all within
-- 10 s.  (In one aligned window, never more than 5.)
SET ratelimit.fixed_clock = 1029.999999;
SELECT allowed FROM rate_limit_take('sw', 'crowded', 5);
SELECT allowed FROM rate_limit_take('sw', 'crowded');
SET ratelimit.fixed_clock = 1032;
SELECT allowed, remaining FROM rate_limit_take('sw', 'crowded');
-- The listing shows the stored counts: tokens is max_count less the
-- current window's, previous the window before's.
SELECT key, tokens, previous FROM rate_limit_buckets('sw') WHERE key = 'crowded';
SET ratelimit.fixed_clock = 1034;
SELECT allowed, remaining FROM rate_limit_take('sw', 'crowded');
SET ratelimit.fixed_clock = 1036;
SELECT allowed, remaining FROM rate_limit_take('sw', 'crowded');
SET ratelimit.fixed_clock = 1038;
SELECT allowed, remaining FROM rate_limit_take('sw', 'crowded');
SELECT allowed, remaining FROM rate_limit_take('sw', 'crowded');
-- And a denial before N: five at a window's start, nothing for 15 s, yet
-- halfway through the next window the estimate is 2.5: two more only.
SET ratelimit.fixed_clock = 1040;
SELECT allowed FROM rate_limit_take('sw', 'early', 5);
SET ratelimit.fixed_clock = 1055;
SELECT allowed, remaining FROM rate_limit_take('sw', 'early', 2);
SELECT allowed, remaining, retry_after FROM rate_limit_take('sw', 'early');

-- Refunds lower the current window's count, not below 0; the previous
-- window's stays.
SELECT allowed, remaining FROM rate_limit_refund('sw', 'early', 5);
SELECT allowed, remaining FROM rate_limit_take('sw', 'early', 3);
-- Reset forgets the key.
SELECT rate_limit_reset('sw', 'early');
SELECT allowed, remaining FROM rate_limit_check('sw', 'early', 5);

-- Errors: a cost above max_count, a reservation, bad definitions.
SELECT pg_temp.error_of($$SELECT rate_limit_take('sw', 'k', 6)$$);
-- Costs of one window given twice add up: past max_count, never takable.
SELECT pg_temp.error_of($$SELECT rate_limit_take_all(ARRAY['sw', 'sw'], ARRAY['k', 'k'], ARRAY[3, 3])$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take('sw', 'k', 1, '1 minute')$$);
SELECT allowed FROM rate_limit_take('sw', 'zero-wait', 1, '0 seconds');
SELECT pg_temp.error_of($$SELECT rate_limit_define_sliding_window('sw2', 0, '1 minute')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define_sliding_window('sw2', 5, '0 seconds')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define_sliding_window('sw2', NULL, '1 minute')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define_sliding_window('sw2', 5, '1 minute', 'disk')$$);

-- Mixed with a token bucket in one all-or-nothing take: the window denies,
-- the bucket keeps its token.
SELECT name FROM rate_limit_define('sw-bucket', 10, '1 minute');
SET ratelimit.fixed_clock = 1100;
SELECT allowed, remaining FROM rate_limit_take('sw', 'mix', 4);
SELECT allowed, retry_after, binding_name, remaining
  FROM rate_limit_take_all(ARRAY['sw-bucket', 'sw'], ARRAY['mix', 'mix'], ARRAY[1, 2]);
SELECT allowed, remaining FROM rate_limit_check('sw-bucket', 'mix', 0);
SELECT allowed, retry_after, binding_name, remaining
  FROM rate_limit_take_all(ARRAY['sw-bucket', 'sw'], ARRAY['mix', 'mix'], ARRAY[1, 1]);
SELECT allowed, remaining FROM rate_limit_check('sw-bucket', 'mix', 0);
SELECT allowed, remaining FROM rate_limit_check('sw', 'mix', 0);

-- With a concurrency limit too, in a transaction: all three or none.  The
-- window is full (5 of 5 at 1100): denied, no token, no place held.
SELECT name FROM rate_limit_define_concurrency('sw-held', 1);
BEGIN;
SELECT allowed, binding_name, remaining
  FROM rate_limit_take_all(ARRAY['sw-bucket', 'sw', 'sw-held'], ARRAY['mix', 'mix', 'mix']);
SELECT allowed, remaining FROM rate_limit_check('sw-held', 'mix', 0);
SELECT allowed, remaining FROM rate_limit_check('sw-bucket', 'mix', 0);
COMMIT;
-- 2 s into the next window one fits (5 * 0.8 + 1 = 5): all three granted,
-- the place held until the transaction ends.
SET ratelimit.fixed_clock = 1112;
BEGIN;
SELECT allowed, binding_name, remaining
  FROM rate_limit_take_all(ARRAY['sw-bucket', 'sw', 'sw-held'], ARRAY['mix', 'mix', 'mix']);
SELECT allowed, remaining FROM rate_limit_check('sw-held', 'mix', 0);
ROLLBACK;
-- Rolled back: the window's unit, the token and the place are all back.
SELECT allowed, remaining FROM rate_limit_check('sw', 'mix', 0);
SELECT allowed, remaining FROM rate_limit_check('sw-bucket', 'mix', 0);
SELECT rate_limit_drop('sw-held');
SET ratelimit.fixed_clock = 1100;

-- Report-only: a would-be denial is allowed with the denial's numbers and
-- takes nothing.
SELECT name, enforce FROM rate_limit_define_sliding_window('sw', 5, '10 seconds', enforce => false);
SELECT * FROM rate_limit_take('sw', 'mix', 2);
SELECT allowed, remaining FROM rate_limit_take('sw', 'mix', 1);
SELECT allowed, remaining FROM rate_limit_check('sw', 'mix', 0);

-- The listing shows the balance now (N - estimate) and when the estimate
-- is 0; a purge then forgets the key, not before.
SELECT key, balance, full_at FROM rate_limit_buckets('sw') WHERE key = 'mix';
SET ratelimit.fixed_clock = 1119.999999;
CALL rate_limit_purge('sw');
SELECT count(*) FROM rate_limit_buckets('sw') WHERE key = 'mix';
SET ratelimit.fixed_clock = 1120;
CALL rate_limit_purge('sw');
SELECT count(*) FROM rate_limit_buckets('sw') WHERE key = 'mix';

RESET ratelimit.fixed_clock;

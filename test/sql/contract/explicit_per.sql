--
-- Explicit limits in the units of rate_limit_define: rate tokens per `per`
-- (an interval), burst by default the rate, reservation within max_wait
-- and max_reserved.  For trusted callers: refused on a name a policy governs.
--
SET ratelimit.fixed_clock = 1000;
\i test/sql/include/error_of.sql

-- The same numbers mean the same limit as a policy's: 60 per minute, burst
-- 60 by default.
SELECT name FROM rate_limit_define('per-policy', 60, '1 minute');
SELECT * FROM rate_limit_take('per-policy', 'k', 60);
SELECT * FROM rate_limit_take_explicit('per-explicit', 'k', 60, 60, per => '1 minute');
SET ratelimit.fixed_clock = 1000.5;
-- 60 per minute is one a second (not 60): half a second later, half a token.
SELECT * FROM rate_limit_check('per-policy', 'k', 0);
SELECT * FROM rate_limit_check_explicit('per-explicit', 'k', 0, 60, per => '1 minute');
-- An interval-typed fifth argument selects the same form.
SELECT allowed, remaining, capacity, quota, per
  FROM rate_limit_check_explicit('per-explicit', 'k', 0, 60, '1 minute'::interval);
-- A numeric fifth argument is still the 0.1.0 form: rate per second, burst.
SELECT * FROM rate_limit_take('per-second', 'k', 1, 10, 20);
-- burst given: the capacity; months and years count as rate_limit_define
-- counts them (30 days, 365.25 days).
SELECT capacity, quota, per, reset_after
  FROM rate_limit_take_explicit('per-explicit', 'month', 1, 30, per => '1 month', burst => 5);
SELECT remaining, reset_after
  FROM rate_limit_take_explicit('per-explicit', 'year', 365.25, 365.25, per => '1 year');

-- Names of their own: an untyped fifth argument is per here, burst in the
-- 0.1.0 forms, and neither call is ambiguous (as overloads of
-- rate_limit_take they were, 42725).
SELECT allowed, quota, per
  FROM rate_limit_take_explicit('per-explicit', 'positional', 1, 60, '1 minute');
SELECT pg_temp.error_of($$SELECT rate_limit_take_explicit('per-explicit', 'k', 1, 60, NULL)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take('per-second', 'k', 1, 60, NULL)$$);
SELECT allowed, capacity FROM rate_limit_take('per-second', 'untyped', 1, 60, '30');
SELECT remaining
  FROM rate_limit_refund_explicit('per-explicit', 'positional', 1, 60, '1 minute');

-- Reservation: within max_wait, and max_reserved tokens of debt (NULL: no
-- token cap).  1 a second, burst 2, emptied: 3 more start in 3 s.
SELECT allowed, remaining FROM rate_limit_take_explicit('per-reserve', 'k', 2, 1, per => '1 second', burst => 2);
SELECT allowed, remaining, retry_after, refill_after
  FROM rate_limit_take_explicit('per-reserve', 'k', 3, 1, per => '1 second', burst => 2, max_wait => '4 seconds');
SELECT allowed, remaining, retry_after
  FROM rate_limit_take_explicit('per-reserve', 'k', 1, 1, per => '1 second', burst => 2, max_wait => '3 seconds');
SELECT allowed, remaining, retry_after
  FROM rate_limit_check_explicit('per-reserve', 'k', 1, 1, per => '1 second', burst => 2,
                        max_wait => '1 hour', max_reserved => 3);
SELECT allowed, remaining, retry_after
  FROM rate_limit_take_explicit('per-reserve', 'k', 1, 1, per => '1 second', burst => 2, max_wait => '1 hour');
-- max_reserved without max_wait: no reservation.
SELECT allowed, remaining, retry_after
  FROM rate_limit_check_explicit('per-reserve', 'k', 1, 1, per => '1 second', burst => 2, max_reserved => 10);
SELECT pg_temp.error_of($$SELECT rate_limit_take_explicit('per-reserve', 'k', 3, 1, per => '1 second', burst => 2)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take_explicit('per-reserve', 'k', 9, 1, per => '1 second', burst => 2,
                                                 max_wait => '10 seconds', max_reserved => 5)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take_explicit('per-reserve', 'k', 1, 1, per => '1 second',
                                                 max_wait => '-1 second')$$);

-- Refund: the same units.
SELECT allowed, remaining FROM rate_limit_refund_explicit('per-reserve', 'k', 10, 1, per => '1 second', burst => 2);
SELECT allowed, remaining, capacity, quota, per
  FROM rate_limit_refund_explicit('per-explicit', 'k', 0.25, 60, per => '1 minute');

-- A name a policy governs is refused (42501), as for the 0.1.0 forms.
SELECT pg_temp.error_of($$SELECT rate_limit_take_explicit('per-policy', 'k', 1, 600, per => '1 minute')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_check_explicit('per-policy', 'k', 1, 600, per => '1 minute')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_refund_explicit('per-policy', 'k', 1, 600, per => '1 minute')$$);

-- Bad periods and numbers.
SELECT pg_temp.error_of($$SELECT rate_limit_take_explicit('per-bad', 'k', 1, 60, per => NULL)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take_explicit('per-bad', 'k', 1, NULL, per => '1 minute')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_refund_explicit('per-bad', 'k', 1, 60, per => NULL)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take_explicit('per-bad', 'k', 1, 60, per => '0 seconds')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take_explicit('per-bad', 'k', 1, 60, per => '-1 minute')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take_explicit('per-bad', 'k', 1, 60, per => '1 mon -30 days')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_check_explicit('per-bad', 'k', 1, 'NaN', per => '1 minute')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_check_explicit('per-bad', 'k', 1, 1e308, per => '1 microsecond')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_check_explicit('per-bad', 'k', 1, 0, per => '1 minute')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_check_explicit('per-bad', 'k', 61, 60, per => '1 minute')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_refund_explicit('per-bad', 'k', -1, 60, per => '1 minute')$$);
SELECT count(*) FROM ratelimit.buckets WHERE name = 'per-bad';

SELECT rate_limit_drop('per-policy');
DELETE FROM ratelimit.buckets WHERE name LIKE 'per-%';

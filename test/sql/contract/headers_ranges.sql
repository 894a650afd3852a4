--
-- rate_limit_headers() on extreme but valid decisions: every value is capped
-- at the largest structured-field integer (15 digits), never a bare
-- "out of range" error; a row no limiter call returns is refused with 22023.
--
SET ratelimit.fixed_clock = 1000;
\i test/sql/include/error_of.sql

-- A huge burst that refills slowly: the window (burst / rate) exceeds
-- float8 (once "value out of range: overflow").
SELECT rate_limit_define('glacial', 1e-5, '1 second', 1e308);
SELECT h.* FROM rate_limit_check('glacial', 'k', 0) AS d, LATERAL rate_limit_headers(d, 'glacial') AS h;
SELECT h.* FROM rate_limit_check('glacial', 'k', 0) AS d, LATERAL rate_limit_headers(d, 'glacial', 1e-300) AS h;
-- A tiny burst that refills fast: the window is below float8's smallest
-- number (once "value out of range: underflow"); it is one second.
SELECT h.* FROM rate_limit_check('tiny', 'k', 0, 10, 5e-324) AS d,
    LATERAL rate_limit_headers(d, 'tiny', 10) AS h;
SELECT h.* FROM rate_limit_check('tiny', 'k', 0, 1e308, 1) AS d,
    LATERAL rate_limit_headers(d, 'tiny', 1e308) AS h;
-- Waits beyond 15 digits are capped too.
SELECT allowed FROM rate_limit_take('slow', 'k', 1e300, 1e-300, 1e300);
SELECT d.allowed, d.retry_after, h.*
  FROM rate_limit_take('slow', 'k', 1, 1e-300, 1e300) AS d,
       LATERAL rate_limit_headers(d, 'slow', 1e-300) AS h;
SELECT d.allowed, d.remaining, d.retry_after, h.*
  FROM rate_limit_take('debt', 'k', 1e20, 1e-3, 1, reserve => true) AS d,
       LATERAL rate_limit_headers(d, 'debt', 1e-3) AS h;
-- The window stays exact where float8 division is exact.
SELECT h.ratelimit_policy FROM rate_limit_check('third', 'k', 0, 1.0 / 3, 1) AS d,
    LATERAL rate_limit_headers(d, 'third', 1.0 / 3) AS h;

-- Rows no limiter call returns (once "bigint out of range").
SELECT pg_temp.error_of($$SELECT rate_limit_headers(ROW(true, 1, 0, 0, -1e300, NULL, NULL, NULL, NULL)::rate_limit_decision, 'x', 1)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_headers(ROW(false, 1, 0, -1e300, 1, NULL, NULL, NULL, NULL)::rate_limit_decision, 'x', 1)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_headers(ROW(false, 1, -1e300, 0, 1, NULL, NULL, NULL, NULL)::rate_limit_decision, 'x', 1)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_headers(ROW(true, 1, 0, 0, 'Infinity', NULL, NULL, NULL, NULL)::rate_limit_decision, 'x', 1)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_headers(ROW(true, 'NaN', 0, 0, 1, NULL, NULL, NULL, NULL)::rate_limit_decision, 'x', 1)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_headers(ROW(true, 1, 'NaN', 0, 1, NULL, NULL, NULL, NULL)::rate_limit_decision, 'x', 1)$$);
-- A wait nobody can know (NULL: a concurrency limit's place comes back when
-- a holder's transaction ends) gives no t and no Retry-After.
SELECT * FROM rate_limit_headers(ROW(true, 1, 0, NULL, 1, NULL, NULL, NULL, NULL)::rate_limit_decision, 'x', 1);
SELECT * FROM rate_limit_headers(ROW(false, 0, NULL, NULL, 1, NULL, NULL, NULL, NULL)::rate_limit_decision, 'x', 1);
-- ... while a limiter's row with an infinite wait (rate 0) is fine.
SELECT h.* FROM rate_limit_take('never', 'k', 2, 0, 1, reserve => true) AS d,
    LATERAL rate_limit_headers(d, 'never', 0) AS h;

-- Leave no policy or bucket behind for the tests that follow.
DELETE FROM ratelimit.policies WHERE name = 'glacial';
DELETE FROM ratelimit.buckets WHERE name IN ('slow', 'debt', 'never');

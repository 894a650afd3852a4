--
-- rate_limit_define() and rate_limit_drop(): every input either makes a
-- policy the limiter can use, or is refused with 22023 (22004 for NULL) and
-- a detail and hint, leaving the policies as they were.  Periods count in
-- seconds as PostgreSQL's epoch of an interval does: a year (12 months) is
-- 365.25 days, each further month 30 days.
--
SET ratelimit.fixed_clock = 1000;
\i test/sql/include/error_of.sql

-- How months and years count.
SELECT rate_limit_define('month', 2592000, '1 month');
SELECT rate_limit_define('year', 31557600, '1 year');
SELECT rate_limit_define('12 months', 31557600, '12 months');
SELECT rate_limit_define('13 months', 34149600, '13 months');
SELECT name, per, tokens_per_second, window_us / 1000000 AS seconds
  FROM ratelimit.policies ORDER BY window_us, name;

-- An interval compares as if a year were 360 days, but lasts 365.25:
-- '-1 year 361 days' is greater than '0' and lasts -4.25 days.  Refused
-- (it was once stored, and every take then failed).
SELECT '-1 year 361 days'::interval > '0'::interval AS compares_positive,
       date_part('epoch', '-1 year 361 days'::interval) AS seconds;
SELECT pg_temp.error_of($$SELECT rate_limit_define('p', 10, '-1 year 361 days')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take('p', 'k')$$);
-- Greater than '0' and zero seconds long (once a division by zero).
SELECT pg_temp.error_of($$SELECT rate_limit_define('p', 10, '-1 year 365 days 6 hours')$$);
-- Below a microsecond, the resolution of intervals.
SELECT pg_temp.error_of($$SELECT rate_limit_define('p', 10, '0.4 microseconds')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define('p', 10, '-1 month')$$);

-- Huge periods: a period is kept in microseconds in a bigint (once a bare
-- "bigint out of range").  292,271 years fit; 292,272 years do not.
SELECT rate_limit_define('longest', 1, '292271 years', 5);
SELECT window_us FROM ratelimit.policies WHERE name = 'longest';
SELECT allowed, remaining FROM rate_limit_take('longest', 'k', 5);
SELECT allowed, retry_after FROM rate_limit_take('longest', 'k');
SELECT pg_temp.error_of($$SELECT rate_limit_define('p', 1, '292272 years')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define('p', 1, '178000000 years')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define('p', 1, '-178000000 years')$$);

-- Tiny periods and extreme rates: tokens per second must be a float8 (once
-- a bare "value out of range: overflow" or "underflow").
SELECT rate_limit_define('shortest', 1, '1 microsecond');
SELECT rate_limit_define('fastest', 1e302, '1 microsecond');
SELECT name, tokens_per_second, window_us FROM ratelimit.policies
 WHERE name IN ('shortest', 'fastest') ORDER BY name;
SELECT allowed, remaining FROM rate_limit_take('shortest', 'k');
SELECT pg_temp.error_of($$SELECT rate_limit_define('p', 1e303, '1 microsecond')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define('p', 1e308, '1 microsecond', 1)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define('p', 5e-324, '1 year')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define('p', 1, '1 microsecond', floor_rate => 1e308)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define('p', 1, '1 hour', floor_rate => 5e-324)$$);

-- window_start: non-negative in seconds, and within a bigint of microseconds.
SELECT pg_temp.error_of($$SELECT rate_limit_define('p', 1, '1 minute', fixed_window => true, window_start => '-1 year 361 days')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define('p', 1, '1 minute', fixed_window => true, window_start => '1000000 years')$$);
SELECT rate_limit_define('late-start', 10, '1 minute', fixed_window => true, window_start => '1 year 30 seconds');
SELECT window_start_us FROM ratelimit.policies WHERE name = 'late-start';

-- The name, storage and enforce, which every define function checks alike,
-- with hints of its own kind of limit: 22023 for an empty name, 54000 for
-- one too long, 22023 for one not printable ASCII and for an unknown
-- storage, 22004 for a NULL storage or enforce.
SELECT f.function, c.arguments,
       pg_temp.error_of(pg_catalog.format('SELECT %s(%s, %s%s)', f.function, c.name, f.limit_arguments, c.options))
  FROM (VALUES (1, 'rate_limit_define', '1'),
               (2, 'rate_limit_define_sliding_window', '5, ''1 minute'''),
               (3, 'rate_limit_define_concurrency', '3')) AS f(n, function, limit_arguments),
       (VALUES (1, '''''', '', 'empty name'),
               (2, 'pg_catalog.repeat(''n'', 257)', '', '257-byte name'),
               (3, '''lim'' || pg_catalog.chr(9)', '', 'name with a tab'),
               (4, '''p''', ', storage => ''disk''', 'storage ''disk'''),
               (5, '''p''', ', storage => NULL', 'storage NULL'),
               (6, '''p''', ', enforce => NULL', 'enforce NULL')) AS c(n, name, options, arguments)
 ORDER BY f.n, c.n;

-- A refused redefinition leaves the policy as it was.
SELECT rate_limit_define('kept', 10, '1 minute');
SELECT pg_temp.error_of($$SELECT rate_limit_define('kept', 10, '-1 year 361 days')$$);
SELECT name, rate, per FROM ratelimit.policies WHERE name = 'kept';
SELECT count(*) AS policies_named_p FROM ratelimit.policies WHERE name = 'p';

-- rate_limit_drop(NULL) is an error like every other NULL argument.
SELECT pg_temp.error_of($$SELECT rate_limit_drop(NULL)$$);
SELECT rate_limit_drop('kept');
SELECT rate_limit_drop('kept');

-- Leave no policy or bucket behind for the tests that follow.
DELETE FROM ratelimit.policies WHERE name IN ('month', 'year', '12 months', '13 months', 'longest',
                                              'shortest', 'fastest', 'late-start');
DELETE FROM ratelimit.buckets WHERE name IN ('longest', 'shortest');

--
-- rate_limit_headers(decision): the values of the RateLimit-Policy, RateLimit
-- and Retry-After fields (draft-ietf-httpapi-ratelimit-headers-11) from a
-- decision alone, checked on decision rows built here: the draft's examples,
-- the window of a policy whose burst differs from its rate, scaling of
-- fractional quotas and periods, the 15-digit caps, and every row no limiter
-- returns.
--
\i test/sql/include/error_of.sql

-- A decision's attributes, in order: allowed, remaining, retry_after,
-- reset_after, capacity, name, quota, per, refill_after.

-- The draft's examples: a policy of 100 units per 10 seconds, the state
-- after 50 units are used with 30 seconds until more arrive, and two
-- policies in one field.
SELECT h.* FROM rate_limit_headers(ROW(true, 100, 0, 0, 100, 'default', 100, '10 seconds', 0)::rate_limit_decision) AS h;
SELECT h.ratelimit FROM rate_limit_headers(ROW(true, 50, 0, 30, 100, 'default', 100, '1 minute', 30)::rate_limit_decision) AS h;
SELECT h.ratelimit_policy
  FROM rate_limit_headers(ROW(true, 0, 'permin', 'client', '{50, 1000}',
                              ARRAY[ROW(true, 50, 0, 0, 50, 'permin', 50, '1 minute', 0),
                                    ROW(true, 1000, 0, 0, 1000, 'perhr', 1000, '1 hour', 0)]::rate_limit_decision[]
                             )::rate_limit_all_decision) AS h;

-- w is the policy's period, whatever its burst: "5 per minute, burst 3" is
-- q=5;w=60, where the 0.2.0 function (from a rate per second) says q=3;w=36,
-- the time the burst takes to refill.
SELECT h.* FROM rate_limit_headers(ROW(true, 2, 0, 12, 3, 'x', 5, '1 minute', 12)::rate_limit_decision) AS h;
SELECT h.ratelimit_policy AS "0.2.0"
  FROM rate_limit_headers(ROW(true, 2, 0, 12, 3, 'x', 5, '1 minute', 12)::rate_limit_decision, 'x', 5.0 / 60) AS h;

-- Quotas and periods that are not whole: scaled by the smallest whole
-- number that makes both at least 1; q is floored and w ceiled.
SELECT c.quota, c.per, h.ratelimit_policy
  FROM (VALUES (1, 0.5::float8, '1 second'::interval),
               (2, 10, '500 milliseconds'),
               (3, 0.75, '250 milliseconds'),
               (4, 0.3, '1 second'),
               (5, 2.5, '1 minute'),
               (6, 1, '1.5 seconds'),
               (7, 1, '1 microsecond'),
               (8, 1e-6, '1 microsecond'),
               (9, 100, '1 month'),
               (10, 1, '1 year')) AS c(n, quota, per),
       LATERAL rate_limit_headers(ROW(true, 1, 0, 0, 1, 'x', c.quota, c.per, 0)::rate_limit_decision) AS h
 ORDER BY c.n;

-- r is the whole units remaining, t the seconds until more arrive (ceiled),
-- omitted when the bucket is full or never refills; Retry-After only when
-- the call was denied, finite and positive.
SELECT c.label, h.ratelimit, h.retry_after
  FROM (VALUES (1, 'full', ROW(true, 10, 0, 0, 10, 'x', 1, '1 second', 0)::rate_limit_decision),
               (2, 'fractions', ROW(true, 2.9, 0, 7.1, 10, 'x', 1, '1 second', 0.000001)::rate_limit_decision),
               (3, 'reserved debt', ROW(true, -2.5, 2.5, 12.5, 10, 'x', 1, '1 second', 3.5)::rate_limit_decision),
               (4, 'denied', ROW(false, 0.5, 12.3, 9.5, 10, 'x', 1, '1 second', 0.5)::rate_limit_decision),
               (5, 'denied, under a second', ROW(false, 0, 0.000001, 10, 10, 'x', 1, '1 second', 0.000001)::rate_limit_decision),
               (6, 'rate 0', ROW(true, 1.25, 0, 'Infinity', 3.75, 'x', 0, '1 second', 'Infinity')::rate_limit_decision),
               (7, 'rate 0, denied', ROW(false, 1.25, 'Infinity', 'Infinity', 3.75, 'x', 0, '1 second', 'Infinity')::rate_limit_decision),
               (8, 'rate 0, full', ROW(true, 3.75, 0, 0, 3.75, 'x', 0, '1 second', 0)::rate_limit_decision)
       ) AS c(n, label, decision),
       LATERAL rate_limit_headers(c.decision) AS h
 ORDER BY c.n;
-- rate 0: no window; q is the capacity.
SELECT h.ratelimit_policy FROM rate_limit_headers(ROW(true, 1.25, 0, 'Infinity', 3.75, 'x', 0, '1 second', 'Infinity')::rate_limit_decision) AS h;

-- Every value is capped at 15 digits, and nothing overflows on the way.
SELECT h.* FROM rate_limit_headers(ROW(false, 1e300, 1e300, 1e300, 1e301, 'x', 1e308, '1 microsecond', 1e300)::rate_limit_decision) AS h;
SELECT h.ratelimit_policy FROM rate_limit_headers(ROW(true, 1, 0, 0, 1, 'x', 1e-320, '178000000 years', 0)::rate_limit_decision) AS h;
SELECT h.ratelimit_policy FROM rate_limit_headers(ROW(true, 1, 0, 0, 1, 'x', 1e-16, '1 microsecond', 0)::rate_limit_decision) AS h;
SELECT h.ratelimit_policy FROM rate_limit_headers(ROW(true, 1, 0, 0, 1, 'x', 999999999999999, '1 second', 0)::rate_limit_decision) AS h;

-- Names are structured-field strings: quotes and backslashes escaped.
SELECT h.ratelimit_policy FROM rate_limit_headers(ROW(true, 1, 0, 0, 1, 'say "hi" \ bye', 1, '1 second', 0)::rate_limit_decision) AS h;

-- rate_limit_take_all: one item per limit, in the order given, each with its
-- own state; Retry-After from the whole decision, when it was denied.
SELECT h.*
  FROM rate_limit_headers(ROW(false, 30.2, 'hourly', 'team:7', '{4, 0.5}',
                              ARRAY[ROW(true, 4, 0, 6, 5, 'minutely', 5, '1 minute', 12),
                                    ROW(false, 0.5, 30.2, 1700, 1000, 'hourly', 1000, '1 hour', 1.8)]::rate_limit_decision[]
                             )::rate_limit_all_decision) AS h;
SELECT h.*
  FROM rate_limit_headers(ROW(true, 0, NULL, NULL, '{9}',
                              ARRAY[ROW(true, 9, 0, 6, 10, 'one', 10, '1 minute', 6)]::rate_limit_decision[]
                             )::rate_limit_all_decision) AS h;

-- Rows no limiter returns are refused, each field of a valid row changed in
-- turn: NULL (as in a row from before 0.3.0, without name, quota, per and
-- refill_after), NaN, infinite where a limiter's value is finite, negative
-- waits, a capacity or period that is not positive, a name that is empty or
-- not printable ASCII.
SELECT pg_temp.error_of($$SELECT rate_limit_headers(ROW(true, 1, 0, 0, 5, NULL, NULL, NULL, NULL)::rate_limit_decision)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_headers(ROW(true, 1, 0, 0, 5, 'clé', 1, '1 second', 1)::rate_limit_decision)$$);
CREATE FUNCTION pg_temp.sqlstate_of(decision anyelement) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM rate_limit_headers(decision);
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;
SELECT c.field, c.value, pg_temp.sqlstate_of(c.decision)
  FROM (VALUES (0, '(none)', 'valid', ROW(true, 1, 0, 0, 5, 'x', 1, '1 second', 1)::rate_limit_decision),
               (1, 'decision', 'NULL', NULL::rate_limit_decision),
               (2, 'allowed', 'NULL', ROW(NULL, 1, 0, 0, 5, 'x', 1, '1 second', 1)::rate_limit_decision),
               (3, 'remaining', 'NULL', ROW(true, NULL, 0, 0, 5, 'x', 1, '1 second', 1)::rate_limit_decision),
               (4, 'remaining', 'NaN', ROW(true, 'NaN', 0, 0, 5, 'x', 1, '1 second', 1)::rate_limit_decision),
               (5, 'remaining', 'Infinity', ROW(true, 'Infinity', 0, 0, 5, 'x', 1, '1 second', 1)::rate_limit_decision),
               (6, 'remaining', '-Infinity', ROW(true, '-Infinity', 0, 0, 5, 'x', 1, '1 second', 1)::rate_limit_decision),
               (7, 'retry_after', 'NULL', ROW(true, 1, NULL, 0, 5, 'x', 1, '1 second', 1)::rate_limit_decision),
               (8, 'retry_after', 'NaN', ROW(true, 1, 'NaN', 0, 5, 'x', 1, '1 second', 1)::rate_limit_decision),
               (9, 'retry_after', '-1', ROW(true, 1, -1, 0, 5, 'x', 1, '1 second', 1)::rate_limit_decision),
               (10, 'reset_after', 'NULL', ROW(true, 1, 0, NULL, 5, 'x', 1, '1 second', 1)::rate_limit_decision),
               (11, 'reset_after', 'NaN', ROW(true, 1, 0, 'NaN', 5, 'x', 1, '1 second', 1)::rate_limit_decision),
               (12, 'reset_after', '-1', ROW(true, 1, 0, -1, 5, 'x', 1, '1 second', 1)::rate_limit_decision),
               (13, 'capacity', 'NULL', ROW(true, 1, 0, 0, NULL, 'x', 1, '1 second', 1)::rate_limit_decision),
               (14, 'capacity', 'NaN', ROW(true, 1, 0, 0, 'NaN', 'x', 1, '1 second', 1)::rate_limit_decision),
               (15, 'capacity', 'Infinity', ROW(true, 1, 0, 0, 'Infinity', 'x', 1, '1 second', 1)::rate_limit_decision),
               (16, 'capacity', '0', ROW(true, 0, 0, 0, 0, 'x', 1, '1 second', 1)::rate_limit_decision),
               (17, 'capacity', '-1', ROW(true, -1, 0, 0, -1, 'x', 1, '1 second', 1)::rate_limit_decision),
               (18, 'name', 'NULL', ROW(true, 1, 0, 0, 5, NULL, 1, '1 second', 1)::rate_limit_decision),
               (19, 'name', '''''', ROW(true, 1, 0, 0, 5, '', 1, '1 second', 1)::rate_limit_decision),
               (20, 'name', '''clé''', ROW(true, 1, 0, 0, 5, 'clé', 1, '1 second', 1)::rate_limit_decision),
               (21, 'name', 'E''a\tb''', ROW(true, 1, 0, 0, 5, E'a\tb', 1, '1 second', 1)::rate_limit_decision),
               (22, 'name', 'E''a\nb''', ROW(true, 1, 0, 0, 5, E'a\nb', 1, '1 second', 1)::rate_limit_decision),
               (23, 'name', 'E''\x7f''', ROW(true, 1, 0, 0, 5, E'\x7f', 1, '1 second', 1)::rate_limit_decision),
               (24, 'quota', 'NULL', ROW(true, 1, 0, 0, 5, 'x', NULL, '1 second', 1)::rate_limit_decision),
               (25, 'quota', 'NaN', ROW(true, 1, 0, 0, 5, 'x', 'NaN', '1 second', 1)::rate_limit_decision),
               (26, 'quota', 'Infinity', ROW(true, 1, 0, 0, 5, 'x', 'Infinity', '1 second', 1)::rate_limit_decision),
               (27, 'quota', '-1', ROW(true, 1, 0, 0, 5, 'x', -1, '1 second', 1)::rate_limit_decision),
               (28, 'per', 'NULL', ROW(true, 1, 0, 0, 5, 'x', 1, NULL, 1)::rate_limit_decision),
               (29, 'per', '0', ROW(true, 1, 0, 0, 5, 'x', 1, '0', 1)::rate_limit_decision),
               (30, 'per', '-1 second', ROW(true, 1, 0, 0, 5, 'x', 1, '-1 second', 1)::rate_limit_decision),
               (31, 'per', '1 mon -30 days', ROW(true, 1, 0, 0, 5, 'x', 1, '1 mon -30 days', 1)::rate_limit_decision),
               (32, 'refill_after', 'NULL', ROW(true, 1, 0, 0, 5, 'x', 1, '1 second', NULL)::rate_limit_decision),
               (33, 'refill_after', 'NaN', ROW(true, 1, 0, 0, 5, 'x', 1, '1 second', 'NaN')::rate_limit_decision),
               (34, 'refill_after', '-1', ROW(true, 1, 0, 0, 5, 'x', 1, '1 second', -1)::rate_limit_decision)
       ) AS c(n, field, value, decision)
 ORDER BY c.n;

-- The same for rate_limit_take_all's decisions: the whole row, and each
-- limit's decision in it.
SELECT pg_temp.error_of($$SELECT rate_limit_headers(ROW(true, 0, NULL, NULL, '{1}', NULL)::rate_limit_all_decision)$$);
SELECT c.field, c.value, pg_temp.sqlstate_of(c.decision)
  FROM (VALUES (0, '(none)', 'valid', ROW(true, 0, NULL, NULL, '{1}', ARRAY[ROW(true, 1, 0, 0, 5, 'x', 1, '1 second', 1)::rate_limit_decision])::rate_limit_all_decision),
               (1, 'decision', 'NULL', NULL::rate_limit_all_decision),
               (2, 'allowed', 'NULL', ROW(NULL, 0, NULL, NULL, '{1}', ARRAY[ROW(true, 1, 0, 0, 5, 'x', 1, '1 second', 1)::rate_limit_decision])::rate_limit_all_decision),
               (3, 'retry_after', 'NULL', ROW(true, NULL, NULL, NULL, '{1}', ARRAY[ROW(true, 1, 0, 0, 5, 'x', 1, '1 second', 1)::rate_limit_decision])::rate_limit_all_decision),
               (4, 'retry_after', 'NaN', ROW(true, 'NaN', NULL, NULL, '{1}', ARRAY[ROW(true, 1, 0, 0, 5, 'x', 1, '1 second', 1)::rate_limit_decision])::rate_limit_all_decision),
               (5, 'retry_after', '-1', ROW(true, -1, NULL, NULL, '{1}', ARRAY[ROW(true, 1, 0, 0, 5, 'x', 1, '1 second', 1)::rate_limit_decision])::rate_limit_all_decision),
               (6, 'decisions', 'NULL', ROW(true, 0, NULL, NULL, '{1}', NULL)::rate_limit_all_decision),
               (7, 'decisions', 'empty', ROW(true, 0, NULL, NULL, '{}', '{}')::rate_limit_all_decision),
               (8, 'decisions', 'two dimensions', ROW(true, 0, NULL, NULL, '{1, 1}', ARRAY[ARRAY[ROW(true, 1, 0, 0, 5, 'x', 1, '1 second', 1)::rate_limit_decision], ARRAY[ROW(true, 1, 0, 0, 5, 'x', 1, '1 second', 1)::rate_limit_decision]])::rate_limit_all_decision),
               (9, 'decisions', 'fewer than remaining', ROW(true, 0, NULL, NULL, '{1, 1}', ARRAY[ROW(true, 1, 0, 0, 5, 'x', 1, '1 second', 1)::rate_limit_decision])::rate_limit_all_decision),
               (10, 'remaining', 'NULL', ROW(true, 0, NULL, NULL, NULL, ARRAY[ROW(true, 1, 0, 0, 5, 'x', 1, '1 second', 1)::rate_limit_decision])::rate_limit_all_decision),
               (11, 'decisions[2]', 'NULL', ROW(true, 0, NULL, NULL, '{1, 1}', ARRAY[ROW(true, 1, 0, 0, 5, 'x', 1, '1 second', 1)::rate_limit_decision, NULL])::rate_limit_all_decision),
               (12, 'decisions[2].name', 'NULL', ROW(true, 0, NULL, NULL, '{1, 1}', ARRAY[ROW(true, 1, 0, 0, 5, 'x', 1, '1 second', 1)::rate_limit_decision, ROW(true, 1, 0, 0, 5, NULL, 1, '1 second', 1)::rate_limit_decision])::rate_limit_all_decision),
               (13, 'decisions[1].name', '''clé''', ROW(true, 0, NULL, NULL, '{1}', ARRAY[ROW(true, 1, 0, 0, 5, 'clé', 1, '1 second', 1)::rate_limit_decision])::rate_limit_all_decision)
       ) AS c(n, field, value, decision)
 ORDER BY c.n;

-- Any role may build header values: they come from the decision alone.
CREATE ROLE ratelimit_headers_decision NOLOGIN;
SET ROLE ratelimit_headers_decision;
SELECT h.* FROM rate_limit_headers(ROW(true, 50, 0, 30, 100, 'default', 100, '1 minute', 30)::rate_limit_decision) AS h;
SELECT h.ratelimit FROM rate_limit_headers(ROW(true, 0, NULL, NULL, '{9}', ARRAY[ROW(true, 9, 0, 6, 10, 'one', 10, '1 minute', 6)::rate_limit_decision])::rate_limit_all_decision) AS h;
RESET ROLE;
DROP ROLE ratelimit_headers_decision;

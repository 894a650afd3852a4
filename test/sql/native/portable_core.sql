--
-- The portable algebra (portable/core.sql, PL/pgSQL) against the native one
-- (src/core, through rate_limit_check): random policies, stored balances,
-- requests and clock readings must give the same decisions, balances and
-- waits, to the last bit of every float8.
--
\set SHOW_CONTEXT never
CREATE SCHEMA portable_core;
SET search_path = portable_core, public;
-- (core.sql with the rest of the limiter, whose install names every
-- routine's schema in it; the script itself is not echoed.)
\set ECHO none
\i portable/ratelimit.sql
\set ECHO all
RESET search_path;

-- Policies of every kind: continuous, with a floor rate, fixed windows
-- (their phase set by window_start), reservation, a penalty box (also on
-- fixed windows).
SELECT count(*) AS policies FROM (VALUES
    ('pc-plain',   5::float8, '1 second'::interval, 10::float8, 0::float8, false, NULL::interval, 0::float8, NULL::interval),
    ('pc-slow',    3, '1 hour', 7, 0, false, NULL, 0, NULL),
    ('pc-floor',   100, '1 hour', 100, 0, false, NULL, 7200, NULL),
    ('pc-window',  10, '1 minute', 15, 0, true, '7 seconds', 0, NULL),
    ('pc-reserve', 2, '1 second', 4, 6, false, NULL, 0, NULL),
    ('pc-wreserve',4, '10 seconds', 4, 8, true, '0 seconds', 0, NULL),
    ('pc-penalty', 1, '1 second', 3, 0, false, NULL, 0, '5 seconds'),
    ('pc-wpenalty',10, '1 minute', 15, 5, true, '3 seconds', 0, '5 seconds'))
    AS p(name, rate, per, burst, max_reserved, fixed_window, window_start, floor_rate, penalty),
    LATERAL rate_limit_define(p.name, p.rate, p.per, p.burst, fixed_window => p.fixed_window,
                              window_start => p.window_start, floor_rate => p.floor_rate,
                              max_reserved => p.max_reserved, penalty => p.penalty) AS d;

-- Random cases: a stored bucket (balance, stamp up to a day before or a
-- minute after the clock, maybe a penalty box) and a request.
SELECT setseed(0.42);
CREATE TEMP TABLE cases AS
SELECT i, p.name,
       p.burst * (random() * 2.4 - 1.2) AS tokens,
       (1000000 + i)::float8 AS clock_s,
       ((1000000 + i - 946684800)::bigint * 1000000
        - (CASE WHEN random() < 0.1 THEN -floor(random() * 60e6) ELSE floor(random() * 86400e6) END)::bigint) AS stamp_us,
       CASE WHEN random() < 0.2 THEN ((1000000 + i - 946684800)::bigint * 1000000 + floor(random() * 10e6)::bigint)
            ELSE '-9223372036854775808'::bigint END AS blocked_us,
       least(p.burst, p.burst * random() * 1.1) AS cost,
       CASE WHEN random() < 0.5 THEN 0 ELSE floor(random() * 120) END AS max_wait_s
FROM generate_series(1, 3000) AS i,
     LATERAL (SELECT name, burst FROM ratelimit.policies WHERE name LIKE 'pc-%'
              ORDER BY name OFFSET (i % 8) LIMIT 1) AS p;
-- And cases at the edge of what a reservation may owe: a cost that leaves
-- exactly, just under and just over the debt refill repays within max_wait
-- (less the 16 µs kept in hand), on a bucket refilled to now.
INSERT INTO cases
SELECT 3000 + j, 'pc-reserve', t,
       (1000000 + 3000 + j)::float8,
       (1000000 + 3000 + j - 946684800)::bigint * 1000000,
       '-9223372036854775808'::bigint,
       least(4 + 6, t + 2 * (w - 16e-6) * (1 + (j % 3 - 1) * 1e-15)),
       w
FROM generate_series(1, 300) AS j,
     LATERAL (SELECT (j % 5)::float8 / 2 AS t, 1 + (j % 4)::float8 AS w) AS e;
-- (Keys 'k<i>' for the algebra, 't<i>' for the takes below.)
INSERT INTO ratelimit.buckets (name, key, tokens, last_refill, full_at, blocked_until)
SELECT name, k.prefix || i, tokens,
       '2000-01-01 00:00:00+00'::timestamptz + stamp_us * interval '1 microsecond', 'infinity',
       CASE WHEN blocked_us = '-9223372036854775808'::bigint THEN '-infinity'::timestamptz
            ELSE '2000-01-01 00:00:00+00'::timestamptz + blocked_us * interval '1 microsecond' END
FROM cases, (VALUES ('k'), ('t')) AS k(prefix);

-- Each case through both, at its own clock reading.  (The portable functions
-- call each other by their own names: their schema is on the search_path.)
SET search_path = public, portable_core;
CREATE TEMP TABLE answers (i int, native rate_limit_decision, portable portable_core.rl_decision);
-- Then a refund of the same bucket, and the full_at it stores.
CREATE TEMP TABLE refunds (i int, native rate_limit_decision, portable portable_core.rl_decision,
                           native_full_at timestamptz, portable_full_at bigint);
DO $$
DECLARE
    c record;
    p ratelimit.policies;
BEGIN
    FOR c IN SELECT * FROM cases ORDER BY i LOOP
        PERFORM pg_catalog.set_config('ratelimit.fixed_clock', c.clock_s::text, false);
        SELECT * INTO p FROM ratelimit.policies WHERE name = c.name;
        INSERT INTO answers
        SELECT c.i,
               rate_limit_check(c.name, 'k' || c.i, c.cost, c.max_wait_s * interval '1 second'),
               portable_core.rl_decide(
                   ROW(c.tokens, c.stamp_us, c.blocked_us)::portable_core.rl_bucket,
                   ROW(p.tokens_per_second, p.burst,
                       CASE WHEN p.fixed_window THEN p.window_us ELSE 0 END,
                       CASE WHEN p.fixed_window THEN p.window_start_us % p.window_us ELSE 0 END,
                       p.floor_per_second, coalesce(p.penalty_us, 0))::portable_core.rl_limit,
                   ROW(c.cost, c.max_wait_s > 0, true, p.max_reserved,
                       CASE WHEN c.max_wait_s > 0 THEN c.max_wait_s ELSE 'Infinity' END)::portable_core.rl_request,
                   ((c.clock_s - 946684800) * 1000000)::bigint);
        INSERT INTO refunds (i, native, portable)
        SELECT c.i, rate_limit_refund(c.name, 'k' || c.i, c.cost / 2),
               portable_core.rl_refund(
                   ROW(c.tokens, c.stamp_us, c.blocked_us)::portable_core.rl_bucket,
                   ROW(p.tokens_per_second, p.burst,
                       CASE WHEN p.fixed_window THEN p.window_us ELSE 0 END,
                       CASE WHEN p.fixed_window THEN p.window_start_us % p.window_us ELSE 0 END,
                       p.floor_per_second, coalesce(p.penalty_us, 0))::portable_core.rl_limit,
                   c.cost / 2, ((c.clock_s - 946684800) * 1000000)::bigint);
    END LOOP;
END
$$;
RESET ratelimit.fixed_clock;
RESET search_path;

SELECT count(*) AS cases,
       count(*) FILTER (WHERE (native).allowed IS DISTINCT FROM (portable).allowed
                           OR (native).remaining IS DISTINCT FROM (portable).remaining
                           OR (native).retry_after IS DISTINCT FROM (portable).retry_after
                           OR (native).reset_after IS DISTINCT FROM (portable).reset_after
                           OR (native).refill_after IS DISTINCT FROM (portable).refill_after) AS differ,
       count(*) FILTER (WHERE (native).allowed) > 300 AS some_granted,
       count(*) FILTER (WHERE NOT (native).allowed) > 300 AS some_denied,
       count(*) FILTER (WHERE (native).remaining < 0) > 50 AS some_reserved
FROM answers;
-- Refunds, and when each refunded bucket is full again.
UPDATE refunds AS r SET native_full_at = b.full_at,
       portable_full_at = portable_core.rl_full_at(r.portable,
                                                   ((c.clock_s - 946684800) * 1000000)::bigint)
FROM cases AS c, ratelimit.buckets AS b
WHERE c.i = r.i AND b.name = c.name AND b.key = 'k' || c.i;
SELECT count(*) AS refunds,
       count(*) FILTER (WHERE (native).remaining IS DISTINCT FROM (portable).remaining
                           OR (native).retry_after IS DISTINCT FROM (portable).retry_after
                           OR (native).reset_after IS DISTINCT FROM (portable).reset_after
                           OR (native).refill_after IS DISTINCT FROM (portable).refill_after) AS differ,
       count(*) FILTER (WHERE native_full_at IS DISTINCT FROM
                              CASE WHEN portable_full_at = 9223372036854775807 THEN 'infinity'::timestamptz
                                   ELSE '2000-01-01 00:00:00+00'::timestamptz
                                        + portable_full_at * interval '1 microsecond' END) AS full_at_differ,
       count(*) FILTER (WHERE native_full_at IS NOT NULL) AS written
FROM refunds;
-- The first differences, if any.
SELECT a.i, c.name, (a.native).allowed, (a.portable).allowed AS p_allowed,
       (a.native).remaining, (a.portable).remaining AS p_remaining,
       (a.native).retry_after, (a.portable).retry_after AS p_retry,
       (a.native).reset_after, (a.portable).reset_after AS p_reset,
       (a.native).refill_after, (a.portable).refill_after AS p_refill
FROM answers AS a JOIN cases AS c USING (i)
WHERE (a.native).allowed IS DISTINCT FROM (a.portable).allowed
   OR (a.native).remaining IS DISTINCT FROM (a.portable).remaining
   OR (a.native).retry_after IS DISTINCT FROM (a.portable).retry_after
   OR (a.native).reset_after IS DISTINCT FROM (a.portable).reset_after
   OR (a.native).refill_after IS DISTINCT FROM (a.portable).refill_after
ORDER BY a.i LIMIT 5;

-- The same buckets (keys 't<i>') taken by a policy's name through the API
-- of both: the portable rate_limit_take decides its common case in one read
-- and a guarded write, with the expressions of portable/quick.sql, and
-- must give the native decisions and store the native state, to the last
-- bit.  A copy of rl_policy_call that counts its calls stands in for the
-- general way, to show which takes took the common one: those by a policy
-- without fixed windows, a floor rate or a penalty box, of a bucket
-- stamped no later than the clock and out of any box.
SELECT count(*) AS defined FROM ratelimit.policies AS p,
    LATERAL portable_core.rate_limit_define(p.name, p.rate, p.per, p.burst, p.initial, p.jitter, p.fixed_window,
                                            p.window_start, p.floor_rate, p.shards, p.max_reserved, p.penalty) AS d
WHERE p.name LIKE 'pc-%';
-- (The portable clock reads the seconds the native fixed clock is set to
-- from a setting of the test's own: current_setting shows a float8 setting
-- to six digits only.)
CREATE OR REPLACE FUNCTION portable_core.rl_now() RETURNS bigint
LANGUAGE sql VOLATILE
AS $$ SELECT ((pg_catalog.current_setting('portable_core.clock')::float8 - 946684800) * 1000000)::bigint $$;
ALTER FUNCTION portable_core.rl_policy_call(text, text, text, float8, float8, text) RENAME TO rl_policy_call_general;
CREATE SEQUENCE portable_core.general_calls;
CREATE FUNCTION portable_core.rl_policy_call(function_name text, p_name text, p_key text, cost float8,
                                             max_wait float8, op text)
RETURNS portable_core.rate_limit_decision
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_catalog.nextval('portable_core.general_calls');
    RETURN portable_core.rl_policy_call_general(function_name, p_name, p_key, cost, max_wait, op);
END
$$;
INSERT INTO portable_core.rl_buckets (name, key, tokens, stamp_us, full_at_us, blocked_until_us)
SELECT name, 't' || i, tokens, stamp_us, 9223372036854775807, blocked_us FROM cases;
CREATE TEMP TABLE takes (i int, native rate_limit_decision, portable portable_core.rate_limit_decision,
                         general boolean);
DO $$
DECLARE
    c record;
    before bigint;
BEGIN
    -- (A cost beyond the burst, of the cases that reserve, is refused.)
    FOR c IN SELECT cases.* FROM cases JOIN ratelimit.policies AS p USING (name)
              WHERE cases.cost <= p.burst ORDER BY i LOOP
        PERFORM pg_catalog.set_config('ratelimit.fixed_clock', c.clock_s::text, false);
        PERFORM pg_catalog.set_config('portable_core.clock', c.clock_s::text, false);
        before := pg_catalog.nextval('portable_core.general_calls');
        INSERT INTO takes
        SELECT c.i, rate_limit_take(c.name, 't' || c.i, c.cost),
               portable_core.rate_limit_take(c.name, 't' || c.i, c.cost),
               pg_catalog.nextval('portable_core.general_calls') > before + 1;
    END LOOP;
END
$$;
RESET ratelimit.fixed_clock;
SELECT count(*) AS takes,
       count(*) FILTER (WHERE row((native).allowed, (native).remaining, (native).retry_after, (native).reset_after,
                                  (native).capacity, (native).name, (native).quota, (native).per,
                                  (native).refill_after)
                              IS DISTINCT FROM
                              row((portable).allowed, (portable).remaining, (portable).retry_after,
                                  (portable).reset_after, (portable).capacity, (portable).name, (portable).quota,
                                  (portable).per, (portable).refill_after)) AS differ,
       count(*) FILTER (WHERE (native).allowed AND NOT general) > 500 AS some_granted_so,
       count(*) FILTER (WHERE NOT (native).allowed AND NOT general) > 50 AS some_denied_so,
       count(*) FILTER (WHERE c.name IN ('pc-plain', 'pc-slow', 'pc-reserve')
                          AND c.stamp_us <= ((c.clock_s - 946684800) * 1000000)::bigint
                          AND c.blocked_us <= ((c.clock_s - 946684800) * 1000000)::bigint AND general) AS plain_general,
       count(*) FILTER (WHERE NOT (c.name IN ('pc-plain', 'pc-slow', 'pc-reserve')
                                   AND c.stamp_us <= ((c.clock_s - 946684800) * 1000000)::bigint
                                   AND c.blocked_us <= ((c.clock_s - 946684800) * 1000000)::bigint)
                          AND NOT general) AS other_common
FROM takes JOIN cases AS c USING (i);
-- The state each stored (or left), compared as the native table shows it.
SELECT count(*) AS buckets,
       count(*) FILTER (WHERE n.tokens IS DISTINCT FROM p.tokens OR n.last_refill IS DISTINCT FROM p.last_refill
                          OR n.full_at IS DISTINCT FROM p.full_at) AS differ
FROM ratelimit.buckets AS n
JOIN (SELECT b.name, b.key, b.tokens, portable_core.rl_timestamp(b.stamp_us) AS last_refill,
             portable_core.rl_timestamp(b.full_at_us) AS full_at
        FROM portable_core.rl_buckets AS b) AS p USING (name, key)
WHERE n.key LIKE 't%';
-- The first differences, if any.
SELECT t.i, c.name, t.general, t.native, t.portable FROM takes AS t JOIN cases AS c USING (i)
WHERE row((native).allowed, (native).remaining, (native).retry_after, (native).reset_after, (native).refill_after)
      IS DISTINCT FROM
      row((portable).allowed, (portable).remaining, (portable).retry_after, (portable).reset_after,
          (portable).refill_after)
ORDER BY t.i LIMIT 5;

-- Then checks by a policy's name of the same buckets, a second later: the
-- portable rate_limit_check takes the same common way (rl_quick_call), and
-- must answer as the native one, and write nothing.
CREATE TEMP TABLE checks (i int, native rate_limit_decision, portable portable_core.rate_limit_decision,
                          general boolean);
DO $$
DECLARE
    c record;
    before bigint;
BEGIN
    FOR c IN SELECT cases.* FROM cases JOIN ratelimit.policies AS p USING (name)
              WHERE cases.cost <= p.burst ORDER BY i LOOP
        PERFORM pg_catalog.set_config('ratelimit.fixed_clock', (c.clock_s + 1)::text, false);
        PERFORM pg_catalog.set_config('portable_core.clock', (c.clock_s + 1)::text, false);
        before := pg_catalog.nextval('portable_core.general_calls');
        INSERT INTO checks
        SELECT c.i, rate_limit_check(c.name, 't' || c.i, c.cost),
               portable_core.rate_limit_check(c.name, 't' || c.i, c.cost),
               pg_catalog.nextval('portable_core.general_calls') > before + 1;
    END LOOP;
END
$$;
RESET ratelimit.fixed_clock;
SELECT count(*) AS checks,
       count(*) FILTER (WHERE row((native).*) IS DISTINCT FROM row((portable).*)) AS differ,
       count(*) FILTER (WHERE (native).allowed AND NOT general) > 500 AS some_granted_so,
       count(*) FILTER (WHERE NOT (native).allowed AND NOT general) > 50 AS some_denied_so,
       count(*) FILTER (WHERE c.name NOT IN ('pc-plain', 'pc-slow', 'pc-reserve') AND NOT general) AS other_common
FROM checks JOIN cases AS c USING (i);
SELECT count(*) AS same_after_checks
FROM ratelimit.buckets AS n
JOIN (SELECT b.name, b.key, b.tokens, portable_core.rl_timestamp(b.stamp_us) AS last_refill,
             portable_core.rl_timestamp(b.full_at_us) AS full_at
        FROM portable_core.rl_buckets AS b) AS p USING (name, key)
WHERE n.key LIKE 't%' AND n.tokens IS NOT DISTINCT FROM p.tokens AND n.last_refill IS NOT DISTINCT FROM p.last_refill
  AND n.full_at IS NOT DISTINCT FROM p.full_at;
SELECT t.i, c.name, t.general, t.native, t.portable FROM checks AS t JOIN cases AS c USING (i)
WHERE row((native).*) IS DISTINCT FROM row((portable).*) ORDER BY t.i LIMIT 5;

-- The buckets of the plain policies' cases again, under names no policy
-- governs ('px-...', keys 'x<i>'), taken and then checked with explicit
-- parameters in tokens a second (the policies' rate and burst): the same
-- common way, the same decisions and state.  A copy of rl_explicit_call
-- that counts its calls stands in for the general way.
ALTER FUNCTION portable_core.rl_explicit_call(text, text, text, portable_core.rl_limit, portable_core.rl_request,
                                              text, text, float8, float8, interval)
    RENAME TO rl_explicit_call_general;
CREATE FUNCTION portable_core.rl_explicit_call(function_name text, p_name text, p_key text,
                                               l portable_core.rl_limit, r portable_core.rl_request, form text,
                                               op text, amount float8, quota float8, per interval)
RETURNS portable_core.rate_limit_decision
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_catalog.nextval('portable_core.general_calls');
    RETURN portable_core.rl_explicit_call_general(function_name, p_name, p_key, l, r, form, op, amount, quota, per);
END
$$;
CREATE TEMP TABLE explicit_cases AS
SELECT c.i, 'px' || substr(c.name, 3) AS name, 'x' || c.i AS key, c.tokens, c.stamp_us, c.blocked_us, c.clock_s,
       c.cost, p.tokens_per_second AS rate, p.burst
FROM cases AS c JOIN portable_core.rl_policies AS p USING (name)
WHERE c.name IN ('pc-plain', 'pc-slow', 'pc-reserve') AND c.cost <= p.burst;
INSERT INTO ratelimit.buckets (name, key, tokens, last_refill, full_at, blocked_until)
SELECT name, key, tokens, '2000-01-01 00:00:00+00'::timestamptz + stamp_us * interval '1 microsecond', 'infinity',
       CASE WHEN blocked_us = '-9223372036854775808'::bigint THEN '-infinity'::timestamptz
            ELSE '2000-01-01 00:00:00+00'::timestamptz + blocked_us * interval '1 microsecond' END
FROM explicit_cases;
INSERT INTO portable_core.rl_buckets (name, key, tokens, stamp_us, full_at_us, blocked_until_us)
SELECT name, key, tokens, stamp_us, 9223372036854775807, blocked_us FROM explicit_cases;
CREATE TEMP TABLE explicit_calls (i int, op text, native rate_limit_decision,
                                  portable portable_core.rate_limit_decision, general boolean);
DO $$
DECLARE
    c record;
    before bigint;
BEGIN
    FOR c IN SELECT * FROM explicit_cases ORDER BY i LOOP
        PERFORM pg_catalog.set_config('ratelimit.fixed_clock', c.clock_s::text, false);
        PERFORM pg_catalog.set_config('portable_core.clock', c.clock_s::text, false);
        before := pg_catalog.nextval('portable_core.general_calls');
        INSERT INTO explicit_calls
        SELECT c.i, 'take', rate_limit_take(c.name, c.key, c.cost, c.rate, c.burst),
               portable_core.rate_limit_take(c.name, c.key, c.cost, c.rate, c.burst),
               pg_catalog.nextval('portable_core.general_calls') > before + 1;
        PERFORM pg_catalog.set_config('ratelimit.fixed_clock', (c.clock_s + 1)::text, false);
        PERFORM pg_catalog.set_config('portable_core.clock', (c.clock_s + 1)::text, false);
        before := pg_catalog.nextval('portable_core.general_calls');
        INSERT INTO explicit_calls
        SELECT c.i, 'check', rate_limit_check(c.name, c.key, c.cost, c.rate, c.burst),
               portable_core.rate_limit_check(c.name, c.key, c.cost, c.rate, c.burst),
               pg_catalog.nextval('portable_core.general_calls') > before + 1;
    END LOOP;
END
$$;
RESET ratelimit.fixed_clock;
SELECT op, count(*) AS calls,
       count(*) FILTER (WHERE row((native).*) IS DISTINCT FROM row((portable).*)) AS differ,
       count(*) FILTER (WHERE (native).allowed AND NOT general) > 100 AS some_granted_so,
       count(*) FILTER (WHERE NOT (native).allowed AND NOT general) > 20 AS some_denied_so,
       count(*) FILTER (WHERE e.stamp_us <= ((e.clock_s - 946684800) * 1000000)::bigint
                          AND e.blocked_us <= ((e.clock_s - 946684800) * 1000000)::bigint AND general) AS plain_general
FROM explicit_calls JOIN explicit_cases AS e USING (i) GROUP BY op ORDER BY op;
SELECT count(*) AS buckets,
       count(*) FILTER (WHERE n.tokens IS DISTINCT FROM p.tokens OR n.last_refill IS DISTINCT FROM p.last_refill
                          OR n.full_at IS DISTINCT FROM p.full_at) AS differ
FROM ratelimit.buckets AS n
JOIN (SELECT b.name, b.key, b.tokens, portable_core.rl_timestamp(b.stamp_us) AS last_refill,
             portable_core.rl_timestamp(b.full_at_us) AS full_at
        FROM portable_core.rl_buckets AS b) AS p USING (name, key)
WHERE n.key LIKE 'x%';
SELECT t.i, t.op, t.general, t.native, t.portable FROM explicit_calls AS t
WHERE row((native).*) IS DISTINCT FROM row((portable).*) ORDER BY t.i, t.op LIMIT 5;
DELETE FROM ratelimit.buckets WHERE name LIKE 'px-%';

DELETE FROM ratelimit.buckets WHERE name LIKE 'pc-%';
SELECT count(*) AS dropped FROM ratelimit.policies AS p, LATERAL rate_limit_drop(p.name) AS d
WHERE p.name LIKE 'pc-%';
SET client_min_messages = warning;
DROP SCHEMA portable_core CASCADE;
RESET client_min_messages;

--
-- The portable limiter (portable/ratelimit.sql) against the native one:
-- random sequences of takes, checks and refunds (per second, per period and
-- by policy, reserving within a wait and a cap or not), all-or-nothing takes
-- and resets over several keys, some rolled back, at a clock both read the
-- same way, must give the same decisions field by field.
--
\set schema portable_api
\set clock portable_api.clock
\i test/sql/include/portable_beside_native.sql

SELECT setseed(0.7);
CREATE TEMP TABLE limits AS
SELECT k, 'pa-' || k AS key,
       (ARRAY[0.5, 3, 40, 0, 1000])[k] AS rate, (ARRAY[2, 5, 100, 4, 1e6])[k] AS burst
FROM generate_series(1, 5) AS k;
CREATE TEMP TABLE calls (i int, key text, op text, cost float8, reserve boolean,
                         max_wait interval, max_reserved float8, rolled_back boolean,
                         native rate_limit_decision, portable portable_api.rate_limit_decision,
                         native_reset boolean, portable_reset boolean);
DO $$
DECLARE
    clock float8 := 1000000;
    l record;
    op text;
    pick float8;
    cost float8;
    reserve boolean;
    max_wait interval;
    max_reserved float8;
    rollback boolean;
    n rate_limit_decision;
    p portable_api.rate_limit_decision;
    nr boolean;
    pr boolean;
BEGIN
    FOR i IN 1..3000 LOOP
        clock := clock + floor(random() * 64) / 64;
        PERFORM pg_catalog.set_config('ratelimit.fixed_clock', clock::text, false);
        PERFORM pg_catalog.set_config('portable_api.clock', clock::text, false);
        SELECT * INTO l FROM limits ORDER BY random() LIMIT 1;
        pick := random();
        op := CASE WHEN pick < 0.35 THEN 'take' WHEN pick < 0.45 THEN 'check'
                   WHEN pick < 0.65 THEN 'take_explicit' WHEN pick < 0.72 THEN 'check_explicit'
                   WHEN pick < 0.82 THEN 'refund' WHEN pick < 0.90 THEN 'refund_explicit'
                   WHEN pick < 0.93 THEN 'reset' ELSE 'take' END;
        reserve := random() < 0.25;
        max_wait := CASE WHEN random() < 0.4 THEN floor(random() * 20) * interval '1 second' END;
        max_reserved := CASE WHEN random() < 0.5 THEN floor(random() * 4) END;
        cost := least(l.burst, floor(random() * (l.burst + 2) * 4) / 4);
        rollback := random() < 0.1;
        n := NULL; p := NULL; nr := NULL; pr := NULL;
        BEGIN
            CASE op
            WHEN 'take' THEN
                n := rate_limit_take('pa', l.key, cost, l.rate, l.burst, reserve, max_reserved);
                p := portable_api.rate_limit_take('pa', l.key, cost, l.rate, l.burst, reserve, max_reserved);
            WHEN 'check' THEN
                n := rate_limit_check('pa', l.key, cost, l.rate, l.burst, reserve, max_reserved);
                p := portable_api.rate_limit_check('pa', l.key, cost, l.rate, l.burst, reserve, max_reserved);
            WHEN 'take_explicit' THEN
                n := rate_limit_take_explicit('pa', l.key, cost, l.rate * 60, '1 minute', l.burst, max_wait, max_reserved);
                p := portable_api.rate_limit_take_explicit('pa', l.key, cost, l.rate * 60, '1 minute', l.burst, max_wait, max_reserved);
            WHEN 'check_explicit' THEN
                n := rate_limit_check_explicit('pa', l.key, cost, l.rate * 60, '1 minute', l.burst, max_wait, max_reserved);
                p := portable_api.rate_limit_check_explicit('pa', l.key, cost, l.rate * 60, '1 minute', l.burst, max_wait, max_reserved);
            WHEN 'refund' THEN
                n := rate_limit_refund('pa', l.key, cost, l.rate, l.burst);
                p := portable_api.rate_limit_refund('pa', l.key, cost, l.rate, l.burst);
            WHEN 'refund_explicit' THEN
                n := rate_limit_refund_explicit('pa', l.key, cost, l.rate * 60, '1 minute', l.burst);
                p := portable_api.rate_limit_refund_explicit('pa', l.key, cost, l.rate * 60, '1 minute', l.burst);
            ELSE
                nr := rate_limit_reset('pa', l.key);
                pr := portable_api.rate_limit_reset('pa', l.key);
            END CASE;
            INSERT INTO calls VALUES (i, l.key, op, cost, reserve, max_wait, max_reserved, rollback, n, p, nr, pr);
            IF rollback THEN
                RAISE EXCEPTION 'roll back' USING ERRCODE = 'P0001';
            END IF;
        EXCEPTION WHEN raise_exception THEN
            INSERT INTO calls VALUES (i, l.key, op, cost, reserve, max_wait, max_reserved, rollback, n, p, nr, pr);
        END;
    END LOOP;
END
$$;
RESET ratelimit.fixed_clock;

CREATE TEMP VIEW differences AS
SELECT * FROM calls
WHERE native_reset IS DISTINCT FROM portable_reset
   OR row((native).allowed, (native).remaining, (native).retry_after, (native).reset_after,
          (native).capacity, (native).name, (native).quota, (native).per, (native).refill_after)
      IS DISTINCT FROM
      row((portable).allowed, (portable).remaining, (portable).retry_after, (portable).reset_after,
          (portable).capacity, (portable).name, (portable).quota, (portable).per,
          (portable).refill_after);
SELECT count(*) AS calls, (SELECT count(*) FROM differences) AS differ,
       count(DISTINCT op) AS kinds_of_call,
       count(*) FILTER (WHERE op LIKE 'take%' AND (native).allowed) > 300 AS some_granted,
       count(*) FILTER (WHERE op LIKE 'take%' AND NOT (native).allowed) > 100 AS some_denied,
       count(*) FILTER (WHERE (native).remaining < 0) > 20 AS some_reserved,
       count(*) FILTER (WHERE native_reset) > 20 AS some_reset,
       count(*) FILTER (WHERE rolled_back) > 100 AS some_rolled_back
FROM calls;
-- The first differences, if any.
SELECT i, key, op, cost, reserve, max_wait, max_reserved, native, portable, native_reset, portable_reset
FROM differences ORDER BY i LIMIT 5;

-- The same by policy: each policy option (a first balance, jitter, fixed
-- windows placed by window_start or by the key's hash, a floor rate,
-- reservation within max_reserved, a penalty box, report-only), takes with and without
-- max_wait, checks, refunds, all-or-nothing takes over several policies,
-- and resets.  (Sharded keys are left out: which two shards a call looks
-- at first is random.  sharded_numbers and sharded_waits hold them.)
CREATE TEMP TABLE policy_defs (name text, rate float8, per interval, burst float8,
                               initial float8, jitter float8, fixed_window boolean,
                               window_start interval, floor_rate float8, max_reserved float8,
                               penalty interval, enforce boolean DEFAULT true);
INSERT INTO policy_defs VALUES
    ('pp-plain',   5, '1 second', 10, NULL, 0,   false, NULL, 0, 0, NULL),
    ('pp-initial', 3, '1 second', 6,  1,    0,   false, NULL, 0, 0, NULL),
    ('pp-jitter',  1, '1 second', 3,  NULL, 0.5, false, NULL, 0, 0, NULL),
    ('pp-window',  4, '2 seconds', 6, NULL, 0,   true,  NULL, 0, 0, NULL),
    ('pp-wstart',  4, '2 seconds', 6, NULL, 0,   true,  '1 second', 0, 0, NULL),
    ('pp-floor',   60, '1 minute', 20, NULL, 0,  false, NULL, 120, 0, NULL),
    ('pp-reserve', 2, '1 second', 4,  NULL, 0,   false, NULL, 0, 6, NULL),
    ('pp-penalty', 2, '1 second', 3,  NULL, 0,   false, NULL, 0, 0, '3 seconds');
-- Report-only: a plain limit with jitter, one with a first balance,
-- reservation and a penalty box (which report-only never starts).
INSERT INTO policy_defs VALUES
    ('pp-shadow',  2, '1 second', 3,  NULL, 0.5, false, NULL, 0, 0, NULL, false),
    ('pp-shadow-box', 2, '1 second', 3, 1,  0,   false, NULL, 0, 4, '3 seconds', false);
SELECT count(*) AS defined FROM policy_defs AS d,
    LATERAL rate_limit_define(d.name, d.rate, d.per, d.burst, d.initial, d.jitter, d.fixed_window,
                              d.window_start, d.floor_rate, 1, d.max_reserved, d.penalty,
                              enforce => d.enforce) AS n,
    LATERAL portable_api.rate_limit_define(d.name, d.rate, d.per, d.burst, d.initial, d.jitter,
                                           d.fixed_window, d.window_start, d.floor_rate, 1,
                                           d.max_reserved, d.penalty, enforce => d.enforce) AS p;
CREATE TEMP TABLE policy_calls (i int, op text, names text[], keys text[], costs float8[],
                                max_wait interval, rolled_back boolean,
                                native rate_limit_decision, portable portable_api.rate_limit_decision,
                                native_all rate_limit_all_decision,
                                portable_all portable_api.rate_limit_all_decision,
                                native_reset boolean, portable_reset boolean);
DO $$
DECLARE
    clock float8 := 2000000;
    names text[] := ARRAY(SELECT name FROM policy_defs ORDER BY name);
    op text;
    pick float8;
    lim text[];
    keys text[];
    costs float8[];
    max_wait interval;
    rollback boolean;
    n rate_limit_decision;
    p portable_api.rate_limit_decision;
    na rate_limit_all_decision;
    pa portable_api.rate_limit_all_decision;
    nr boolean;
    pr boolean;
    native_done boolean;
BEGIN
    FOR i IN 1..2000 LOOP
        clock := clock + floor(random() * 6) / 64;
        PERFORM pg_catalog.set_config('ratelimit.fixed_clock', clock::text, false);
        PERFORM pg_catalog.set_config('portable_api.clock', clock::text, false);
        lim := ARRAY[names[1 + floor(random() * cardinality(names))::int],
                     names[1 + floor(random() * cardinality(names))::int],
                     names[1 + floor(random() * cardinality(names))::int]];
        keys := ARRAY['k' || floor(random() * 3)::int, 'k' || floor(random() * 3)::int,
                      'k' || floor(random() * 3)::int];
        costs := ARRAY[floor(random() * 12) / 4, floor(random() * 12) / 4, floor(random() * 12) / 4];
        pick := random();
        op := CASE WHEN pick < 0.35 THEN 'take' WHEN pick < 0.5 THEN 'take_wait'
                   WHEN pick < 0.6 THEN 'check' WHEN pick < 0.68 THEN 'check_wait'
                   WHEN pick < 0.78 THEN 'refund' WHEN pick < 0.95 THEN 'take_all'
                   ELSE 'reset' END;
        max_wait := floor(random() * 8) * interval '1 second';
        rollback := random() < 0.1;
        n := NULL; p := NULL; na := NULL; pa := NULL; nr := NULL; pr := NULL;
        native_done := false;
        BEGIN
            CASE op
            WHEN 'take' THEN
                n := rate_limit_take(lim[1], keys[1], costs[1]);
                native_done := true;
                p := portable_api.rate_limit_take(lim[1], keys[1], costs[1]);
            WHEN 'take_wait' THEN
                n := rate_limit_take(lim[1], keys[1], costs[1], max_wait);
                native_done := true;
                p := portable_api.rate_limit_take(lim[1], keys[1], costs[1], max_wait);
            WHEN 'check' THEN
                n := rate_limit_check(lim[1], keys[1], costs[1]);
                native_done := true;
                p := portable_api.rate_limit_check(lim[1], keys[1], costs[1]);
            WHEN 'check_wait' THEN
                n := rate_limit_check(lim[1], keys[1], costs[1], max_wait);
                native_done := true;
                p := portable_api.rate_limit_check(lim[1], keys[1], costs[1], max_wait);
            WHEN 'refund' THEN
                n := rate_limit_refund(lim[1], keys[1], costs[1]);
                native_done := true;
                p := portable_api.rate_limit_refund(lim[1], keys[1], costs[1]);
            WHEN 'take_all' THEN
                na := rate_limit_take_all(lim, keys, costs, max_wait);
                native_done := true;
                pa := portable_api.rate_limit_take_all(lim, keys, costs, max_wait);
            ELSE
                nr := rate_limit_reset(lim[1], keys[1]);
                native_done := true;
                pr := portable_api.rate_limit_reset(lim[1], keys[1]);
            END CASE;
            INSERT INTO policy_calls VALUES (i, op, lim, keys, costs, max_wait, rollback, n, p, na, pa, nr, pr);
            IF rollback THEN
                RAISE EXCEPTION 'roll back' USING ERRCODE = 'P0001';
            END IF;
        EXCEPTION
            WHEN raise_exception THEN
                INSERT INTO policy_calls VALUES (i, op, lim, keys, costs, max_wait, rollback, n, p, na, pa, nr, pr);
            WHEN invalid_parameter_value THEN
                -- A cost the limits can never serve (merged in take_all, or
                -- beyond the debt a policy allows): both must refuse it.
                IF native_done THEN
                    INSERT INTO policy_calls VALUES (i, 'refused by one', lim, keys, costs, max_wait, rollback,
                                                     n, p, na, pa, nr, pr);
                    CONTINUE;
                END IF;
                BEGIN
                    CASE op
                    WHEN 'take_all' THEN pa := portable_api.rate_limit_take_all(lim, keys, costs, max_wait);
                    WHEN 'take_wait' THEN p := portable_api.rate_limit_take(lim[1], keys[1], costs[1], max_wait);
                    WHEN 'check_wait' THEN p := portable_api.rate_limit_check(lim[1], keys[1], costs[1], max_wait);
                    WHEN 'take' THEN p := portable_api.rate_limit_take(lim[1], keys[1], costs[1]);
                    ELSE p := portable_api.rate_limit_check(lim[1], keys[1], costs[1]);
                    END CASE;
                    INSERT INTO policy_calls VALUES (i, 'refused by one', lim, keys, costs, max_wait, rollback,
                                                     n, p, na, pa, nr, pr);
                EXCEPTION WHEN invalid_parameter_value THEN
                    INSERT INTO policy_calls VALUES (i, 'refused', lim, keys, costs, max_wait, rollback,
                                                     n, p, na, pa, nr, pr);
                END;
        END;
    END LOOP;
END
$$;
RESET ratelimit.fixed_clock;

CREATE TEMP VIEW policy_differences AS
SELECT * FROM policy_calls
WHERE op = 'refused by one'
   OR native_reset IS DISTINCT FROM portable_reset
   OR row((native).allowed, (native).remaining, (native).retry_after, (native).reset_after,
          (native).capacity, (native).name, (native).quota, (native).per, (native).refill_after)
      IS DISTINCT FROM
      row((portable).allowed, (portable).remaining, (portable).retry_after, (portable).reset_after,
          (portable).capacity, (portable).name, (portable).quota, (portable).per,
          (portable).refill_after)
   OR native_all::text IS DISTINCT FROM portable_all::text;
SELECT count(*) AS calls, (SELECT count(*) FROM policy_differences) AS differ,
       count(DISTINCT op) AS kinds_of_call,
       count(*) FILTER (WHERE op LIKE 'take%' AND ((native).allowed OR (native_all).allowed)) > 300 AS some_granted,
       count(*) FILTER (WHERE op LIKE 'take%' AND NOT coalesce((native).allowed, (native_all).allowed)) > 100 AS some_denied,
       count(*) FILTER (WHERE (native).remaining < 0 OR EXISTS (SELECT FROM unnest((native_all).remaining) AS r WHERE r < 0)) > 10
           AS some_reserved,
       count(*) FILTER (WHERE op = 'take_all' AND NOT (native_all).allowed
                          AND EXISTS (SELECT FROM unnest((native_all).decisions) AS d WHERE d.allowed)) > 20
           AS all_or_nothing_denials,
       -- (Unjittered, a wait there is a whole number of the clock's 1/64 s
       -- steps.)
       count(*) FILTER (WHERE (native).name = 'pp-jitter' AND NOT (native).allowed
                          AND round((native).retry_after * 1e6)::bigint % 15625 <> 0) > 5
           AS some_jittered,
       count(*) FILTER (WHERE (native).name = 'pp-penalty' AND NOT (native).allowed
                          AND (native).remaining >= 1) > 5 AS some_boxed,
       count(*) FILTER (WHERE op = 'refused') > 0 AS some_refused_by_both,
       -- Report-only: allowed always, some of them would-be denials (a
       -- wait without a reservation, or beyond max_wait), some of those in
       -- all-or-nothing takes that granted.
       count(*) FILTER (WHERE (native).name LIKE 'pp-shadow%' AND op <> 'refund' AND NOT (native).allowed) = 0
           AS shadow_always_allowed,
       count(*) FILTER (WHERE (native).name LIKE 'pp-shadow%' AND op IN ('take', 'check')
                          AND (native).retry_after > 0) > 20 AS some_would_deny,
       count(*) FILTER (WHERE op = 'take_all' AND (native_all).allowed
                          AND EXISTS (SELECT FROM unnest((native_all).decisions) AS d WHERE NOT d.allowed)) > 5
           AS some_would_deny_in_all,
       count(*) FILTER (WHERE rolled_back) > 100 AS some_rolled_back
FROM policy_calls;
-- The first differences, if any.
SELECT i, op, names, keys, costs, max_wait, native, portable, native_all, portable_all
FROM policy_differences ORDER BY i LIMIT 5;

SELECT count(*) AS dropped FROM policy_defs AS d, LATERAL rate_limit_drop(d.name) AS n,
    LATERAL portable_api.rate_limit_drop(d.name) AS p;
-- At the ends of float8's range: a rate times a time (the refill of the
-- time elapsed, the debt refill repays within max_wait, a window's worth)
-- beyond float8 is Infinity in C, and below its least magnitude 0; both
-- limiters answer alike, where SQL's float8 * would raise 22003.  Each call
-- at its clock reading, through both; an error is compared by its SQLSTATE.
SELECT count(*) AS defined FROM (VALUES
    ('pp-huge', false), ('pp-huge-window', true)) AS d(name, fixed_window),
    LATERAL rate_limit_define(d.name, 1.7e308, '1 second', 10, fixed_window => d.fixed_window,
                              max_reserved => 1e300) AS n,
    LATERAL portable_api.rate_limit_define(d.name, 1.7e308, '1 second', 10, fixed_window => d.fixed_window,
                                           max_reserved => 1e300) AS p;
CREATE TEMP TABLE range_calls (i int, clock float8, call text, native text, portable text);
INSERT INTO range_calls (i, clock, call) VALUES
    (1, 3000000, $c$%srate_limit_take_explicit('pp-huge-x', 'a', 10, 1.7e308, '1 second', 10, '10 seconds', NULL)$c$),
    (2, 3000000, $c$%srate_limit_take_explicit('pp-huge-x', 'a', 12, 1.7e308, '1 second', 10, '1 hour', NULL)$c$),
    (3, 3000000, $c$%srate_limit_check_explicit('pp-huge-x', 'b', 12, 1.7e308, '1 second', 10, '100 years', 1e300)$c$),
    (4, 3000000, $c$%srate_limit_take('pp-huge-s', 'a', 10, 1.7e308, 10)$c$),
    (5, 3000005, $c$%srate_limit_take('pp-huge-s', 'a', 10, 1.7e308, 10)$c$),
    (6, 3000005, $c$%srate_limit_take('pp-huge', 'a', 12, '1 hour')$c$),
    (7, 3000005, $c$%srate_limit_check('pp-huge', 'b', 12, '1 hour')$c$),
    (8, 3000005, $c$%srate_limit_take('pp-huge-window', 'a', 12, '1 hour')$c$),
    (9, 3000009, $c$%srate_limit_take('pp-huge-window', 'a', 12, '1 hour')$c$),
    (10, 3000009, $c$%srate_limit_take_all('{pp-huge,pp-huge-window}', '{c,c}', '{12,12}', '1 hour')$c$),
    (11, 3000009, $c$%srate_limit_take('pp-huge', 'a', 10)$c$),
    (12, 3000010, $c$%srate_limit_take('pp-tiny-s', 'a', 1, 1e-320, 1)$c$),
    (13, 3000010.000001, $c$%srate_limit_take('pp-tiny-s', 'a', 1, 1e-320, 1)$c$),
    (14, 3000010.000001, $c$%srate_limit_take('pp-tiny-s', 'b', 1.5, 1e-320, 1, true)$c$),
    (15, 3000010.000001, $c$%srate_limit_take_explicit('pp-tiny-x', 'a', 1, 1e-318, '1 second', 1, '0.4 seconds', NULL)$c$);
DO $$
DECLARE
    c record;
    answer text;
BEGIN
    FOR c IN SELECT * FROM range_calls ORDER BY i LOOP
        PERFORM pg_catalog.set_config('ratelimit.fixed_clock', c.clock::text, false);
        PERFORM pg_catalog.set_config('portable_api.clock', c.clock::text, false);
        BEGIN
            EXECUTE pg_catalog.format('SELECT (%s)::text', pg_catalog.format(c.call, '')) INTO answer;
        EXCEPTION WHEN OTHERS THEN
            answer := 'error ' || SQLSTATE;
        END;
        UPDATE range_calls SET native = answer WHERE i = c.i;
        BEGIN
            EXECUTE pg_catalog.format('SELECT (%s)::text', pg_catalog.format(c.call, 'portable_api.')) INTO answer;
        EXCEPTION WHEN OTHERS THEN
            answer := 'error ' || SQLSTATE;
        END;
        UPDATE range_calls SET portable = answer WHERE i = c.i;
    END LOOP;
END
$$;
RESET ratelimit.fixed_clock;
SELECT count(*) AS calls, count(*) FILTER (WHERE native IS DISTINCT FROM portable) AS differ,
       count(*) FILTER (WHERE native LIKE '(t,%') AS granted
FROM range_calls;
SELECT i, call, native, portable FROM range_calls WHERE native IS DISTINCT FROM portable ORDER BY i;
SELECT count(*) AS dropped FROM (VALUES ('pp-huge'), ('pp-huge-window')) AS d(name),
    LATERAL rate_limit_drop(d.name) AS n, LATERAL portable_api.rate_limit_drop(d.name) AS p;

DELETE FROM ratelimit.buckets WHERE name LIKE 'pp-%';
DELETE FROM ratelimit.buckets WHERE name = 'pa';
SET client_min_messages = warning;
DROP SCHEMA portable_api CASCADE;
RESET client_min_messages;

--
-- The portable limiter (portable/ratelimit.sql) against the native one:
-- random sequences of takes, checks and refunds (per second and per period,
-- reserving within a wait and a cap or not) and resets over several keys,
-- some rolled back, at a clock both read the same way, must give the same
-- decisions field by field.
--
\set SHOW_CONTEXT never
CREATE SCHEMA portable_api;
SET search_path = portable_api;
-- (The script itself is not echoed.)
\set ECHO none
\i portable/ratelimit.sql
\set ECHO all
RESET search_path;
-- The portable clock, for this test only, reads the seconds the native
-- fixed clock is set to, from a setting of the test's own (current_setting
-- shows a float8 setting to six digits only).  Only the schema's owner can
-- replace the function; callers cannot.
CREATE OR REPLACE FUNCTION portable_api.rl_now() RETURNS bigint
LANGUAGE sql VOLATILE
AS $$ SELECT ((pg_catalog.current_setting('portable_api.clock')::float8 - 946684800)
              * 1000000)::bigint $$;

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

DELETE FROM ratelimit.buckets WHERE name = 'pa';
SET client_min_messages = warning;
DROP SCHEMA portable_api CASCADE;
RESET client_min_messages;

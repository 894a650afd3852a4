--
-- The portable limiter (portable/ratelimit.sql) against the native one:
-- random sequences of takes and checks over several keys, with and without
-- reservation, some rolled back, at a clock both read the same way, must
-- give the same decisions field by field.
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
CREATE TEMP TABLE calls (i int, key text, take boolean, cost float8, reserve boolean,
                         max_reserved float8, rolled_back boolean,
                         native rate_limit_decision, portable portable_api.rate_limit_decision);
DO $$
DECLARE
    clock float8 := 1000000;
    l record;
    op_take boolean;
    cost float8;
    reserve boolean;
    max_reserved float8;
    rollback boolean;
    n rate_limit_decision;
    p portable_api.rate_limit_decision;
BEGIN
    FOR i IN 1..2000 LOOP
        clock := clock + floor(random() * 64) / 64;
        PERFORM pg_catalog.set_config('ratelimit.fixed_clock', clock::text, false);
        PERFORM pg_catalog.set_config('portable_api.clock', clock::text, false);
        SELECT * INTO l FROM limits ORDER BY random() LIMIT 1;
        op_take := random() < 0.8;
        reserve := random() < 0.25;
        max_reserved := CASE WHEN reserve AND random() < 0.7 THEN floor(random() * 4) END;
        cost := least(l.burst, floor(random() * (l.burst + 2) * 4) / 4);
        rollback := random() < 0.1;
        BEGIN
            IF op_take THEN
                n := rate_limit_take('pa', l.key, cost, l.rate, l.burst, reserve, max_reserved);
                p := portable_api.rate_limit_take('pa', l.key, cost, l.rate, l.burst, reserve, max_reserved);
            ELSE
                n := rate_limit_check('pa', l.key, cost, l.rate, l.burst, reserve, max_reserved);
                p := portable_api.rate_limit_check('pa', l.key, cost, l.rate, l.burst, reserve, max_reserved);
            END IF;
            INSERT INTO calls VALUES (i, l.key, op_take, cost, reserve, max_reserved, rollback, n, p);
            IF rollback THEN
                RAISE EXCEPTION 'roll back' USING ERRCODE = 'P0001';
            END IF;
        EXCEPTION WHEN raise_exception THEN
            INSERT INTO calls VALUES (i, l.key, op_take, cost, reserve, max_reserved, rollback, n, p);
        END;
    END LOOP;
END
$$;
RESET ratelimit.fixed_clock;

SELECT count(*) AS calls,
       count(*) FILTER (WHERE row((native).allowed, (native).remaining, (native).retry_after,
                                  (native).reset_after, (native).capacity, (native).name,
                                  (native).quota, (native).per, (native).refill_after)
                              IS DISTINCT FROM
                              row((portable).allowed, (portable).remaining, (portable).retry_after,
                                  (portable).reset_after, (portable).capacity, (portable).name,
                                  (portable).quota, (portable).per, (portable).refill_after)) AS differ,
       count(*) FILTER (WHERE take AND (native).allowed) > 300 AS some_granted,
       count(*) FILTER (WHERE take AND NOT (native).allowed) > 100 AS some_denied,
       count(*) FILTER (WHERE (native).remaining < 0) > 20 AS some_reserved,
       count(*) FILTER (WHERE rolled_back) > 100 AS some_rolled_back
FROM calls;
-- The first differences, if any.
SELECT i, key, take, cost, reserve, max_reserved, native, portable
FROM calls
WHERE row((native).allowed, (native).remaining, (native).retry_after, (native).reset_after,
          (native).refill_after)
      IS DISTINCT FROM
      row((portable).allowed, (portable).remaining, (portable).retry_after, (portable).reset_after,
          (portable).refill_after)
ORDER BY i LIMIT 5;

DELETE FROM ratelimit.buckets WHERE name = 'pa';
SET client_min_messages = warning;
DROP SCHEMA portable_api CASCADE;
RESET client_min_messages;

--
-- The portable limiter's concurrency limits against the native one's: the
-- same random calls (takes, checks and all-or-nothing takes with a token
-- bucket, several places at once, report-only limits, costs out of range)
-- in savepoints kept or rolled back at random, nested, must give the same
-- decisions and errors field by field, the places each holds coming back
-- as the savepoints roll back and the transactions end.  (The two
-- limiters' places are advisory locks on different numbers: they never
-- meet.)
--
\set schema portable_holds
\set clock portable_holds.clock
\i test/sql/include/portable_beside_native.sql
SET ratelimit.fixed_clock = 1000000;
SET portable_holds.clock = 1000000;

SELECT count(*) AS defined FROM (VALUES ('ph-three', 3, true), ('ph-one', 1, true),
                                        ('ph-report', 2, false), ('ph-five', 5, true)) AS c(name, max_held, enforce),
    LATERAL rate_limit_define_concurrency(c.name, c.max_held, enforce => c.enforce) AS n,
    LATERAL portable_holds.rate_limit_define_concurrency(c.name, c.max_held, enforce => c.enforce) AS p;
SELECT count(*) AS defined FROM rate_limit_define('ph-rate', 6, '1 minute', 4) AS n,
    portable_holds.rate_limit_define('ph-rate', 6, '1 minute', 4) AS p;

-- One call of each limiter, as text (an error as its SQLSTATE, message
-- and detail); call is a format with %s where the schema goes.
CREATE FUNCTION pg_temp.answer(call text, schema text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    answer text;
BEGIN
    EXECUTE format('SELECT (%s)::text', format(call, schema)) INTO answer;
    RETURN answer;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS answer = PG_EXCEPTION_DETAIL;
    RETURN 'error ' || SQLSTATE || ': ' || SQLERRM || ' / ' || answer;
END
$$;

CREATE TEMP TABLE tally (calls int, differ int, granted int, denied int, errors int,
                         nested int, rolled_back int, first_differences text[]);
INSERT INTO tally VALUES (0, 0, 0, 0, 0, 0, 0, '{}');

-- Up to `steps` random calls at nesting depth `depth`; a nested level is a
-- savepoint (an EXCEPTION block), rolled back one time in two.  The tally
-- is kept in variables, which outlive a rollback, and returned.
CREATE FUNCTION pg_temp.calls(steps int, depth int, INOUT t tally) LANGUAGE plpgsql AS $$
DECLARE
    names text[] := ARRAY['ph-three', 'ph-one', 'ph-report', 'ph-five'];
    keys text[] := ARRAY['a', 'b'];
    pick float8;
    call text;
    n text;
    p text;
    inner_t tally;
BEGIN
    FOR i IN 1..steps LOOP
        pick := random();
        IF pick < 0.12 AND depth < 4 THEN
            t.nested := t.nested + 1;
            inner_t := t;
            BEGIN
                inner_t := pg_temp.calls(1 + floor(random() * 6)::int, depth + 1, inner_t);
                IF random() < 0.5 THEN
                    RAISE SQLSTATE 'PHRB0';
                END IF;
                t := inner_t;
            EXCEPTION WHEN SQLSTATE 'PHRB0' THEN
                t := inner_t;
                t.rolled_back := t.rolled_back + 1;
            END;
            CONTINUE;
        END IF;
        call := CASE
            WHEN pick < 0.50 THEN format('%%srate_limit_take(%L, %L, %s)', names[1 + floor(random() * 4)::int],
                                         keys[1 + floor(random() * 2)::int],
                                         (ARRAY[1, 1, 1, 2, 3, 0, 6, 1.5])[1 + floor(random() * 8)::int])
            WHEN pick < 0.65 THEN format('%%srate_limit_check(%L, %L, %s)', names[1 + floor(random() * 4)::int],
                                         keys[1 + floor(random() * 2)::int], floor(random() * 4)::int)
            ELSE format('%%srate_limit_take_all(ARRAY[%L, %L, %L], ARRAY[%L, %L, %L], ARRAY[%s, %s, %s]::float8[])',
                        'ph-rate', names[1 + floor(random() * 4)::int], names[1 + floor(random() * 4)::int],
                        keys[1 + floor(random() * 2)::int], keys[1 + floor(random() * 2)::int],
                        keys[1 + floor(random() * 2)::int],
                        floor(random() * 2)::int, floor(random() * 3)::int, floor(random() * 2)::int)
            END;
        n := pg_temp.answer(call, '');
        p := pg_temp.answer(call, 'portable_holds.');
        t.calls := t.calls + 1;
        IF n IS DISTINCT FROM p THEN
            t.differ := t.differ + 1;
            IF cardinality(t.first_differences) < 5 THEN
                t.first_differences := t.first_differences || format('%s: native %s, portable %s', format(call, ''), n, p);
            END IF;
        ELSIF n LIKE 'error%' THEN
            t.errors := t.errors + 1;
        ELSIF n LIKE '(t,%' THEN
            t.granted := t.granted + 1;
        ELSE
            t.denied := t.denied + 1;
        END IF;
    END LOOP;
END
$$;

-- Twenty-five transactions of random calls, each a second after the last: their
-- end gives back every place.  (They commit, to keep the tally; a
-- rollback gives places back as the savepoints rolled back show.)
SELECT setseed(0.42);
SELECT format('BEGIN; SET LOCAL ratelimit.fixed_clock = %1$s; SET LOCAL portable_holds.clock = %1$s; UPDATE tally SET (calls, differ, granted, denied, errors, nested, rolled_back, first_differences) = (SELECT (pg_temp.calls(25, 0, t)).* FROM tally AS t); COMMIT',
              1000000 + i)
  FROM generate_series(1, 25) AS i \gexec
SELECT calls > 600 AS many_calls, differ, granted > 150 AS some_granted, denied > 200 AS some_denied, errors > 50 AS some_errors,
       nested > 50 AS some_nested, rolled_back > 20 AS some_rolled_back
  FROM tally;
-- The first differences, if any.
SELECT unnest(first_differences) AS difference FROM tally;
-- Every place is free again in both.
SELECT count(*) AS free_everywhere FROM unnest(ARRAY['ph-three', 'ph-one', 'ph-report', 'ph-five']) AS c(name),
       unnest(ARRAY['a', 'b']) AS k(key),
       LATERAL rate_limit_check(c.name, k.key, 0) AS n, LATERAL portable_holds.rate_limit_check(c.name, k.key, 0) AS p
 WHERE n.remaining = n.capacity AND p.remaining = p.capacity;
RESET ratelimit.fixed_clock;
RESET portable_holds.clock;

SELECT count(*) AS dropped FROM (VALUES ('ph-three'), ('ph-one'), ('ph-report'), ('ph-five'), ('ph-rate')) AS d(name),
    LATERAL rate_limit_drop(d.name) AS n, LATERAL portable_holds.rate_limit_drop(d.name) AS p;
DELETE FROM ratelimit.buckets WHERE name = 'ph-rate';
SET client_min_messages = warning;
DROP SCHEMA portable_holds CASCADE;
RESET client_min_messages;

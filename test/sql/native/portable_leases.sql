--
-- The portable limiter's leases against the native one's: the same random
-- calls (leases, takes and checks of lease policies, all-or-nothing takes
-- with a token bucket, releases of the leases both granted, costs out of
-- range, a report-only limit), at a fixed clock that moves on with every
-- call so that leases expire, in savepoints kept or rolled back at random,
-- nested, must give the same decisions and errors field by field (a
-- lease's id, random, only as whether there is one).
--
\set schema portable_leases
\set clock portable_leases.clock
\i test/sql/include/portable_beside_native.sql
SET ratelimit.fixed_clock = 1000000;
SET portable_leases.clock = 1000000;

SELECT count(*) AS defined
  FROM (VALUES ('pl-three', 3, '5 seconds', true), ('pl-one', 1, '3 seconds', true),
               ('pl-report', 2, '4 seconds', false)) AS c(name, max_held, lease, enforce),
    LATERAL rate_limit_define_concurrency(c.name, c.max_held, c.lease::interval, enforce => c.enforce) AS n,
    LATERAL portable_leases.rate_limit_define_concurrency(c.name, c.max_held, c.lease::interval, enforce => c.enforce) AS p;
SELECT count(*) AS defined FROM rate_limit_define('pl-rate', 6, '1 minute', 4) AS n,
    portable_leases.rate_limit_define('pl-rate', 6, '1 minute', 4) AS p;

-- One call of each limiter, as text (an error as its SQLSTATE, message
-- and detail), and the lease it took, if any; call is a format with %s
-- where the schema goes.
CREATE FUNCTION pg_temp.answer(call text, schema text, OUT answer text, OUT lease uuid)
LANGUAGE plpgsql AS $$
BEGIN
    IF call LIKE '%%srate_limit_lease(%' THEN
        EXECUTE format('SELECT (l.allowed, l.remaining, l.retry_after, l.reset_after, l.capacity, l.name, l.quota,
                                l.per, l.refill_after, l.lease IS NOT NULL, l.expires_at)::text, l.lease
                          FROM %s AS l', format(call, schema)) INTO answer, lease;
    ELSE
        EXECUTE format('SELECT (%s)::text', format(call, schema)) INTO answer;
    END IF;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS answer = PG_EXCEPTION_DETAIL;
    answer := 'error ' || SQLSTATE || ': ' || SQLERRM || ' / ' || answer;
END
$$;

CREATE TEMP TABLE tally (calls int, differ int, granted int, denied int, errors int, released int,
                         nested int, rolled_back int, first_differences text[],
                         native_ids uuid[], portable_ids uuid[]);
INSERT INTO tally VALUES (0, 0, 0, 0, 0, 0, 0, 0, '{}', '{}', '{}');

-- Up to `steps` random calls at nesting depth `depth`; a nested level is a
-- savepoint (an EXCEPTION block), rolled back one time in two.  The tally
-- is kept in variables, which outlive a rollback, and returned; each call
-- moves both clocks on by 0.3 seconds (from `start`).
CREATE FUNCTION pg_temp.calls(start float8, steps int, depth int, INOUT t tally) LANGUAGE plpgsql AS $$
DECLARE
    names text[] := ARRAY['pl-three', 'pl-one', 'pl-report'];
    keys text[] := ARRAY['a', 'b'];
    pick float8;
    call text;
    n record;
    p record;
    pair int;
    inner_t tally;
BEGIN
    FOR i IN 1..steps LOOP
        pick := random();
        IF pick < 0.10 AND depth < 4 THEN
            t.nested := t.nested + 1;
            inner_t := t;
            BEGIN
                inner_t := pg_temp.calls(start, 1 + floor(random() * 6)::int, depth + 1, inner_t);
                IF random() < 0.5 THEN
                    RAISE SQLSTATE 'PLRB0';
                END IF;
                t := inner_t;
            EXCEPTION WHEN SQLSTATE 'PLRB0' THEN
                t := inner_t;
                t.rolled_back := t.rolled_back + 1;
            END;
            CONTINUE;
        END IF;
        PERFORM set_config('ratelimit.fixed_clock', (start + t.calls * 0.3)::text, true),
                set_config('portable_leases.clock', (start + t.calls * 0.3)::text, true);
        IF pick < 0.22 AND cardinality(t.native_ids) > 0 THEN
            -- One of the last few, most of them still in force.
            pair := cardinality(t.native_ids) - floor(random() * least(4, cardinality(t.native_ids)))::int;
            n := pg_temp.answer(format('%%srate_limit_release(%L)', t.native_ids[pair]), '');
            p := pg_temp.answer(format('%%srate_limit_release(%L)', t.portable_ids[pair]), 'portable_leases.');
            call := 'rate_limit_release';
        ELSE
            call := CASE
                WHEN pick < 0.55 THEN format('%%srate_limit_lease(%L, %L, %s)', names[1 + floor(random() * 3)::int],
                                             keys[1 + floor(random() * 2)::int],
                                             (ARRAY[1, 1, 1, 2, 3, 0, 4, 1.5])[1 + floor(random() * 8)::int])
                WHEN pick < 0.70 THEN format('%%srate_limit_take(%L, %L, %s)', names[1 + floor(random() * 3)::int],
                                             keys[1 + floor(random() * 2)::int], floor(random() * 3)::int)
                WHEN pick < 0.82 THEN format('%%srate_limit_check(%L, %L, %s)', names[1 + floor(random() * 3)::int],
                                             keys[1 + floor(random() * 2)::int], floor(random() * 4)::int)
                ELSE format('%%srate_limit_take_all(ARRAY[%L, %L, %L], ARRAY[%L, %L, %L], ARRAY[%s, %s, %s]::float8[])',
                            'pl-rate', names[1 + floor(random() * 3)::int], names[1 + floor(random() * 3)::int],
                            keys[1 + floor(random() * 2)::int], keys[1 + floor(random() * 2)::int],
                            keys[1 + floor(random() * 2)::int],
                            floor(random() * 2)::int, floor(random() * 3)::int, floor(random() * 2)::int)
                END;
            n := pg_temp.answer(call, '');
            p := pg_temp.answer(call, 'portable_leases.');
            IF n.lease IS NOT NULL AND p.lease IS NOT NULL THEN
                t.native_ids := t.native_ids || n.lease;
                t.portable_ids := t.portable_ids || p.lease;
            END IF;
        END IF;
        t.calls := t.calls + 1;
        IF n.answer IS DISTINCT FROM p.answer THEN
            t.differ := t.differ + 1;
            IF cardinality(t.first_differences) < 5 THEN
                t.first_differences := t.first_differences || format('%s: native %s, portable %s', format(call, ''), n.answer, p.answer);
            END IF;
        ELSIF call = 'rate_limit_release' THEN
            t.released := t.released + (n.answer = 'true')::int;
        ELSIF n.answer LIKE 'error%' THEN
            t.errors := t.errors + 1;
        ELSIF n.answer LIKE '(t,%' THEN
            t.granted := t.granted + 1;
        ELSE
            t.denied := t.denied + 1;
        END IF;
    END LOOP;
END
$$;

-- Twenty-five transactions of random calls, each a minute after the last
-- begins (every lease of the one before has expired by then).
SELECT setseed(0.42);
-- (The function is called once per transaction, in FROM: "(f(t)).*"
-- would call it once per column.)
SELECT format('BEGIN; UPDATE tally SET (calls, differ, granted, denied, errors, released, nested, rolled_back, first_differences, native_ids, portable_ids) = (SELECT c.* FROM tally AS t, LATERAL pg_temp.calls(%s, 30, 0, t) AS c); COMMIT',
              1000000 + 60 * i)
  FROM generate_series(1, 25) AS i \gexec
SELECT calls > 700 AS many_calls, differ, granted > 150 AS some_granted, denied > 50 AS some_denied,
       errors > 40 AS some_errors, released > 20 AS some_released, nested > 40 AS some_nested,
       rolled_back > 20 AS some_rolled_back
  FROM tally;
-- The first differences, if any.
SELECT unnest(first_differences) AS difference FROM tally;
-- Every lease has expired, in both.
SET ratelimit.fixed_clock = 1010000;
SET portable_leases.clock = 1010000;
SELECT count(*) AS free_everywhere FROM unnest(ARRAY['pl-three', 'pl-one', 'pl-report']) AS c(name),
       unnest(ARRAY['a', 'b']) AS k(key),
       LATERAL rate_limit_check(c.name, k.key, 0) AS n, LATERAL portable_leases.rate_limit_check(c.name, k.key, 0) AS p
 WHERE n.remaining = n.capacity AND p.remaining = p.capacity;
RESET ratelimit.fixed_clock;
RESET portable_leases.clock;

SELECT count(*) AS dropped FROM (VALUES ('pl-three'), ('pl-one'), ('pl-report'), ('pl-rate')) AS d(name),
    LATERAL rate_limit_drop(d.name) AS n, LATERAL portable_leases.rate_limit_drop(d.name) AS p;
DELETE FROM ratelimit.buckets WHERE name = 'pl-rate';
DELETE FROM ratelimit.leases WHERE name LIKE 'pl-%';
SET client_min_messages = warning;
DROP SCHEMA portable_leases CASCADE;
RESET client_min_messages;

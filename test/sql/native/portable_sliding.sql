--
-- The portable limiter's sliding windows (portable/sliding.sql) against the
-- native ones (src/core/sliding_window.cpp): the same random takes, checks,
-- refunds, all-or-nothing takes (two windows and a token bucket), resets
-- and purges, at a fixed clock that moves on by whole microseconds (now and
-- then back), across window boundaries, to a microsecond either side of
-- them, on windows of a length no float8 divides exactly, must give the
-- same decisions (every column, as text: every float8 to the last bit) and
-- leave the same rows (tokens, last_refill, previous, full_at).
--
\set schema portable_sliding
\set clock portable_sliding.clock
\i test/sql/include/portable_beside_native.sql

-- Windows: a whole count in 10 s, a fractional one in 3 s, one in a
-- window of 1.000001 s (no weight a float8 holds exactly), one of 7 µs;
-- and a token bucket to take with them.
SELECT count(*) AS defined
  FROM (VALUES ('ps-ten', 5::float8, '10 seconds'::interval), ('ps-frac', 7.5, '3 seconds'),
               ('ps-odd', 3, '1.000001 seconds'), ('ps-tiny', 2, '7 microseconds')) AS c(name, n, w),
    LATERAL rate_limit_define_sliding_window(c.name, c.n, c.w) AS d,
    LATERAL portable_sliding.rate_limit_define_sliding_window(c.name, c.n, c.w) AS p;
SELECT count(*) AS defined FROM rate_limit_define('ps-bucket', 10, '1 minute', 4) AS n,
    portable_sliding.rate_limit_define('ps-bucket', 10, '1 minute', 4) AS p;

-- The rows of both, as text, in one order.
CREATE FUNCTION pg_temp.native_rows() RETURNS text
LANGUAGE sql AS $$
SELECT coalesce(string_agg(format('%s/%s/%s/%s/%s/%s', name, key, tokens, last_refill, previous, full_at),
                           ' ' ORDER BY name, key), '')
  FROM ratelimit.buckets WHERE name LIKE 'ps-%' $$;
CREATE FUNCTION pg_temp.portable_rows() RETURNS text
LANGUAGE sql AS $$
SELECT coalesce(string_agg(format('%s/%s/%s/%s/%s/%s', name, key, tokens,
                                  portable_sliding.rl_timestamp(stamp_us), previous,
                                  portable_sliding.rl_timestamp(full_at_us)),
                           ' ' ORDER BY name, key), '')
  FROM portable_sliding.rl_buckets WHERE name LIKE 'ps-%' $$;

-- Each call through both at the same clock; its answer (or error) as text.
CREATE FUNCTION pg_temp.answer(call text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    answer text;
BEGIN
    EXECUTE call INTO answer;
    RETURN answer;
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;
CREATE TEMP TABLE calls (step int, op text, call text, native text, portable text,
                         native_rows text, portable_rows text, carried bigint);
-- steps random calls on from the clock where the last left it.
CREATE FUNCTION pg_temp.run(steps int) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    names CONSTANT text[] := ARRAY['ps-ten', 'ps-frac', 'ps-odd', 'ps-tiny'];
    windows CONSTANT bigint[] := ARRAY[10000000, 3000000, 1000001, 7];
    clock_us bigint := coalesce(nullif(current_setting('portable_sliding.clock_us', true), ''), '1000000000')::bigint;
    first int := (SELECT coalesce(max(c.step), 0) + 1 FROM calls AS c);
    w int;
    name text;
    key text;
    cost text;
    op text;
    roll float8;
    call text;
BEGIN
    FOR step IN first..first + steps - 1 LOOP
        w := 1 + floor(random() * 4)::int;
        name := names[w];
        key := 'k' || floor(random() * 2)::int;
        -- The clock: mostly a little on, sometimes to a microsecond either
        -- side of a boundary of this window, sometimes far on, now and
        -- then back.
        roll := random();
        clock_us := clock_us + CASE
            WHEN roll < 0.45 THEN floor(random() * windows[w] / 20)::bigint
            WHEN roll < 0.70 THEN (windows[w] - clock_us % windows[w]) + floor(random() * 3)::bigint - 1
            WHEN roll < 0.85 THEN 0
            WHEN roll < 0.95 THEN floor(random() * windows[w] * 2.5)::bigint
            ELSE -floor(random() * windows[w] / 2)::bigint END;
        PERFORM set_config('ratelimit.fixed_clock', (clock_us::numeric / 1000000)::text, false);
        PERFORM set_config('portable_sliding.clock', (clock_us::numeric / 1000000)::text, false);
        cost := CASE WHEN random() < 0.6 THEN floor(random() * 4)::text
                     WHEN random() < 0.9 THEN round((random() * 2.5)::numeric, 6)::text
                     ELSE '9' END;    -- above every max_count: an error
        roll := random();
        op := CASE WHEN roll < 0.45 THEN 'take' WHEN roll < 0.60 THEN 'check'
                   WHEN roll < 0.75 THEN 'refund' WHEN roll < 0.93 THEN 'take_all'
                   ELSE 'reset' END;
        call := CASE op
            WHEN 'take' THEN format('SELECT d::text FROM %%s.rate_limit_take(%L, %L, %s) AS d', name, key, cost)
            WHEN 'check' THEN format('SELECT d::text FROM %%s.rate_limit_check(%L, %L, %s) AS d', name, key, cost)
            WHEN 'refund' THEN format('SELECT d::text FROM %%s.rate_limit_refund(%L, %L, %s) AS d', name, key, cost)
            WHEN 'take_all' THEN format('SELECT d::text FROM %%s.rate_limit_take_all(ARRAY[%L, %L, %L], ARRAY[%L, %L, %L], ARRAY[%s, %s, 1]) AS d',
                                        name, names[1 + w % 4], 'ps-bucket', key, key, key,
                                        cost, floor(random() * 3))
            ELSE format('SELECT %%s.rate_limit_reset(%L, %L)::text', name, key) END;
        INSERT INTO calls
        VALUES (step, op, call,
                pg_temp.answer(format(call, 'public')), pg_temp.answer(format(call, 'portable_sliding')),
                pg_temp.native_rows(), pg_temp.portable_rows(),
                (SELECT count(*) FROM ratelimit.buckets AS b WHERE b.name LIKE 'ps-%' AND b.previous > 0));
    END LOOP;
    PERFORM set_config('portable_sliding.clock_us', clock_us::text, false);
    RETURN clock_us;
END
$$;
-- Six runs of 500, each followed by a purge of both at the clock it left
-- and by the listing of every window's buckets.  A purge is of the test's
-- own names, one by one (the native table holds what other tests left):
-- what each limiter says it purged and the rows of the name it deleted are
-- kept (purges) and compared; the listings after it are compared.
CREATE TEMP TABLE purges (step int, clock text, name text, native bigint, portable bigint,
                          native_gone bigint, portable_gone bigint, native_left bigint, same_rows boolean);
-- Purges name in both at the clock set.  The portable one first: its
-- purge must be the statement that began the transaction.
CREATE PROCEDURE pg_temp.purge(p_name text)
LANGUAGE plpgsql AS $$
DECLARE
    native bigint;
    portable bigint;
    native_before bigint;
    portable_before bigint;
BEGIN
    native_before := (SELECT count(*) FROM ratelimit.buckets AS b WHERE b.name = p_name);
    portable_before := (SELECT count(*) FROM portable_sliding.rl_buckets AS b WHERE b.name = p_name);
    CALL portable_sliding.rate_limit_purge(p_name, portable);
    CALL rate_limit_purge(p_name, native);
    INSERT INTO purges
    SELECT (SELECT coalesce(max(c.step), 0) + 1 FROM calls AS c), current_setting('portable_sliding.clock'),
           p_name, native, portable,
           native_before - (SELECT count(*) FROM ratelimit.buckets AS b WHERE b.name = p_name),
           portable_before - (SELECT count(*) FROM portable_sliding.rl_buckets AS b WHERE b.name = p_name),
           (SELECT count(*) FROM ratelimit.buckets AS b WHERE b.name = p_name),
           pg_temp.native_rows() = pg_temp.portable_rows();
END
$$;
CREATE FUNCTION pg_temp.listing(schema text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    answer text;
BEGIN
    EXECUTE format('SELECT string_agg(b::text, '' '' ORDER BY n, b.key) FROM unnest(ARRAY[''ps-ten'', ''ps-frac'', ''ps-odd'', ''ps-tiny'', ''ps-bucket'']) AS n,
                    LATERAL %s.rate_limit_buckets(n) AS b', schema) INTO answer;
    RETURN answer;
END
$$;
SELECT setseed(0.17);
DO $$
BEGIN
    FOR round IN 1..6 LOOP
        ASSERT pg_temp.run(500) > 0, 'a run of 500 made no call';
        CALL pg_temp.purge('ps-ten');
        CALL pg_temp.purge('ps-frac');
        CALL pg_temp.purge('ps-odd');
        CALL pg_temp.purge('ps-tiny');
        CALL pg_temp.purge('ps-bucket');
        INSERT INTO calls
        SELECT max(step) + 1, 'purge', NULL, pg_temp.listing('public'), pg_temp.listing('portable_sliding'),
               pg_temp.native_rows(), pg_temp.portable_rows(), NULL FROM calls;
    END LOOP;
END
$$;
RESET ratelimit.fixed_clock;

-- Every call made, of each kind, some granted and some denied, and none
-- answered or stored otherwise.
SELECT count(*) AS calls,
       count(*) FILTER (WHERE native IS DISTINCT FROM portable) AS answers_differ,
       count(*) FILTER (WHERE native_rows IS DISTINCT FROM portable_rows) AS rows_differ,
       count(*) FILTER (WHERE native LIKE '(t,%') > 1500 AS some_granted,
       count(*) FILTER (WHERE native LIKE '(f,%') > 100 AS some_denied,
       count(*) FILTER (WHERE op = 'take_all' AND native LIKE '(f,%') > 30 AS all_denied,
       count(*) FILTER (WHERE native LIKE '22023:%') > 100 AS some_errors,
       count(*) FILTER (WHERE carried > 0) > 1000 AS previous_counts,
       count(DISTINCT native_rows) > 1000 AS rows_change
FROM calls;
SELECT op, count(*) FROM calls WHERE op = 'purge' GROUP BY op;
-- Every purge of every name: both said the same, each what it deleted of
-- that name, and left the same rows; some deleted rows, some left some.
SELECT count(*) AS purges,
       count(*) FILTER (WHERE native IS DISTINCT FROM portable) AS counts_differ,
       count(*) FILTER (WHERE native IS DISTINCT FROM native_gone
                          OR portable IS DISTINCT FROM portable_gone) AS miscounted,
       count(*) FILTER (WHERE same_rows IS NOT TRUE) AS rows_differ,
       count(*) FILTER (WHERE native > 0) > 5 AS some_purged,
       count(*) FILTER (WHERE native_left > 0) > 5 AS some_left
  FROM purges;
SELECT step, name, native, portable, native_gone, portable_gone FROM purges
 WHERE native IS DISTINCT FROM portable OR native IS DISTINCT FROM native_gone
    OR portable IS DISTINCT FROM portable_gone
 ORDER BY step, name LIMIT 3;
SELECT op, count(*) > 100 AS enough FROM calls WHERE op <> 'purge' GROUP BY op ORDER BY op;
-- The first differences, if any.
SELECT step, op, call, native, portable FROM calls
 WHERE native IS DISTINCT FROM portable ORDER BY step LIMIT 3;
SELECT step, op, call, native_rows, portable_rows FROM calls
 WHERE native_rows IS DISTINCT FROM portable_rows ORDER BY step LIMIT 3;

-- A name defined again with another kind keeps its rows, and a token
-- bucket's write stores previous 0 (a take of a policy with a penalty box, one
-- without, and rate_limit_take_all alike): the window defined again
-- finds no count of the window before but what the bucket left.
CREATE TEMP TABLE switches (step int, call text, native text, portable text,
                            native_rows text, portable_rows text);
DO $$
DECLARE
    calls CONSTANT text[] := ARRAY[
        '5000|SELECT d::text FROM %s.rate_limit_define_sliding_window(''ps-switch'', 5, ''10 seconds'') AS d',
        '5000|SELECT d::text FROM %s.rate_limit_take(''ps-switch'', ''quick'', 4) AS d',
        '5000|SELECT d::text FROM %s.rate_limit_take(''ps-switch'', ''general'', 4) AS d',
        '5000|SELECT d::text FROM %s.rate_limit_take(''ps-switch'', ''all'', 4) AS d',
        '5012|SELECT d::text FROM %s.rate_limit_take(''ps-switch'', ''quick'', 1) AS d',
        '5012|SELECT d::text FROM %s.rate_limit_take(''ps-switch'', ''general'', 1) AS d',
        '5012|SELECT d::text FROM %s.rate_limit_take(''ps-switch'', ''all'', 1) AS d',
        '5012|SELECT d::text FROM %s.rate_limit_define(''ps-switch'', 5, ''10 seconds'', penalty => ''1 second'') AS d',
        '5013|SELECT d::text FROM %s.rate_limit_take(''ps-switch'', ''general'', 1) AS d',
        '5013|SELECT d::text FROM %s.rate_limit_define(''ps-switch'', 5, ''10 seconds'') AS d',
        '5013|SELECT d::text FROM %s.rate_limit_take(''ps-switch'', ''quick'', 1) AS d',
        '5013|SELECT d::text FROM %s.rate_limit_take_all(ARRAY[''ps-switch'', ''ps-bucket''], ARRAY[''all'', ''all'']) AS d',
        '5014|SELECT d::text FROM %s.rate_limit_define_sliding_window(''ps-switch'', 5, ''10 seconds'') AS d',
        '5014|SELECT d::text FROM %s.rate_limit_check(''ps-switch'', ''quick'', 0) AS d',
        '5014|SELECT d::text FROM %s.rate_limit_check(''ps-switch'', ''general'', 0) AS d',
        '5014|SELECT d::text FROM %s.rate_limit_check(''ps-switch'', ''all'', 0) AS d'];
    clock text;
BEGIN
    FOR i IN 1..cardinality(calls) LOOP
        clock := split_part(calls[i], '|', 1);
        PERFORM set_config('ratelimit.fixed_clock', clock, false);
        PERFORM set_config('portable_sliding.clock', clock, false);
        INSERT INTO switches
        VALUES (i, split_part(calls[i], '|', 2),
                pg_temp.answer(format(split_part(calls[i], '|', 2), 'public')),
                pg_temp.answer(format(split_part(calls[i], '|', 2), 'portable_sliding')),
                pg_temp.native_rows(), pg_temp.portable_rows());
    END LOOP;
END
$$;
RESET ratelimit.fixed_clock;
SELECT count(*) AS calls,
       count(*) FILTER (WHERE native IS DISTINCT FROM portable) AS answers_differ,
       count(*) FILTER (WHERE native_rows IS DISTINCT FROM portable_rows) AS rows_differ
  FROM switches;
SELECT step, call, native_rows, portable_rows FROM switches
 WHERE native IS DISTINCT FROM portable OR native_rows IS DISTINCT FROM portable_rows
 ORDER BY step LIMIT 3;

-- Purges of a window of its own at set clocks, what each says shown: keys
-- a, b and c take 2 of 5 at 5000 and still count at 5014; 'late' takes at
-- 5025; at 5031 a, b and c are two windows on and go, 'late' stays; at
-- 5045 it goes too.
CREATE FUNCTION pg_temp.set_clock(seconds text) RETURNS text
LANGUAGE sql AS $$
SELECT set_config('ratelimit.fixed_clock', seconds, false) || ' ' || set_config('portable_sliding.clock', seconds, false) $$;
SELECT pg_temp.set_clock('5000');
SELECT count(*) AS defined FROM rate_limit_define_sliding_window('ps-purge', 5, '10 seconds') AS n,
    portable_sliding.rate_limit_define_sliding_window('ps-purge', 5, '10 seconds') AS p;
SELECT count(*) FILTER (WHERE n::text = p::text AND n.allowed) AS same_granted
  FROM unnest(ARRAY['a', 'b', 'c']) AS k, LATERAL rate_limit_take('ps-purge', k, 2) AS n,
    LATERAL portable_sliding.rate_limit_take('ps-purge', k, 2) AS p;
SELECT pg_temp.set_clock('5014');
CALL pg_temp.purge('ps-purge');
SELECT pg_temp.set_clock('5025');
SELECT n::text = p::text AS same, n.allowed
  FROM rate_limit_take('ps-purge', 'late', 1) AS n, portable_sliding.rate_limit_take('ps-purge', 'late', 1) AS p;
SELECT pg_temp.set_clock('5031');
CALL pg_temp.purge('ps-purge');
SELECT pg_temp.set_clock('5045');
CALL pg_temp.purge('ps-purge');
RESET ratelimit.fixed_clock;
SELECT clock, native, portable, native_gone, portable_gone, native_left, same_rows
  FROM purges WHERE name = 'ps-purge' ORDER BY clock::numeric;

SELECT count(*) AS dropped
  FROM unnest(ARRAY['ps-ten', 'ps-frac', 'ps-odd', 'ps-tiny', 'ps-bucket', 'ps-switch', 'ps-purge']) AS n,
    LATERAL rate_limit_drop(n) AS d;
SET client_min_messages = warning;
DROP SCHEMA portable_sliding CASCADE;
RESET client_min_messages;

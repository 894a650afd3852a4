--
-- The portable limiter's quick take against the native one where its first
-- estimate of a wait is a microsecond off: rates whose waits are not whole
-- microseconds (one a day, three in seven seconds, a thousand in three
-- seconds, ...), by policy and with explicit parameters, granted and
-- denied, must give the same decisions field by field (every float8 to the
-- last bit).  portable_api's rates and clocks give waits its estimates find
-- exactly; these do not, about one wait in four.
--
\set schema portable_waits
\set clock portable_waits.clock
\i test/sql/include/portable_beside_native.sql
SELECT setseed(0.31);
CREATE TEMP TABLE wait_limits (k int, name text, rate float8, per interval, burst float8);
INSERT INTO wait_limits VALUES
    (1, 'pw-day',      1, '1 day',      1),
    (2, 'pw-seven',    3, '7 seconds',  5),
    (3, 'pw-third', 1000, '3 seconds',  7),
    (4, 'pw-odd',     13, '11 minutes', 4),
    (5, 'pw-tenth',  0.1, '1 second',   2.5);
SELECT count(*) AS defined
FROM wait_limits AS l,
     LATERAL rate_limit_define(l.name, l.rate, l.per, l.burst) AS n,
     LATERAL portable_waits.rate_limit_define(l.name, l.rate, l.per, l.burst) AS p;
CREATE TEMP TABLE wait_calls (i int, name text, key text, op text, cost float8,
                              native rate_limit_decision, portable portable_waits.rate_limit_decision);
DO $$
DECLARE
    clock float8 := 2000000;
    l record;
    op text;
    pick float8;
    cost float8;
    key text;
    per_second float8;
    n rate_limit_decision;
    p portable_waits.rate_limit_decision;
BEGIN
    FOR i IN 1..2000 LOOP
        clock := clock + floor(random() * 256) / 64;
        PERFORM pg_catalog.set_config('ratelimit.fixed_clock', clock::text, false);
        PERFORM pg_catalog.set_config('portable_waits.clock', clock::text, false);
        SELECT * INTO l FROM wait_limits ORDER BY random() LIMIT 1;
        key := 'k' || floor(random() * 3);
        pick := random();
        op := CASE WHEN pick < 0.5 THEN 'take' WHEN pick < 0.6 THEN 'check'
                   WHEN pick < 0.9 THEN 'take_explicit' ELSE 'check_explicit' END;
        cost := CASE WHEN random() < 0.7 THEN 1 ELSE floor(random() * l.burst * 4) / 4 END;
        per_second := l.rate / extract(epoch FROM l.per)::float8;
        CASE op
        WHEN 'take' THEN
            n := rate_limit_take(l.name, key, cost);
            p := portable_waits.rate_limit_take(l.name, key, cost);
        WHEN 'check' THEN
            n := rate_limit_check(l.name, key, cost);
            p := portable_waits.rate_limit_check(l.name, key, cost);
        WHEN 'take_explicit' THEN
            n := rate_limit_take('pw-' || l.k, key, cost, per_second, l.burst);
            p := portable_waits.rate_limit_take('pw-' || l.k, key, cost, per_second, l.burst);
        ELSE
            n := rate_limit_check('pw-' || l.k, key, cost, per_second, l.burst);
            p := portable_waits.rate_limit_check('pw-' || l.k, key, cost, per_second, l.burst);
        END CASE;
        INSERT INTO wait_calls VALUES (i, l.name, key, op, cost, n, p);
    END LOOP;
END
$$;
CREATE TEMP VIEW wait_differences AS
SELECT * FROM wait_calls
WHERE row((native).allowed, (native).remaining, (native).retry_after, (native).reset_after,
          (native).capacity, (native).name, (native).quota, (native).per, (native).refill_after)
      IS DISTINCT FROM
      row((portable).allowed, (portable).remaining, (portable).retry_after, (portable).reset_after,
          (portable).capacity, (portable).name, (portable).quota, (portable).per,
          (portable).refill_after);
SELECT count(*) AS calls, (SELECT count(*) FROM wait_differences) AS differ,
       count(DISTINCT op) AS kinds_of_call,
       count(*) FILTER (WHERE op LIKE 'take%' AND (native).allowed) > 300 AS some_granted,
       count(*) FILTER (WHERE op LIKE 'take%' AND NOT (native).allowed) > 300 AS some_denied
FROM wait_calls;
-- The first differences, if any.
SELECT i, name, key, op, cost, native, portable FROM wait_differences ORDER BY i LIMIT 5;
-- The rows both leave, to the last bit, at the last call's clock.
CREATE TEMP TABLE wait_rows AS
SELECT l.name, n.key AS native_key, p.key AS portable_key,
       (n.tokens, n.last_refill, n.full_at)::text AS native, (p.tokens, p.last_refill, p.full_at)::text AS portable
FROM (SELECT name FROM wait_limits UNION ALL SELECT 'pw-' || k FROM wait_limits) AS l,
     LATERAL (SELECT n.key, n.tokens, n.last_refill, n.full_at, p.key, p.tokens, p.last_refill, p.full_at
              FROM rate_limit_buckets(l.name) AS n
              FULL JOIN portable_waits.rate_limit_buckets(l.name) AS p USING (key)) AS j(nk, nt, nl, nf, pk, pt, pl, pf),
     LATERAL (SELECT j.nk, j.nt, j.nl, j.nf) AS n(key, tokens, last_refill, full_at),
     LATERAL (SELECT j.pk, j.pt, j.pl, j.pf) AS p(key, tokens, last_refill, full_at);
SELECT count(*) AS rows, count(*) FILTER (WHERE native_key IS DISTINCT FROM portable_key
                                              OR native IS DISTINCT FROM portable) AS rows_differ
FROM wait_rows;
SELECT * FROM wait_rows WHERE native_key IS DISTINCT FROM portable_key OR native IS DISTINCT FROM portable
ORDER BY name, native_key LIMIT 5;
RESET ratelimit.fixed_clock;

SELECT count(*) AS dropped
FROM wait_limits AS l, LATERAL rate_limit_drop(l.name) AS n, LATERAL portable_waits.rate_limit_drop(l.name) AS p;
DELETE FROM ratelimit.buckets WHERE name LIKE 'pw-%';
SET client_min_messages = warning;
DROP SCHEMA portable_waits CASCADE;
RESET client_min_messages;

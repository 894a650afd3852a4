--
-- The portable limiter's purge (portable/maintenance.sql) against the
-- native one, on policies whose row in rl_policies carries an xmax that is
-- only a row lock: left by a committed SELECT ... FOR KEY SHARE or FOR
-- SHARE, or by a policy defined again in a block with an exception handler
-- (a multixact).  Such a row was not replaced: the buckets full by it go,
-- as the native purge deletes them.  And a purge called more than once in
-- one procedure, after a COMMIT: allowed, as the native one is.
--
\set schema portable_purge
\set clock ratelimit.fixed_clock
\i test/sql/include/portable_beside_native.sql

-- Token buckets of 4 a minute, a sliding window of 4 in 10 seconds; each
-- defined in both.
SELECT count(*) AS defined
  FROM unnest(ARRAY['pp-plain', 'pp-key-share', 'pp-share', 'pp-redefined']) AS n,
    LATERAL rate_limit_define(n, 4, '1 minute') AS d,
    LATERAL portable_purge.rate_limit_define(n, 4, '1 minute') AS p;
SELECT count(*) AS defined FROM rate_limit_define_sliding_window('pp-window', 4, '10 seconds') AS d,
    portable_purge.rate_limit_define_sliding_window('pp-window', 4, '10 seconds') AS p;
CREATE TEMP TABLE xmax_before AS
SELECT p.name, p.xmax::text AS was FROM portable_purge.rl_policies AS p;

-- Rows locked by committed transactions, each a statement of its own.
SELECT name FROM portable_purge.rl_policies WHERE name = 'pp-key-share' FOR KEY SHARE;
SELECT name FROM portable_purge.rl_policies WHERE name IN ('pp-share', 'pp-window') ORDER BY name FOR SHARE;
-- Defined again, twice, each time in a block with an exception handler.
DO $$
BEGIN
    FOR i IN 1..2 LOOP
        BEGIN
            PERFORM portable_purge.rate_limit_define('pp-redefined', 4, '1 minute');
        EXCEPTION WHEN OTHERS THEN
            RAISE;
        END;
    END LOOP;
END
$$;
-- Each locked row's xmax is another transaction's (or a multixact's) than
-- the one that wrote it; the locks by FOR KEY SHARE and FOR SHARE are of
-- committed transactions.
SELECT p.name, p.xmax::text IS DISTINCT FROM b.was AS xmax_changed,
       p.xmax <> '0'::xid AND p.xmax <> p.xmin AS xmax_another,
       CASE WHEN p.name IN ('pp-key-share', 'pp-share', 'pp-window') THEN portable_purge.rl_committed(p.xmax) END AS committed
  FROM portable_purge.rl_policies AS p JOIN xmax_before AS b USING (name)
 WHERE p.name LIKE 'pp-%' ORDER BY p.name;

-- Keys a and b of every name take all at 5000; at 6000 every bucket is
-- full again.
SET ratelimit.fixed_clock = 5000;
SELECT count(*) FILTER (WHERE n.allowed AND n::text = p::text) AS same_granted
  FROM unnest(ARRAY['pp-plain', 'pp-key-share', 'pp-share', 'pp-redefined', 'pp-window']) AS l,
    unnest(ARRAY['a', 'b']) AS k,
    LATERAL rate_limit_take(l, k, 4) AS n, LATERAL portable_purge.rate_limit_take(l, k, 4) AS p;
SET ratelimit.fixed_clock = 6000;

-- Purges name in both: what each says it purged and how many of the
-- name's buckets each left.  The portable one first: its purge must be the
-- statement that began the transaction.
CREATE TEMP TABLE purges (name text, native bigint, portable bigint, native_left bigint, portable_left bigint);
CREATE PROCEDURE pg_temp.purge(p_name text)
LANGUAGE plpgsql AS $$
DECLARE
    native bigint;
    portable bigint;
BEGIN
    CALL portable_purge.rate_limit_purge(p_name, portable);
    CALL rate_limit_purge(p_name, native);
    INSERT INTO purges
    VALUES (p_name, native, portable,
            (SELECT count(*) FROM ratelimit.buckets AS b WHERE b.name = p_name),
            (SELECT count(*) FROM portable_purge.rl_buckets AS b WHERE b.name = p_name));
END
$$;
CALL pg_temp.purge('pp-plain');
CALL pg_temp.purge('pp-key-share');
CALL pg_temp.purge('pp-share');
CALL pg_temp.purge('pp-redefined');
CALL pg_temp.purge('pp-window');
-- Both purged every bucket of every name.
SELECT name, native, portable, native_left, portable_left FROM purges ORDER BY name;

-- Several purges in one procedure, the second after the first's commits
-- and the third after a COMMIT of the procedure's own: the portable purge,
-- as the native one, runs in each.
SET ratelimit.fixed_clock = 7000;
SELECT count(*) FILTER (WHERE n.allowed AND n::text = p::text) AS same_granted
  FROM unnest(ARRAY['pp-plain', 'pp-window', 'pp-share']) AS l, unnest(ARRAY['a', 'b']) AS k,
    LATERAL rate_limit_take(l, k, 4) AS n, LATERAL portable_purge.rate_limit_take(l, k, 4) AS p;
SET ratelimit.fixed_clock = 8000;
TRUNCATE purges;
CREATE PROCEDURE pg_temp.purges()
LANGUAGE plpgsql AS $$
BEGIN
    CALL pg_temp.purge('pp-plain');
    CALL pg_temp.purge('pp-window');
    COMMIT;
    CALL pg_temp.purge('pp-share');
END
$$;
CALL pg_temp.purges();
SELECT name, native, portable, native_left, portable_left FROM purges ORDER BY name;
-- Inside a transaction block it is still refused before any batch.
BEGIN;
CALL portable_purge.rate_limit_purge('pp-plain');
ROLLBACK;

RESET ratelimit.fixed_clock;
SELECT count(*) AS dropped
  FROM unnest(ARRAY['pp-plain', 'pp-key-share', 'pp-share', 'pp-redefined', 'pp-window']) AS n,
    LATERAL rate_limit_drop(n) AS d;
SET client_min_messages = warning;
DROP SCHEMA portable_purge CASCADE;
RESET client_min_messages;

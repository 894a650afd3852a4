-- portable/platform.sql: what the limiter reads of the server it runs on.
-- Included by ratelimit.sql, before everything else, and by the upgrade
-- script to 0.4.0 (update--0.3.0--0.4.0.sql).
--
-- rl_on_yugabytedb(): whether the server is YugabyteDB (its version()
-- names it: "PostgreSQL 15.2-YB-2025.1.0.0-b0 on ..."), found once, here,
-- and kept as a constant, so that a call that asks costs nothing (a test
-- may replace it).  YugabyteDB has no transaction ids and no system
-- columns xmin, xmax and ctid, by which the limiter reads a policy as last
-- committed whatever the caller's snapshot (policy_lookup.sql): there it
-- runs at READ COMMITTED only, where every statement reads the latest
-- committed rows, and takes other ways where it would read them
-- (rl_find_policy, rl_purge_batch; rate_limit_take leaves its common case
-- to PostgreSQL).  Its tables are logged and replicated: the bucket table
-- is a plain one there (ratelimit.sql), and rate_limit_set_logged(false)
-- is refused.  The install warns where READ COMMITTED would not be in
-- force.
DO $platform$
BEGIN
    EXECUTE pg_catalog.format(
        'CREATE OR REPLACE FUNCTION rl_on_yugabytedb() RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS %L',
        CASE WHEN pg_catalog.version() OPERATOR(pg_catalog.~) '-YB-'::pg_catalog.text THEN 'SELECT true'
             ELSE 'SELECT false' END);
    IF pg_catalog.version() OPERATOR(pg_catalog.~) '-YB-'::pg_catalog.text
       AND pg_catalog.current_setting('yb_effective_transaction_isolation_level', true)
           OPERATOR(pg_catalog.<>) 'read committed'::pg_catalog.text THEN
        RAISE WARNING 'this session''s transactions run at %, not READ COMMITTED',
                      pg_catalog.current_setting('yb_effective_transaction_isolation_level')
            USING ERRCODE = 'warning',
                  DETAIL = 'On YugabyteDB the limiter''s calls run at READ COMMITTED only, and refuse other levels.',
                  HINT = 'Set the yb-tserver flag yb_enable_read_committed_isolation to true.';
    END IF;
END
$platform$;
COMMENT ON FUNCTION rl_on_yugabytedb() IS
    'whether the limiter runs on YugabyteDB, as found when it was installed';

-- The order rl_buckets' rows are kept in on YugabyteDB, where its primary
-- key is hash-sharded: by yb_hash_code(name, key), a number from 0 to
-- 65535, and then by (name, key); a purge pages through the table in that
-- order (rl_purge_batch).  One expression, so that it is inlined into the
-- query and YugabyteDB sees the call it can push down as a range of
-- tablets.  PostgreSQL has no yb_hash_code, and never calls this: there it
-- is a 16-bit hash of its own of (name, key), a stand-in with which a test
-- takes YugabyteDB's way (test/sql/portable/portable_yugabytedb.sql).
DO $hash_code$
BEGIN
    EXECUTE pg_catalog.format(
        'CREATE OR REPLACE FUNCTION rl_hash_code(name text, key text) RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE AS %L',
        CASE WHEN pg_catalog.version() OPERATOR(pg_catalog.~) '-YB-'::pg_catalog.text
             THEN 'SELECT pg_catalog.yb_hash_code(name, key)::integer'
             ELSE 'SELECT (pg_catalog.hashtextextended(key, pg_catalog.hashtextextended(name, ''0''::bigint))
                           OPERATOR(pg_catalog.&) ''65535''::bigint)::integer' END);
END
$hash_code$;
COMMENT ON FUNCTION rl_hash_code(text, text) IS
    'the hash code by which YugabyteDB orders a bucket''s row (yb_hash_code), or a stand-in on PostgreSQL';

-- On YugabyteDB, a call that reads policies: refused (0A000) unless the
-- transaction runs at READ COMMITTED, as YugabyteDB says it does
-- (yb_effective_transaction_isolation_level: with
-- yb_enable_read_committed_isolation off, READ COMMITTED runs as REPEATABLE
-- READ while transaction_isolation still says read committed).
CREATE FUNCTION rl_require_read_committed() RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    level text := coalesce(pg_catalog.current_setting('yb_effective_transaction_isolation_level', true),
                           pg_catalog.current_setting('transaction_isolation'));
BEGIN
    IF level <> 'read committed' THEN
        RAISE EXCEPTION 'the portable limiter runs only at READ COMMITTED on YugabyteDB'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = pg_catalog.format('This transaction runs at %s.  YugabyteDB has no transaction ids and no system column xmax, by which the limiter tells on PostgreSQL that a policy changed after a snapshot was taken, so it reads policies as last committed only where every statement takes a snapshot of its own.', level),
                  HINT = 'Run the call at READ COMMITTED, with the yb-tserver flag yb_enable_read_committed_isolation set to true: without it, READ COMMITTED runs as REPEATABLE READ.';
    END IF;
END
$$;
COMMENT ON FUNCTION rl_require_read_committed() IS
    'refuses a call that reads policies on YugabyteDB outside READ COMMITTED';

-- The clock, in whole microseconds since 2000-01-01 UTC: the count a
-- timestamptz holds, which its binary form (timestamptz_send) is, as a
-- 64-bit integer.  One expression that names the clock once, so that the
-- planner inlines it into the query that reads it.
CREATE FUNCTION rl_now() RETURNS bigint
LANGUAGE sql VOLATILE PARALLEL SAFE
AS $$ SELECT (('x'::pg_catalog.text OPERATOR(pg_catalog.||)
               pg_catalog.encode(pg_catalog.timestamptz_send(pg_catalog.clock_timestamp()), 'hex'::pg_catalog.text))
              ::pg_catalog.bit(64))::bigint $$;
COMMENT ON FUNCTION rl_now() IS 'the limiter''s clock: microseconds since 2000-01-01 UTC';

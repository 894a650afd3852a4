-- portable/platform.sql: what the limiter reads of the server it runs on.
-- Included by ratelimit.sql, before everything else, and by the upgrade
-- script to 0.4.0 (update--0.3.0--0.4.0.sql).
--
-- rl_on_yugabytedb(): whether the server is YugabyteDB (its version()
-- names it: "PostgreSQL 15.2-YB-2025.1.0.0-b0 on ..."), found once, here,
-- and kept as a constant, so that a call that asks costs nothing.  The
-- bucket table is defined for it (ratelimit.sql), and rate_limit_take
-- leaves its common case, which reads the system column xmax, to
-- PostgreSQL.
DO $platform$
BEGIN
    EXECUTE pg_catalog.format(
        'CREATE OR REPLACE FUNCTION rl_on_yugabytedb() RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS %L',
        CASE WHEN pg_catalog.version() OPERATOR(pg_catalog.~) '-YB-'::pg_catalog.text THEN 'SELECT true'
             ELSE 'SELECT false' END);
END
$platform$;
COMMENT ON FUNCTION rl_on_yugabytedb() IS
    'whether the limiter runs on YugabyteDB, as found when it was installed';

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

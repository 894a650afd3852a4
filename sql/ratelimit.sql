/* sql/ratelimit.sql: the install script of the current version */

-- scripts/sql-script makes sql/ratelimit--<version>.sql (the control file's
-- default_version) from this file at build time: each \ir replaced by the
-- file it names.  The objects the portable limiter and the router share
-- with this extension are written once, in sql/src/ (see sql/src/README).
-- The scripts of released versions never change; the upgrade script to the
-- current version is made from sql/update--<from>--<version>.sql by
-- scripts/sql-script --upgrade (test/sql/native/upgrade.sql compares an
-- upgraded install with a fresh one).

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
--extension: \echo Use "CREATE EXTENSION ratelimit" to load this file. \quit

\ir names.sql

--------------------------------------------------------------------------------
-- ratelimit--0.1.0.sql
--------------------------------------------------------------------------------

-- Bucket state lives in a schema of its own, owned by the extension.  The
-- functions read and write the table directly, so nobody else needs (or
-- gets) any privilege on it: the functions are the interface.
--
-- Installed into a schema named ratelimit (the schema the script runs in),
-- the state goes there too: that schema is the user's, so it is neither
-- created nor changed.  Otherwise the state schema is created here, as in
-- 0.1.0; CREATE SCHEMA IF NOT EXISTS would fail on a schema the extension
-- does not own, hence the dynamic statements.
DO $$
BEGIN
    IF pg_catalog.current_schema() OPERATOR(pg_catalog.=) 'ratelimit' THEN
        RETURN;
    END IF;
    IF pg_catalog.to_regnamespace('ratelimit') IS NOT NULL THEN
        RAISE EXCEPTION 'schema "ratelimit" already exists'
            USING ERRCODE = 'duplicate_schema',
                  DETAIL = 'The extension keeps its state in a schema named ratelimit, which it creates and owns unless it is installed into that schema.',
                  HINT = 'Install the extension into the schema "ratelimit", or rename that schema first.';
    END IF;
    EXECUTE 'CREATE SCHEMA ratelimit';
    EXECUTE 'REVOKE ALL ON SCHEMA ratelimit FROM PUBLIC';
    EXECUTE 'COMMENT ON SCHEMA ratelimit IS ''internal state of the ratelimit extension''';
END
$$;

-- One row per bucket.  UNLOGGED: no WAL, so a crash empties it (every bucket
-- starts full again).  COLLATE "C" makes key comparison a memcmp.  The low
-- fillfactor leaves room on each page so that updates stay HOT, and the
-- autovacuum settings clean dead versions up after a fixed number of them.
-- (ratelimit--0.2.0--0.3.0.sql adds full_at and blocked_until, the upgrade
-- to 0.4.0 previous.)
CREATE UNLOGGED TABLE ratelimit.buckets (
    name        text COLLATE "C" NOT NULL,
    key         text COLLATE "C" NOT NULL,
    tokens      float8 NOT NULL,
    last_refill timestamptz NOT NULL,
    full_at     timestamptz NOT NULL,
    blocked_until timestamptz NOT NULL,
    previous    float8 NOT NULL DEFAULT '0'::float8,
    CONSTRAINT buckets_pkey PRIMARY KEY (name, key)
) WITH (
    fillfactor = 30,
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_cost_delay = 0,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 10000
);
REVOKE ALL ON TABLE ratelimit.buckets FROM PUBLIC;
COMMENT ON TABLE ratelimit.buckets IS
    'token buckets of the ratelimit extension: written only by its functions';
COMMENT ON COLUMN ratelimit.buckets.full_at IS
    'when the bucket is full again under the limit it was last written with (infinity: never, or not known); rate_limit_purge() forgets it from then on';
COMMENT ON COLUMN ratelimit.buckets.blocked_until IS
    'until when a penalty box denies every take of the key (-infinity: never boxed)';
COMMENT ON COLUMN ratelimit.buckets.previous IS
    'a sliding window''s count of the window before the one last_refill is in (tokens is then the window''s limit less its own count); 0 for a token bucket';
\ir src/decision_types.sql

CREATE FUNCTION @extschema@.rate_limit_take(
    name         text,
    key          text,
    cost         float8,
    rate         float8,
    burst        float8,
    reserve      boolean DEFAULT false,
    max_reserved float8  DEFAULT NULL)
RETURNS @extschema@.rate_limit_decision
AS 'MODULE_PATHNAME', 'rate_limit_take'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.rate_limit_take(text, text, float8, float8, float8, boolean, float8) IS
    'takes cost tokens from the bucket (name, key) that refills at rate tokens per second up to burst; a denial changes nothing; rolled back with the caller''s transaction';

CREATE FUNCTION @extschema@.rate_limit_check(
    name         text,
    key          text,
    cost         float8,
    rate         float8,
    burst        float8,
    reserve      boolean DEFAULT false,
    max_reserved float8  DEFAULT NULL)
RETURNS @extschema@.rate_limit_decision
AS 'MODULE_PATHNAME', 'rate_limit_check'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rate_limit_check(text, text, float8, float8, float8, boolean, float8) IS
    'answers as rate_limit_take would, without consuming or writing anything';

CREATE FUNCTION @extschema@.rate_limit_reset(name text, key text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'rate_limit_reset'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.rate_limit_reset(text, text) IS
    'forgets the bucket (name, key) so that it starts full again; true if it existed';

-- Any role may take and check.  Resetting hands out a full bucket, so it is
-- withheld from PUBLIC: grant it to the roles that need it.
REVOKE ALL ON FUNCTION @extschema@.rate_limit_reset(text, text) FROM PUBLIC;

--------------------------------------------------------------------------------
-- ratelimit--0.1.0--0.2.0.sql
--------------------------------------------------------------------------------
\ir src/policies_table.sql
COMMENT ON TABLE ratelimit.policies IS
    'named rate limit policies of the ratelimit extension, written by rate_limit_define()';
SELECT pg_catalog.pg_extension_config_dump('ratelimit.policies', '');

-- Every backend caches policies; a change invalidates the caches when it
-- commits, whoever makes it: the triggers fire ALWAYS (also under
-- session_replication_role = replica), and for each row, as the logical
-- replication apply worker fires row triggers only.  While they are not
-- both there and ENABLE ALWAYS, the limiter caches nothing.
CREATE FUNCTION ratelimit.policies_changed() RETURNS trigger
AS 'MODULE_PATHNAME', 'rate_limit_policies_changed'
LANGUAGE C;
COMMENT ON FUNCTION ratelimit.policies_changed() IS
    'invalidates every backend''s cache of rate limit policies when a change commits';
CREATE TRIGGER policies_changed
    AFTER INSERT OR UPDATE OR DELETE ON ratelimit.policies
    FOR EACH ROW EXECUTE FUNCTION ratelimit.policies_changed();
CREATE TRIGGER policies_truncated
    AFTER TRUNCATE ON ratelimit.policies
    FOR EACH STATEMENT EXECUTE FUNCTION ratelimit.policies_changed();
ALTER TABLE ratelimit.policies ENABLE ALWAYS TRIGGER policies_changed;
ALTER TABLE ratelimit.policies ENABLE ALWAYS TRIGGER policies_truncated;

-- Raises 55000 where the memory engine has no shared memory (before
-- PostgreSQL 17, without the library preloaded); rate_limit_define calls it
-- for a memory policy.
CREATE FUNCTION ratelimit.require_memory_engine() RETURNS void
AS 'MODULE_PATHNAME', 'rate_limit_require_memory_engine'
LANGUAGE C;
COMMENT ON FUNCTION ratelimit.require_memory_engine() IS
    'raises an error unless the memory engine has shared memory for its buckets (before PostgreSQL 17: ratelimit in shared_preload_libraries)';
REVOKE ALL ON FUNCTION ratelimit.require_memory_engine() FROM PUBLIC;
\ir src/policy_options.sql
\ir src/define.sql

\ir concurrency.sql
\ir src/define_concurrency.sql
\ir sliding.sql
\ir src/define_sliding.sql

\ir src/policies_view.sql

CREATE FUNCTION @extschema@.rate_limit_take(name text, key text, cost float8 DEFAULT 1)
RETURNS @extschema@.rate_limit_decision
AS 'MODULE_PATHNAME', 'rate_limit_take_policy'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.rate_limit_take(text, text, float8) IS
    'takes cost tokens from the bucket (name, key) with the rate and burst of policy name';

CREATE FUNCTION @extschema@.rate_limit_check(name text, key text, cost float8 DEFAULT 1)
RETURNS @extschema@.rate_limit_decision
AS 'MODULE_PATHNAME', 'rate_limit_check_policy'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rate_limit_check(text, text, float8) IS
    'answers as rate_limit_take(name, key, cost) would, without consuming or writing anything';

CREATE FUNCTION @extschema@.rate_limit_refund(name text, key text, amount float8)
RETURNS @extschema@.rate_limit_decision
AS 'MODULE_PATHNAME', 'rate_limit_refund_policy'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.rate_limit_refund(text, text, float8) IS
    'gives amount tokens back to the bucket (name, key) of policy name, never beyond its burst';

CREATE FUNCTION @extschema@.rate_limit_refund(
    name text, key text, amount float8, rate float8, burst float8)
RETURNS @extschema@.rate_limit_decision
AS 'MODULE_PATHNAME', 'rate_limit_refund'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.rate_limit_refund(text, text, float8, float8, float8) IS
    'gives amount tokens back to the bucket (name, key) that refills at rate up to burst';


CREATE FUNCTION @extschema@.rate_limit_take_all(names text[], keys text[], costs float8[] DEFAULT NULL)
RETURNS @extschema@.rate_limit_all_decision
AS 'MODULE_PATHNAME', 'rate_limit_take_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.rate_limit_take_all(text[], text[], float8[]) IS
    'takes costs[i] (default 1) from bucket (names[i], keys[i]) under policy names[i] for every i, or from none; rows are locked in one canonical order';

-- Defining policies and handing tokens back are administrative: granted on
-- purpose, like rate_limit_reset.
REVOKE ALL ON FUNCTION ratelimit.policies_changed() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.rate_limit_refund(text, text, float8) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.rate_limit_refund(text, text, float8, float8, float8) FROM PUBLIC;

--------------------------------------------------------------------------------
-- ratelimit--0.2.0--0.3.0.sql
--------------------------------------------------------------------------------

-- Reservation by policy: max_wait is how long the caller accepts to wait
-- for reserved work to start.  No default, so that the three-argument forms
-- stay as they are.
CREATE FUNCTION @extschema@.rate_limit_take(name text, key text, cost float8, max_wait interval)
RETURNS @extschema@.rate_limit_decision
AS 'MODULE_PATHNAME', 'rate_limit_take_policy_wait'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.rate_limit_take(text, text, float8, interval) IS
    'takes cost tokens from the bucket (name, key) of policy name; when it holds too few, reserves them if the work may start within max_wait and the policy''s max_reserved allows the debt';

CREATE FUNCTION @extschema@.rate_limit_check(name text, key text, cost float8, max_wait interval)
RETURNS @extschema@.rate_limit_decision
AS 'MODULE_PATHNAME', 'rate_limit_check_policy_wait'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rate_limit_check(text, text, float8, interval) IS
    'answers as rate_limit_take(name, key, cost, max_wait) would, without consuming or writing anything';

CREATE FUNCTION @extschema@.rate_limit_take_all(
    names text[], keys text[], costs float8[], max_wait interval)
RETURNS @extschema@.rate_limit_all_decision
AS 'MODULE_PATHNAME', 'rate_limit_take_all_wait'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.rate_limit_take_all(text[], text[], float8[], interval) IS
    'takes costs[i] (default 1) from bucket (names[i], keys[i]) under policy names[i] for every i, or from none, each reserving within max_wait where its policy allows; rows are locked in one canonical order';

-- Explicit parameters in the units of rate_limit_define: rate tokens per
-- period per, burst by default the rate.  For trusted callers: refused on a
-- name a policy governs.  Names of their own: as overloads of rate_limit_take,
-- an untyped fifth argument (a parameter as node-postgres sends it) would
-- match both them and the 0.1.0 forms, and 0.1.0 calls would fail as
-- ambiguous.
CREATE FUNCTION @extschema@.rate_limit_take_explicit(
    name         text,
    key          text,
    cost         float8,
    rate         float8,
    per          interval,
    burst        float8   DEFAULT NULL,
    max_wait     interval DEFAULT NULL,
    max_reserved float8   DEFAULT NULL)
RETURNS @extschema@.rate_limit_decision
AS 'MODULE_PATHNAME', 'rate_limit_take_explicit'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.rate_limit_take_explicit(text, text, float8, float8, interval, float8, interval, float8) IS
    'takes cost tokens from the bucket (name, key) that refills rate tokens per period per up to burst (default: rate); reserves within max_wait and max_reserved when given; refused on a name a policy governs';

CREATE FUNCTION @extschema@.rate_limit_check_explicit(
    name         text,
    key          text,
    cost         float8,
    rate         float8,
    per          interval,
    burst        float8   DEFAULT NULL,
    max_wait     interval DEFAULT NULL,
    max_reserved float8   DEFAULT NULL)
RETURNS @extschema@.rate_limit_decision
AS 'MODULE_PATHNAME', 'rate_limit_check_explicit'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rate_limit_check_explicit(text, text, float8, float8, interval, float8, interval, float8) IS
    'answers as rate_limit_take_explicit with the same arguments would, without consuming or writing anything';

CREATE FUNCTION @extschema@.rate_limit_refund_explicit(
    name   text,
    key    text,
    amount float8,
    rate   float8,
    per    interval,
    burst  float8 DEFAULT NULL)
RETURNS @extschema@.rate_limit_decision
AS 'MODULE_PATHNAME', 'rate_limit_refund_explicit'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.rate_limit_refund_explicit(text, text, float8, float8, interval, float8) IS
    'gives amount tokens back to the bucket (name, key) that refills rate tokens per period per up to burst (default: rate); refused on a name a policy governs';
REVOKE ALL ON FUNCTION @extschema@.rate_limit_refund_explicit(text, text, float8, float8, interval, float8) FROM PUBLIC;

\ir src/headers_policy.sql
\ir src/headers.sql
\ir src/lease_headers.sql


-- Cleanup: forgets the buckets whose deletion changes no answer (refilled
-- to full, with no debt, and no first sighting a policy's initial balance
-- must remember), in batches of table pages that each commit, so that it
-- never holds a row lock for long and a take of the same key wins.  A
-- procedure, so that it can commit; withheld from PUBLIC: grant it to the
-- role that runs maintenance.
CREATE PROCEDURE @extschema@.rate_limit_purge(
    name   text   DEFAULT NULL,
    INOUT purged bigint DEFAULT NULL)
AS 'MODULE_PATHNAME', 'rate_limit_purge'
LANGUAGE C;
COMMENT ON PROCEDURE @extschema@.rate_limit_purge(text, bigint) IS
    'forgets the buckets of name (NULL: of every name) whose deletion changes no answer: full again, with no debt and nothing else to remember; commits after each batch; purged: how many';
REVOKE ALL ON PROCEDURE @extschema@.rate_limit_purge(text, bigint) FROM PUBLIC;

-- Resetting a whole limit: every bucket of a name starts afresh.  In
-- batches that each commit, waiting for a bucket's writer only in a
-- transaction that holds no other bucket, so that it cannot deadlock with
-- callers that hold several.  Withheld from PUBLIC, like rate_limit_reset.
CREATE PROCEDURE @extschema@.rate_limit_reset_limit(
    name  text,
    INOUT reset bigint DEFAULT NULL)
AS 'MODULE_PATHNAME', 'rate_limit_reset_limit'
LANGUAGE C;
COMMENT ON PROCEDURE @extschema@.rate_limit_reset_limit(text, bigint) IS
    'forgets every bucket of limit name, so that each key starts afresh; commits after each batch; reset: how many buckets';
REVOKE ALL ON PROCEDURE @extschema@.rate_limit_reset_limit(text, bigint) FROM PUBLIC;

\ir buckets.sql

-- Durability, when wanted: in a logged table bucket state is kept across
-- crashes, streamed to standbys (where rate_limit_check answers) and carried
-- on after a promotion; every write of it then goes to WAL.  Switching
-- rewrites the table under an ACCESS EXCLUSIVE lock: calls wait meanwhile.
-- Withheld from PUBLIC.
CREATE FUNCTION @extschema@.rate_limit_set_logged(logged boolean)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    was_logged boolean;
BEGIN
    IF logged IS NULL THEN
        RAISE EXCEPTION 'logged must not be null'
            USING ERRCODE = 'null_value_not_allowed',
                  DETAIL = 'true keeps bucket state in a logged table, false in an unlogged one.',
                  HINT = 'Pass true or false.';
    END IF;
    SELECT c.relpersistence OPERATOR(pg_catalog.=) 'p'::"char" INTO was_logged
      FROM pg_catalog.pg_class c
     WHERE c.oid OPERATOR(pg_catalog.=) 'ratelimit.buckets'::pg_catalog.regclass;
    IF was_logged OPERATOR(pg_catalog.=) logged THEN
        RETURN false;
    END IF;
    IF logged THEN
        ALTER TABLE ratelimit.buckets SET LOGGED;
    ELSE
        ALTER TABLE ratelimit.buckets SET UNLOGGED;
    END IF;
    RETURN true;
END
$$;
COMMENT ON FUNCTION @extschema@.rate_limit_set_logged(boolean) IS
    'keeps bucket state in a logged table (true: kept across crashes and on standbys, every write goes to WAL) or an unlogged one (false, the default: emptied by a crash, absent on standbys); rewrites the table; true if it changed';
REVOKE ALL ON FUNCTION @extschema@.rate_limit_set_logged(boolean) FROM PUBLIC;

-- Counters of takes per limit, in the style of pg_stat_statements: since
-- the server started or the counters were last reset, not transactional (a
-- take rolled back stays counted).  Shared memory: before PostgreSQL 17 only
-- with ratelimit in shared_preload_libraries, otherwise reading them says so.
-- Readable by pg_read_all_stats; resetting is granted deliberately.
CREATE FUNCTION @extschema@.rate_limit_stats(
    OUT name              text,
    OUT grants            bigint,
    OUT denials           bigint,
    OUT tokens_granted    float8,
    OUT reservations      bigint,
    OUT lock_wait_seconds float8)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'rate_limit_stats'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rate_limit_stats() IS
    'per limit, the takes counted since the last reset: grants, denials, tokens granted, reservations (grants into debt) and seconds spent waiting for other transactions'' row locks';

CREATE VIEW @extschema@.rate_limit_stats AS
SELECT s.name, s.grants, s.denials, s.tokens_granted, s.reservations, s.lock_wait_seconds
  FROM @extschema@.rate_limit_stats() AS s;
COMMENT ON VIEW @extschema@.rate_limit_stats IS
    'per limit, the takes counted since the last reset (rate_limit_stats_reset)';

CREATE FUNCTION @extschema@.rate_limit_stats_info(
    OUT dropped     bigint,
    OUT stats_reset timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'rate_limit_stats_info'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rate_limit_stats_info() IS
    'takes not counted because ratelimit.stats_limits limits were counted already, and when the counters were last reset';

CREATE VIEW @extschema@.rate_limit_stats_info AS
SELECT i.dropped, i.stats_reset FROM @extschema@.rate_limit_stats_info() AS i;
COMMENT ON VIEW @extschema@.rate_limit_stats_info IS
    'takes not counted for want of room, and when the counters were last reset';

CREATE FUNCTION @extschema@.rate_limit_stats_reset(name text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'rate_limit_stats_reset'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rate_limit_stats_reset(text) IS
    'zeroes the take counters of limit name, or of every limit (NULL)';

REVOKE ALL ON FUNCTION @extschema@.rate_limit_stats() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.rate_limit_stats_info() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.rate_limit_stats_reset(text) FROM PUBLIC;
REVOKE ALL ON @extschema@.rate_limit_stats FROM PUBLIC;
REVOKE ALL ON @extschema@.rate_limit_stats_info FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.rate_limit_stats() TO pg_read_all_stats;
GRANT EXECUTE ON FUNCTION @extschema@.rate_limit_stats_info() TO pg_read_all_stats;
GRANT SELECT ON @extschema@.rate_limit_stats TO pg_read_all_stats;
GRANT SELECT ON @extschema@.rate_limit_stats_info TO pg_read_all_stats;

\ir memory_stats.sql

/* sql/ratelimit--0.1.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION ratelimit" to load this file. \quit

-- Bucket state lives in a schema of its own, owned by the extension.  The
-- functions read and write the table directly, so nobody else needs (or
-- gets) any privilege on it: the functions are the interface.
DO $$
BEGIN
    IF pg_catalog.to_regnamespace('ratelimit') IS NOT NULL THEN
        RAISE EXCEPTION 'schema "ratelimit" already exists'
            USING ERRCODE = 'duplicate_schema',
                  DETAIL = 'The extension keeps its state in a schema named ratelimit, which it creates and owns.',
                  HINT = 'Install the extension into another schema, or rename the existing schema "ratelimit".';
    END IF;
END
$$;
CREATE SCHEMA ratelimit;
REVOKE ALL ON SCHEMA ratelimit FROM PUBLIC;
COMMENT ON SCHEMA ratelimit IS 'internal state of the ratelimit extension';

-- One row per bucket.  UNLOGGED: no WAL, so a crash empties it (every bucket
-- starts full again).  COLLATE "C" makes key comparison a memcmp.  The low
-- fillfactor leaves room on each page so that updates stay HOT, and the
-- autovacuum settings clean dead versions up after a fixed number of them.
CREATE UNLOGGED TABLE ratelimit.buckets (
    name        text COLLATE "C" NOT NULL,
    key         text COLLATE "C" NOT NULL,
    tokens      float8 NOT NULL,
    last_refill timestamptz NOT NULL,
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

CREATE TYPE @extschema@.rate_limit_decision AS (
    allowed     boolean,
    remaining   float8,
    retry_after float8,
    reset_after float8,
    capacity    float8
);
COMMENT ON TYPE @extschema@.rate_limit_decision IS
    'answer of a rate limit call: allowed, tokens remaining (negative = reserved debt), seconds until a retry succeeds or reserved work may start, seconds until full, and the burst';

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

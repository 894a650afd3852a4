-- sql/concurrency.sql: included by ratelimit.sql and by the upgrade to 0.4.0
--
-- Concurrency limits held as leases (src/pg/leases.cpp): the table that
-- keeps them, whichever the policy's storage, and the calls that take and
-- release them.  ratelimit.require_concurrency is the native target's check
-- of the kind of hold (rate_limit_define_concurrency calls it): every kind
-- is kept.

CREATE FUNCTION ratelimit.require_concurrency(storage text, lease interval) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- Both engines keep places until the transaction ends (in the server's
    -- lock table) and leases (in ratelimit.leases).
    RETURN;
END
$$;
COMMENT ON FUNCTION ratelimit.require_concurrency(text, interval) IS
    'raises an error for a concurrency limit this version does not keep (none: every kind is kept)';
REVOKE ALL ON FUNCTION ratelimit.require_concurrency(text, interval) FROM PUBLIC;

-- Leases: state, as ratelimit.buckets is (unlogged, not dumped: a restored
-- database starts with no lease, as after a crash).  Written only by the
-- functions, through (name, key, expires_at) and the primary key.
CREATE UNLOGGED TABLE ratelimit.leases (
    id         uuid NOT NULL,
    name       text COLLATE "C" NOT NULL,
    key        text COLLATE "C" NOT NULL,
    places     integer NOT NULL,
    expires_at timestamptz NOT NULL,
    CONSTRAINT leases_pkey PRIMARY KEY (id)
) WITH (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 10000
);
CREATE INDEX leases_key ON ratelimit.leases (name, key, expires_at);
REVOKE ALL ON TABLE ratelimit.leases FROM PUBLIC;
--upgrade: REVOKE ALL ON TABLE ratelimit.leases FROM PUBLIC;
COMMENT ON TABLE ratelimit.leases IS
    'leases of the concurrency limits of the ratelimit extension, each places places of (name, key) until expires_at or its release: written only by its functions';

-- rate_limit_drop deletes the leases of the policy it drops, in its
-- transaction (a policy defined again under the name would count them),
-- whatever its snapshot: it waits for every lease of the name being
-- written to commit or roll back, and keeps new ones from being taken
-- until it ends (src/pg/leases.cpp).  In a read-only transaction or on a
-- standby it deletes nothing: the DELETE of the policy that follows says
-- why it cannot.
CREATE FUNCTION ratelimit.drop_leases(name text) RETURNS void
AS 'MODULE_PATHNAME', 'rate_limit_drop_leases'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION ratelimit.drop_leases(text) IS
    'deletes the leases of concurrency limit name, which rate_limit_drop drops';
REVOKE ALL ON FUNCTION ratelimit.drop_leases(text) FROM PUBLIC;
--upgrade: REVOKE ALL ON FUNCTION ratelimit.drop_leases(text) FROM PUBLIC;

\ir src/lease_type.sql

CREATE FUNCTION @extschema@.rate_limit_lease(name text, key text, cost float8 DEFAULT 1)
RETURNS @extschema@.rate_limit_lease
AS 'MODULE_PATHNAME', 'rate_limit_lease'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.rate_limit_lease(text, text, float8) IS
    'takes cost places of key of concurrency limit name (defined with a lease) as one lease, given back by a rollback, else held until it expires or rate_limit_release(lease); the decision, the lease''s id (NULL if denied) and when it expires';

CREATE FUNCTION @extschema@.rate_limit_release(lease uuid)
RETURNS boolean
AS 'MODULE_PATHNAME', 'rate_limit_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.rate_limit_release(uuid) IS
    'gives the places of a lease back now, in the caller''s transaction; false if it is not in force (unknown, expired, released, or NULL)';

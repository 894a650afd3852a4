-- router/ratelimit_router.sql
--
-- The rate limiter over several PostgreSQL servers: run with psql on the
-- router database, into a schema of your choice (the first of search_path).
-- Each partition runs the ratelimit extension itself (or the portable
-- limiter); the router holds no state.  Every call of one bucket goes, by
-- PL/Proxy, to the partition that owns (name, key): rate_limit_route_hash()
-- & (partitions - 1), over the PL/Proxy cluster "ratelimit" (a foreign
-- server of the plproxy wrapper, with options p0, p1, ... naming the
-- partitions' connection strings; their number is a power of two).
--
--   CREATE EXTENSION plproxy;                         -- as a superuser
--   CREATE SERVER ratelimit FOREIGN DATA WRAPPER plproxy
--       OPTIONS (p0 'host=db1 dbname=app', p1 'host=db2 dbname=app', ...);
--   CREATE USER MAPPING FOR PUBLIC SERVER ratelimit;
--   GRANT USAGE ON FOREIGN SERVER ratelimit TO app;
--   psql -v ON_ERROR_STOP=1 -c 'SET search_path = limits' -f router/ratelimit_router.sql
--
-- A routed call runs and commits on its partition in a transaction of its
-- own: the caller's ROLLBACK on the router does not give its tokens back.
-- It reaches the partition as the calling role (current_user), through that
-- role's user mapping, so that the partition's grants decide: no function
-- here runs as its owner, and the partitions' connection strings must not
-- name a user (PL/Proxy would then connect every caller as that user).
-- rate_limit_take_all is routed only when all its buckets are on one
-- partition.  Policies of every kind (rate_limit_define,
-- rate_limit_define_sliding_window, rate_limit_define_concurrency) are
-- defined on every partition by one call here.

\set ON_ERROR_STOP 1
SELECT pg_catalog.current_schema() AS rl_schema \gset
\if :{?rl_schema}
\else
\echo 'router/ratelimit_router.sql: no schema to install into: set search_path first'
\quit
\endif

BEGIN;
-- PL/Proxy ignores the user mappings for a partition whose connection
-- string names a user: every caller would reach it as that user.
DO $$
DECLARE
    named text;
BEGIN
    SELECT pg_catalog.string_agg(pg_catalog.split_part(o.option, '=', 1), ', ' ORDER BY o.n)
      INTO named
      FROM pg_catalog.pg_foreign_server AS s,
           pg_catalog.unnest(s.srvoptions) WITH ORDINALITY AS o(option, n)
     WHERE s.srvname OPERATOR(pg_catalog.=) 'ratelimit'
       AND o.option OPERATOR(pg_catalog.~) '^p[0-9]+='
       AND pg_catalog.strpos(o.option, 'user=') OPERATOR(pg_catalog.>) 0;
    IF named IS NOT NULL THEN
        RAISE EXCEPTION 'a connection string of server ratelimit names a user'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('The connection strings of %s name a user: PL/Proxy would connect every caller to such a partition as that user, ignoring the user mappings, and the partition could not check the caller''s grants.', named),
                  HINT = 'Remove user= from the partitions'' connection strings (ALTER SERVER ratelimit OPTIONS (SET p0 ''host=...'')) and name users and passwords in user mappings.';
    END IF;
END
$$;

\ir route_hash.sql

-- The objects shared with the native extension and the portable limiter
-- are made from their sources (../sql/src/, see its README).
\ir ../sql/src/limits.sql
\ir ../sql/src/decision_types.sql

-- A policy as rate_limit_define stores it on each partition: the row type of
-- the policy table, made here as a table and copied column for column.
\set rl_policies :"rl_schema" .rl_policies
\ir ../sql/src/policies_table.sql
SELECT pg_catalog.format('CREATE TYPE %I.rate_limit_policy AS (%s)', :'rl_schema',
                         pg_catalog.string_agg(pg_catalog.format('%I %s', a.attname,
                                                                 pg_catalog.format_type(a.atttypid, a.atttypmod)),
                                               ', ' ORDER BY a.attnum))
  FROM pg_catalog.pg_attribute AS a
 WHERE a.attrelid OPERATOR(pg_catalog.=) :'rl_policies'::pg_catalog.regclass
   AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped \gexec
DROP TABLE :rl_policies;
COMMENT ON TYPE rate_limit_policy IS 'a stored policy, one row per partition';

-- Calls of one bucket: to the partition that owns it.
CREATE FUNCTION rate_limit_take(name text, key text, cost float8 DEFAULT 1)
RETURNS rate_limit_decision LANGUAGE plproxy
AS $$ CLUSTER 'ratelimit'; RUN ON rate_limit_route_hash(name, key); $$;
CREATE FUNCTION rate_limit_take(name text, key text, cost float8, max_wait interval)
RETURNS rate_limit_decision LANGUAGE plproxy
AS $$ CLUSTER 'ratelimit'; RUN ON rate_limit_route_hash(name, key); $$;
CREATE FUNCTION rate_limit_check(name text, key text, cost float8 DEFAULT 1)
RETURNS rate_limit_decision LANGUAGE plproxy
AS $$ CLUSTER 'ratelimit'; RUN ON rate_limit_route_hash(name, key); $$;
CREATE FUNCTION rate_limit_check(name text, key text, cost float8, max_wait interval)
RETURNS rate_limit_decision LANGUAGE plproxy
AS $$ CLUSTER 'ratelimit'; RUN ON rate_limit_route_hash(name, key); $$;
CREATE FUNCTION rate_limit_take(name text, key text, cost float8, rate float8, burst float8,
                                reserve boolean DEFAULT false, max_reserved float8 DEFAULT NULL)
RETURNS rate_limit_decision LANGUAGE plproxy
AS $$ CLUSTER 'ratelimit'; RUN ON rate_limit_route_hash(name, key); $$;
CREATE FUNCTION rate_limit_check(name text, key text, cost float8, rate float8, burst float8,
                                 reserve boolean DEFAULT false, max_reserved float8 DEFAULT NULL)
RETURNS rate_limit_decision LANGUAGE plproxy
AS $$ CLUSTER 'ratelimit'; RUN ON rate_limit_route_hash(name, key); $$;
CREATE FUNCTION rate_limit_take_explicit(name text, key text, cost float8, rate float8, per interval,
                                         burst float8 DEFAULT NULL, max_wait interval DEFAULT NULL,
                                         max_reserved float8 DEFAULT NULL)
RETURNS rate_limit_decision LANGUAGE plproxy
AS $$ CLUSTER 'ratelimit'; RUN ON rate_limit_route_hash(name, key); $$;
CREATE FUNCTION rate_limit_check_explicit(name text, key text, cost float8, rate float8, per interval,
                                          burst float8 DEFAULT NULL, max_wait interval DEFAULT NULL,
                                          max_reserved float8 DEFAULT NULL)
RETURNS rate_limit_decision LANGUAGE plproxy
AS $$ CLUSTER 'ratelimit'; RUN ON rate_limit_route_hash(name, key); $$;
CREATE FUNCTION rate_limit_refund(name text, key text, amount float8)
RETURNS rate_limit_decision LANGUAGE plproxy
AS $$ CLUSTER 'ratelimit'; RUN ON rate_limit_route_hash(name, key); $$;
CREATE FUNCTION rate_limit_refund(name text, key text, amount float8, rate float8, burst float8)
RETURNS rate_limit_decision LANGUAGE plproxy
AS $$ CLUSTER 'ratelimit'; RUN ON rate_limit_route_hash(name, key); $$;
CREATE FUNCTION rate_limit_refund_explicit(name text, key text, amount float8, rate float8,
                                           per interval, burst float8 DEFAULT NULL)
RETURNS rate_limit_decision LANGUAGE plproxy
AS $$ CLUSTER 'ratelimit'; RUN ON rate_limit_route_hash(name, key); $$;
CREATE FUNCTION rate_limit_reset(name text, key text)
RETURNS boolean LANGUAGE plproxy
AS $$ CLUSTER 'ratelimit'; RUN ON rate_limit_route_hash(name, key); $$;

COMMENT ON FUNCTION rate_limit_take(text, text, float8) IS
    'rate_limit_take(name, key, cost) on the partition that holds bucket (name, key); commits there';
COMMENT ON FUNCTION rate_limit_take(text, text, float8, interval) IS
    'rate_limit_take(name, key, cost, max_wait) on the partition that holds bucket (name, key); commits there';
COMMENT ON FUNCTION rate_limit_check(text, text, float8) IS
    'rate_limit_check(name, key, cost) on the partition that holds bucket (name, key)';
COMMENT ON FUNCTION rate_limit_check(text, text, float8, interval) IS
    'rate_limit_check(name, key, cost, max_wait) on the partition that holds bucket (name, key)';
COMMENT ON FUNCTION rate_limit_take(text, text, float8, float8, float8, boolean, float8) IS
    'rate_limit_take with explicit rate and burst on the partition that holds bucket (name, key); commits there';
COMMENT ON FUNCTION rate_limit_check(text, text, float8, float8, float8, boolean, float8) IS
    'rate_limit_check with explicit rate and burst on the partition that holds bucket (name, key)';
COMMENT ON FUNCTION rate_limit_take_explicit(text, text, float8, float8, interval, float8, interval, float8) IS
    'rate_limit_take_explicit on the partition that holds bucket (name, key); commits there';
COMMENT ON FUNCTION rate_limit_check_explicit(text, text, float8, float8, interval, float8, interval, float8) IS
    'rate_limit_check_explicit on the partition that holds bucket (name, key)';
COMMENT ON FUNCTION rate_limit_refund(text, text, float8) IS
    'rate_limit_refund(name, key, amount) on the partition that holds bucket (name, key); commits there';
COMMENT ON FUNCTION rate_limit_refund(text, text, float8, float8, float8) IS
    'rate_limit_refund with explicit rate and burst on the partition that holds bucket (name, key); commits there';
COMMENT ON FUNCTION rate_limit_refund_explicit(text, text, float8, float8, interval, float8) IS
    'rate_limit_refund_explicit on the partition that holds bucket (name, key); commits there';
COMMENT ON FUNCTION rate_limit_reset(text, text) IS
    'rate_limit_reset(name, key) on the partition that holds bucket (name, key); commits there';

-- As on each partition: refunds and resets hand tokens out.  (The
-- partitions check their own grants too: a routed call connects as the
-- role the caller's user mapping names, the caller by default.)
REVOKE ALL ON FUNCTION rate_limit_reset(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION rate_limit_refund(text, text, float8) FROM PUBLIC;
REVOKE ALL ON FUNCTION rate_limit_refund(text, text, float8, float8, float8) FROM PUBLIC;
REVOKE ALL ON FUNCTION rate_limit_refund_explicit(text, text, float8, float8, interval, float8) FROM PUBLIC;

-- Policies: defined, dropped and listed on every partition, one row each.
\ir ../sql/src/define_params.sql
CREATE FUNCTION rate_limit_define(:rl_define_params)
RETURNS SETOF rate_limit_policy LANGUAGE plproxy
AS $$ CLUSTER 'ratelimit'; RUN ON ALL; $$;
COMMENT ON FUNCTION rate_limit_define(:rl_define_types) IS
    'rate_limit_define on every partition, each in a transaction of its own; one stored policy per partition';
REVOKE ALL ON FUNCTION rate_limit_define(:rl_define_types) FROM PUBLIC;
CREATE FUNCTION rate_limit_define_sliding_window(:rl_define_sliding_params)
RETURNS SETOF rate_limit_policy LANGUAGE plproxy
AS $$ CLUSTER 'ratelimit'; RUN ON ALL; $$;
COMMENT ON FUNCTION rate_limit_define_sliding_window(:rl_define_sliding_types) IS
    'rate_limit_define_sliding_window on every partition, each in a transaction of its own; one stored policy per partition';
REVOKE ALL ON FUNCTION rate_limit_define_sliding_window(:rl_define_sliding_types) FROM PUBLIC;
CREATE FUNCTION rate_limit_define_concurrency(:rl_define_concurrency_params)
RETURNS SETOF rate_limit_policy LANGUAGE plproxy
AS $$ CLUSTER 'ratelimit'; RUN ON ALL; $$;
COMMENT ON FUNCTION rate_limit_define_concurrency(:rl_define_concurrency_types) IS
    'rate_limit_define_concurrency on every partition, each in a transaction of its own; one stored policy per partition';
REVOKE ALL ON FUNCTION rate_limit_define_concurrency(:rl_define_concurrency_types) FROM PUBLIC;

CREATE FUNCTION rate_limit_drop(name text)
RETURNS SETOF boolean LANGUAGE plproxy
AS $$ CLUSTER 'ratelimit'; RUN ON ALL; $$;
COMMENT ON FUNCTION rate_limit_drop(text) IS
    'rate_limit_drop on every partition; one answer per partition';
REVOKE ALL ON FUNCTION rate_limit_drop(text) FROM PUBLIC;

-- The partitions of cluster "ratelimit": how many (p0, p1, ... options).
CREATE FUNCTION rl_partitions() RETURNS integer
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT pg_catalog.count(*)::integer
        FROM pg_catalog.pg_foreign_server AS s, pg_catalog.unnest(s.srvoptions) AS o(option)
       WHERE s.srvname OPERATOR(pg_catalog.=) 'ratelimit'
         AND o.option OPERATOR(pg_catalog.~) '^p[0-9]+=' $$;
COMMENT ON FUNCTION rl_partitions() IS
    'the number of partitions of PL/Proxy cluster ratelimit (options p0, p1, ...)';

-- Where rate_limit_take_all goes: the route hash of its first bucket, when
-- one partition holds every bucket of the call; refused before anything is
-- taken when they are on several, as a routed call could not take from all
-- of them or none.  A call the partition refuses whatever its buckets (NULL
-- or empty arrays, different lengths, a NULL element) goes to partition 0,
-- whose rate_limit_take_all says what is wrong.  Runs on the router as the
-- caller, who reaches the partition through its own user mapping.
CREATE FUNCTION rl_take_all_route(names text[], keys text[]) RETURNS integer
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = :"rl_schema", pg_temp
AS $$
DECLARE
    mask integer;
    first_hash integer;
    hash integer;
    name_at integer;
    key_at integer;
BEGIN
    IF pg_catalog.array_ndims(names) IS DISTINCT FROM 1
       OR pg_catalog.array_ndims(keys) IS DISTINCT FROM 1 THEN
        RETURN 0;
    END IF;
    IF pg_catalog.cardinality(names) OPERATOR(pg_catalog.<>) pg_catalog.cardinality(keys)
       OR pg_catalog.array_position(names, NULL) IS NOT NULL
       OR pg_catalog.array_position(keys, NULL) IS NOT NULL THEN
        RETURN 0;
    END IF;
    mask := rl_partitions() OPERATOR(pg_catalog.-) 1;
    name_at := pg_catalog.array_lower(names, 1);
    key_at := pg_catalog.array_lower(keys, 1);
    first_hash := rate_limit_route_hash(names[name_at], keys[key_at]);
    FOR i IN 1..pg_catalog.cardinality(names) OPERATOR(pg_catalog.-) 1 LOOP
        hash := rate_limit_route_hash(names[name_at OPERATOR(pg_catalog.+) i],
                                      keys[key_at OPERATOR(pg_catalog.+) i]);
        IF (hash OPERATOR(pg_catalog.&) mask)
           OPERATOR(pg_catalog.<>) (first_hash OPERATOR(pg_catalog.&) mask) THEN
            RAISE EXCEPTION 'the limits of rate_limit_take_all are on different partitions'
                USING ERRCODE = 'feature_not_supported',
                      DETAIL = pg_catalog.format('Limit 1 (%s, %s) is on partition %s and limit %s (%s, %s) on partition %s; a routed call takes from one partition only, so it could not take from all of them or none.',
                                                 names[name_at], keys[key_at],
                                                 first_hash OPERATOR(pg_catalog.&) mask,
                                                 i OPERATOR(pg_catalog.+) 1,
                                                 names[name_at OPERATOR(pg_catalog.+) i],
                                                 keys[key_at OPERATOR(pg_catalog.+) i],
                                                 hash OPERATOR(pg_catalog.&) mask),
                      HINT = 'Take the limits one by one, or give limits that must be taken together keys that rate_limit_route_hash() puts on one partition.';
        END IF;
    END LOOP;
    RETURN first_hash;
END
$$;
COMMENT ON FUNCTION rl_take_all_route(text[], text[]) IS
    'the route hash of a rate_limit_take_all call: that of its first bucket; 0A000 when its buckets are on different partitions';

-- All or nothing over several limits, when one partition holds them all.
CREATE FUNCTION rate_limit_take_all(names text[], keys text[], costs float8[] DEFAULT NULL,
                                    max_wait interval DEFAULT NULL)
RETURNS rate_limit_all_decision LANGUAGE plproxy
AS $$ CLUSTER 'ratelimit'; RUN ON rl_take_all_route(names, keys); $$;
COMMENT ON FUNCTION rate_limit_take_all(text[], text[], float8[], interval) IS
    'rate_limit_take_all on the partition that holds every bucket of the call; refused (0A000) when they are on different partitions';

-- The buckets of a limit, from every partition.
\ir ../sql/src/buckets_columns.sql
CREATE FUNCTION rate_limit_buckets(:rl_buckets_params)
RETURNS SETOF record LANGUAGE plproxy
AS $$ CLUSTER 'ratelimit'; RUN ON ALL; $$;
COMMENT ON FUNCTION rate_limit_buckets(text) IS
    'rate_limit_buckets on every partition: the buckets of limit name';
REVOKE ALL ON FUNCTION rate_limit_buckets(text) FROM PUBLIC;

-- Routines that name this schema's objects @extschema@.name, until
-- qualify.sql puts its name in their place, are created unchecked.
SET LOCAL check_function_bodies = off;

-- Leases of concurrency limits defined on the partitions: a lease is
-- taken on the partition that owns (name, key) and committed there with the
-- call, so that it lives on after it until it expires or is released (the
-- caller's ROLLBACK does not give it back); a release, knowing only the
-- lease's id, is tried on every partition, and is true where one held it.
\ir ../sql/src/lease_type.sql
CREATE FUNCTION rate_limit_lease(name text, key text, cost float8 DEFAULT 1)
RETURNS rate_limit_lease LANGUAGE plproxy
AS $$ CLUSTER 'ratelimit'; RUN ON rate_limit_route_hash(name, key); $$;
COMMENT ON FUNCTION rate_limit_lease(text, text, float8) IS
    'rate_limit_lease on the partition of (name, key): takes cost places as one lease, committed there at once';
CREATE FUNCTION rl_release_everywhere(lease uuid)
RETURNS SETOF boolean LANGUAGE plproxy
AS $$ CLUSTER 'ratelimit'; RUN ON ALL; TARGET rate_limit_release; $$;
COMMENT ON FUNCTION rl_release_everywhere(uuid) IS
    'rate_limit_release of lease on every partition';
CREATE FUNCTION rate_limit_release(lease uuid)
RETURNS boolean LANGUAGE sql
AS $$ SELECT coalesce(pg_catalog.bool_or(r), false) FROM @extschema@.rl_release_everywhere(lease) AS r $$;
COMMENT ON FUNCTION rate_limit_release(uuid) IS
    'rate_limit_release on every partition: true if one of them held the lease in force';

-- The header values need nothing but a decision: computed here, by the
-- functions of the native extension and the portable limiter (the form
-- that reads a stored policy is not routed).
\ir ../sql/src/headers.sql
\ir ../sql/src/lease_headers.sql
\ir ../portable/qualify.sql

COMMIT;

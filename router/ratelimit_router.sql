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
-- rate_limit_take_all is routed only when all its buckets are on one
-- partition.  Policies are defined on every partition by one call here.

\set ON_ERROR_STOP 1
SELECT pg_catalog.current_schema() AS rl_schema \gset
\if :{?rl_schema}
\else
\echo 'router/ratelimit_router.sql: no schema to install into: set search_path first'
\quit
\endif

BEGIN;
\ir route_hash.sql

\ir ../portable/decision_types.sql

-- A policy as rate_limit_define stores it on each partition.
CREATE TYPE rate_limit_policy AS (
    name              text,
    rate              float8,
    per               interval,
    burst             float8,
    tokens_per_second float8,
    initial           float8,
    jitter            float8,
    fixed_window      boolean,
    window_start      interval,
    window_us         bigint,
    window_start_us   bigint,
    floor_rate        float8,
    floor_per_second  float8,
    shards            integer,
    max_reserved      float8,
    penalty           interval,
    penalty_us        bigint,
    storage           text);
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
-- partitions check their own grants too: the router connects as the role
-- the user mapping names.)
REVOKE ALL ON FUNCTION rate_limit_reset(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION rate_limit_refund(text, text, float8) FROM PUBLIC;
REVOKE ALL ON FUNCTION rate_limit_refund(text, text, float8, float8, float8) FROM PUBLIC;
REVOKE ALL ON FUNCTION rate_limit_refund_explicit(text, text, float8, float8, interval, float8) FROM PUBLIC;

-- Policies: defined, dropped and listed on every partition, one row each.
CREATE FUNCTION rate_limit_define(
    name    text,
    rate    float8,
    per     interval DEFAULT '1 second',
    burst   float8   DEFAULT NULL,
    initial float8   DEFAULT NULL,
    jitter  float8   DEFAULT '0',
    fixed_window boolean DEFAULT false,
    window_start interval DEFAULT NULL,
    floor_rate   float8   DEFAULT '0',
    shards       integer  DEFAULT 1,
    max_reserved float8   DEFAULT '0',
    penalty      interval DEFAULT NULL,
    storage      text     DEFAULT 'table')
RETURNS SETOF rate_limit_policy LANGUAGE plproxy
AS $$ CLUSTER 'ratelimit'; RUN ON ALL; $$;
COMMENT ON FUNCTION rate_limit_define(text, float8, interval, float8, float8, float8, boolean, interval, float8, integer, float8, interval, text) IS
    'rate_limit_define on every partition, each in a transaction of its own; one stored policy per partition';
REVOKE ALL ON FUNCTION rate_limit_define(text, float8, interval, float8, float8, float8, boolean, interval, float8, integer, float8, interval, text) FROM PUBLIC;

CREATE FUNCTION rate_limit_drop(name text)
RETURNS SETOF boolean LANGUAGE plproxy
AS $$ CLUSTER 'ratelimit'; RUN ON ALL; $$;
COMMENT ON FUNCTION rate_limit_drop(text) IS
    'rate_limit_drop on every partition; one answer per partition';
REVOKE ALL ON FUNCTION rate_limit_drop(text) FROM PUBLIC;

-- The partitions of cluster "ratelimit": how many (p0, p1, ... options).
CREATE FUNCTION rl_partitions() RETURNS integer
LANGUAGE sql STABLE
AS $$ SELECT pg_catalog.count(*)::integer
        FROM pg_catalog.pg_foreign_server AS s, pg_catalog.unnest(s.srvoptions) AS o(option)
       WHERE s.srvname OPERATOR(pg_catalog.=) 'ratelimit'
         AND o.option OPERATOR(pg_catalog.~) '^p[0-9]+=' $$;

-- rate_limit_take_all on partition `partition` (0 .. partitions - 1).
CREATE FUNCTION rl_take_all_on(part_no integer, names text[], keys text[], costs float8[],
                               max_wait interval)
RETURNS rate_limit_all_decision LANGUAGE plproxy
AS $$ CLUSTER 'ratelimit'; RUN ON part_no;
      SELECT * FROM rate_limit_take_all(names, keys, costs, max_wait); $$;
REVOKE ALL ON FUNCTION rl_take_all_on(integer, text[], text[], float8[], interval) FROM PUBLIC;

-- All or nothing over several limits, when one partition holds them all: a
-- call whose buckets are on several partitions could not take from all or
-- none, so it is refused before anything is taken.
CREATE FUNCTION rate_limit_take_all(names text[], keys text[], costs float8[] DEFAULT NULL,
                                    max_wait interval DEFAULT NULL)
RETURNS rate_limit_all_decision
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = :"rl_schema", pg_temp
AS $$
DECLARE
    partitions integer := rl_partitions();
    first_partition integer;
    partition integer;
BEGIN
    IF names IS NULL OR keys IS NULL OR pg_catalog.cardinality(names) = 0
       OR pg_catalog.cardinality(names) <> pg_catalog.cardinality(keys) THEN
        -- The partition's rate_limit_take_all says what is wrong.
        RETURN rl_take_all_on(0, names, keys, costs, max_wait);
    END IF;
    FOR i IN 1..pg_catalog.cardinality(names) LOOP
        partition := rate_limit_route_hash(names[pg_catalog.array_lower(names, 1) + i - 1],
                                           keys[pg_catalog.array_lower(keys, 1) + i - 1])
                     & (partitions - 1);
        IF first_partition IS NULL THEN
            first_partition := partition;
        ELSIF partition IS DISTINCT FROM first_partition THEN
            RAISE EXCEPTION 'the limits of rate_limit_take_all are on different partitions'
                USING ERRCODE = 'feature_not_supported',
                      DETAIL = pg_catalog.format('Limit 1 (%s, %s) is on partition %s and limit %s (%s, %s) on partition %s; a routed call takes from one partition only, so it could not take from all of them or none.',
                                                 names[pg_catalog.array_lower(names, 1)], keys[pg_catalog.array_lower(keys, 1)],
                                                 first_partition, i,
                                                 names[pg_catalog.array_lower(names, 1) + i - 1],
                                                 keys[pg_catalog.array_lower(keys, 1) + i - 1], partition),
                      HINT = 'Take the limits one by one, or give limits that must be taken together keys that rate_limit_route_hash() puts on one partition.';
        END IF;
    END LOOP;
    RETURN rl_take_all_on(first_partition, names, keys, costs, max_wait);
END
$$;
COMMENT ON FUNCTION rate_limit_take_all(text[], text[], float8[], interval) IS
    'rate_limit_take_all on the partition that holds every bucket of the call; refused (0A000) when they are on different partitions';

-- The buckets of a limit, from every partition.
CREATE FUNCTION rate_limit_buckets(
    name            text,
    OUT key         text,
    OUT shard       integer,
    OUT balance     float8,
    OUT full_at     timestamptz,
    OUT tokens      float8,
    OUT last_refill timestamptz,
    OUT blocked_until timestamptz)
RETURNS SETOF record LANGUAGE plproxy
AS $$ CLUSTER 'ratelimit'; RUN ON ALL; $$;
COMMENT ON FUNCTION rate_limit_buckets(text) IS
    'rate_limit_buckets on every partition: the buckets of limit name';
REVOKE ALL ON FUNCTION rate_limit_buckets(text) FROM PUBLIC;

-- The header values need nothing but a decision: computed here, by the
-- portable limiter's functions (the form that reads a policy is not routed).
\ir ../portable/headers.sql
DROP FUNCTION rate_limit_headers(rate_limit_decision, text, float8);

COMMIT;

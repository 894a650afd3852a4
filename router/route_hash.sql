-- router/route_hash.sql
--
-- Which partition a bucket lives on: the first 32 bits of the MD5 of the
-- limit name's length, a colon, the name and the key, as a signed integer.
-- PL/Proxy sends a call to partition hash & (partitions - 1).  Defined here
-- rather than taken from hashtext(), whose values are PostgreSQL's own and
-- may change between major versions; md5() does not.  Included by
-- ratelimit_router.sql; run it alone on a partition to find the buckets of
-- one logical partition when moving it (README, "More than one server").
CREATE FUNCTION rate_limit_route_hash(name text, key text) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT ('x' OPERATOR(pg_catalog.||)
              pg_catalog.substr(pg_catalog.md5(pg_catalog.length(name)::text
                                               OPERATOR(pg_catalog.||) ':'
                                               OPERATOR(pg_catalog.||) name
                                               OPERATOR(pg_catalog.||) key), 1, 8))::bit(32)::integer $$;
COMMENT ON FUNCTION rate_limit_route_hash(text, text) IS
    'the 32-bit hash that routes bucket (name, key) to partition hash & (partitions - 1)';

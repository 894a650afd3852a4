-- sql/memory_stats.sql: the memory engine's places per database and
-- policy.  Included by ratelimit.sql and by the upgrade to 0.4.0 (whose
-- template repeats its privileges on "--upgrade:" lines: an upgrade script
-- made by scripts/sql-script leaves GRANT and REVOKE out).
--
-- The engine is shared by every database of the server, so the view shows
-- every database's policies; readable by pg_read_all_stats.  Shared
-- memory: before PostgreSQL 17 only with ratelimit in
-- shared_preload_libraries, otherwise reading it says so.
CREATE FUNCTION @extschema@.rate_limit_memory_stats(
    OUT datid     oid,
    OUT datname   name,
    OUT name      text,
    OUT buckets   bigint,
    OUT evictions bigint,
    OUT overflows bigint,
    OUT in_table  boolean)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'rate_limit_memory_stats'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rate_limit_memory_stats() IS
    'per database and memory policy: the memory engine''s places its buckets hold, its full buckets evicted for others and its keys stored in the table for want of room since the server started, and whether its keys may be in the table';

CREATE VIEW @extschema@.rate_limit_memory_stats AS
SELECT m.datid, m.datname, m.name, m.buckets, m.evictions, m.overflows, m.in_table
  FROM @extschema@.rate_limit_memory_stats() AS m;
COMMENT ON VIEW @extschema@.rate_limit_memory_stats IS
    'per database and memory policy, the memory engine''s places, evictions and overflows into the table';

REVOKE ALL ON FUNCTION @extschema@.rate_limit_memory_stats() FROM PUBLIC;
REVOKE ALL ON @extschema@.rate_limit_memory_stats FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.rate_limit_memory_stats() TO pg_read_all_stats;
GRANT SELECT ON @extschema@.rate_limit_memory_stats TO pg_read_all_stats;

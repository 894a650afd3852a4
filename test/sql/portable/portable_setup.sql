--
-- The shared regression suite against the portable limiter (the extension
-- ratelimit_portable): run first, by "make installcheck-portable" only.
-- The suite sets the native clock (ratelimit.fixed_clock) and reads the
-- native state tables (ratelimit.buckets, ratelimit.policies); here the
-- portable clock reads the same setting, and views of the same names and
-- columns show (and write through to) the portable tables.
--
-- The extension refuses a schema where every role may create objects, as
-- public is before PostgreSQL 15 (test/cluster/portable_install.sh).
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
CREATE EXTENSION ratelimit_portable;
SELECT e.extversion, r.rolsuper AS owned_by_superuser
  FROM pg_extension e JOIN pg_roles r ON r.oid = e.extowner WHERE e.extname = 'ratelimit_portable';

CREATE OR REPLACE FUNCTION rl_now() RETURNS bigint
LANGUAGE sql VOLATILE
AS $$ SELECT CASE WHEN coalesce(nullif(pg_catalog.current_setting('ratelimit.fixed_clock', true), ''), '0')::float8 > 0
                  THEN pg_catalog.floor((pg_catalog.current_setting('ratelimit.fixed_clock')::float8 - 946684800)
                                        * 1000000 + 0.5)::bigint
                  ELSE (SELECT pg_catalog.floor(pg_catalog.date_part('epoch', c.t) / 60)::bigint * 60000000
                               + pg_catalog.date_part('microseconds', c.t AT TIME ZONE 'UTC')::bigint - 946684800000000
                          FROM (SELECT pg_catalog.clock_timestamp() AS t) AS c) END $$;

CREATE SCHEMA ratelimit;
CREATE VIEW ratelimit.buckets AS
SELECT b.name, b.key, b.tokens, rl_timestamp(b.stamp_us) AS last_refill,
       rl_timestamp(b.full_at_us) AS full_at, rl_timestamp(b.blocked_until_us) AS blocked_until
  FROM rl_buckets AS b;
CREATE FUNCTION ratelimit.buckets_write() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        DELETE FROM rl_buckets AS b WHERE b.name = OLD.name AND b.key = OLD.key;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO rl_buckets
        VALUES (NEW.name, NEW.key, NEW.tokens,
                (extract(epoch FROM NEW.last_refill)::numeric * 1000000)::bigint - 946684800000000,
                CASE WHEN NEW.full_at = 'infinity' THEN 9223372036854775807
                     ELSE (extract(epoch FROM NEW.full_at)::numeric * 1000000)::bigint - 946684800000000 END,
                CASE WHEN NEW.blocked_until IS NULL OR NEW.blocked_until = '-infinity' THEN -9223372036854775808
                     ELSE (extract(epoch FROM NEW.blocked_until)::numeric * 1000000)::bigint - 946684800000000 END);
        RETURN NEW;
    END IF;
    RETURN OLD;
END
$$;
CREATE TRIGGER buckets_write INSTEAD OF INSERT OR UPDATE OR DELETE ON ratelimit.buckets
    FOR EACH ROW EXECUTE FUNCTION ratelimit.buckets_write();
CREATE VIEW ratelimit.policies AS SELECT * FROM rl_policies;

-- Policies are configuration: pg_dump keeps them (buckets are state: not).
SELECT unnest(extconfig)::regclass AS dumped FROM pg_extension WHERE extname = 'ratelimit_portable';

-- The take counters, and the memory engine's, live in the C module's
-- shared memory: the portable limiter has none of them (README, "what
-- differs").
SELECT count(*) AS stats_objects FROM pg_proc
 WHERE proname IN ('rate_limit_stats', 'rate_limit_stats_info', 'rate_limit_stats_reset',
                   'rate_limit_memory_stats');

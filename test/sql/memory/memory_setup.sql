--
-- The contract against the memory engine ("make installcheck-memory", on a
-- server that can run it: before PostgreSQL 17, one that preloads the
-- library; test/cluster/memory.sh): run first.  Every policy the memory
-- engine can hold is stored with storage 'memory', however it is written,
-- as if rate_limit_define had been given storage => 'memory': a trigger on
-- the policy table makes it so.  A policy with shards stays in the table,
-- as the memory engine cannot split a key; the buckets of calls with
-- explicit parameters are the table's whatever the engine.
--
-- The names of those policies are kept in memory_run.names, which outlives
-- the extension: the engine keeps buckets across its reinstall
-- (memory_reinstall.sql), and only a name reaches them.
CREATE SCHEMA IF NOT EXISTS memory_run;
CREATE TABLE IF NOT EXISTS memory_run.names (name text PRIMARY KEY);
CREATE OR REPLACE FUNCTION memory_run.to_memory() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.shards = 1 THEN
        NEW.storage := 'memory';
        INSERT INTO memory_run.names VALUES (NEW.name) ON CONFLICT DO NOTHING;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER to_memory BEFORE INSERT OR UPDATE ON ratelimit.policies
    FOR EACH ROW EXECUTE FUNCTION memory_run.to_memory();
SET ratelimit.fixed_clock = 1000;
SELECT name, storage FROM rate_limit_define('memory-setup', 1);
SELECT name, storage FROM rate_limit_define('memory-setup-sharded', 1, shards => 2);
SELECT allowed, remaining FROM rate_limit_take('memory-setup', 'k');
SELECT key, balance FROM rate_limit_buckets('memory-setup');
SELECT count(*) AS table_buckets FROM ratelimit.buckets WHERE name = 'memory-setup';
CALL rate_limit_reset_limit('memory-setup');
SELECT rate_limit_drop('memory-setup'), rate_limit_drop('memory-setup-sharded');
RESET ratelimit.fixed_clock;

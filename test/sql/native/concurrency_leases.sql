--
-- Concurrency limits held as leases (table engine): a lease is a row of
-- ratelimit.leases written in the caller's transaction, in force until its
-- expires_at (the limiter's clock) or its release.  Other transactions'
-- leases: test/specs/concurrency_leases.spec.
--
\i test/sql/include/error_of.sql
\set SHOW_CONTEXT never
SET ratelimit.fixed_clock = 1000;
\i test/sql/include/concurrency_leases.sql

-- What the table holds: one row per lease, with its places and expiry;
-- purged once expired.
SELECT name FROM rate_limit_define_concurrency('lease-llm', 3, lease => '30 seconds');
SELECT allowed FROM rate_limit_lease('lease-llm', 'k', 2);
SELECT name, key, places, expires_at FROM ratelimit.leases WHERE name LIKE 'lease-llm%' ORDER BY expires_at;
SET ratelimit.fixed_clock = 1030;
CALL rate_limit_purge('other');
CALL rate_limit_purge('lease-llm');
SELECT count(*) FROM ratelimit.leases WHERE name LIKE 'lease-llm%';
-- Outside a transaction block a lease is taken (it outlives the statement):
-- no 25P01, unlike a place held until the transaction ends.
SELECT allowed FROM rate_limit_take('lease-llm', 'k');
SELECT allowed FROM rate_limit_take_all(ARRAY['lease-llm'], ARRAY['k']);
SELECT count(*) FROM ratelimit.leases WHERE name LIKE 'lease-llm%';
-- No privilege on the table: the functions are the interface.
SELECT has_table_privilege('public', 'ratelimit.leases', 'SELECT') AS public_reads;
-- The direct path would bypass a trigger or miss an index it does not
-- know: a table changed so is refused (55000), and works again once undone.
CREATE FUNCTION lease_watch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER watch BEFORE INSERT ON ratelimit.leases FOR EACH ROW EXECUTE FUNCTION lease_watch();
SELECT pg_temp.error_of($$SELECT rate_limit_lease('lease-llm', 'k')$$);
DROP TRIGGER watch ON ratelimit.leases;
DROP FUNCTION lease_watch();
CREATE INDEX leases_places ON ratelimit.leases (places);
SELECT pg_temp.error_of($$SELECT rate_limit_release('00000000-0000-4000-8000-000000000000')$$);
DROP INDEX ratelimit.leases_places;
SELECT allowed FROM rate_limit_lease('lease-llm', 'k');
SELECT rate_limit_drop('lease-llm');
RESET ratelimit.fixed_clock;

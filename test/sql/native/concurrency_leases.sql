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
SELECT name FROM rate_limit_define_concurrency('llm', 3, lease => '30 seconds');
SELECT allowed FROM rate_limit_lease('llm', 'k', 2);
SELECT name, key, places, expires_at FROM ratelimit.leases;
SET ratelimit.fixed_clock = 1030;
CALL rate_limit_purge('other');
CALL rate_limit_purge('llm');
SELECT count(*) FROM ratelimit.leases;
-- Outside a transaction block a lease is taken (it outlives the statement):
-- no 25P01, unlike a place held until the transaction ends.
SELECT allowed FROM rate_limit_take('llm', 'k');
SELECT allowed FROM rate_limit_take_all(ARRAY['llm'], ARRAY['k']);
SELECT count(*) FROM ratelimit.leases;
-- No privilege on the table: the functions are the interface.
SELECT has_table_privilege('public', 'ratelimit.leases', 'SELECT') AS public_reads;
SELECT rate_limit_drop('llm');
RESET ratelimit.fixed_clock;

--
-- Leases in the memory engine's run: every policy of
-- test/sql/include/concurrency_leases.sql is stored with storage 'memory'
-- (memory_setup's trigger), and every answer is the table engine's
-- (test/sql/native/concurrency_leases.sql) and the portable limiter's:
-- leases live in the table ratelimit.leases whichever the storage.
--
\i test/sql/include/error_of.sql
\set SHOW_CONTEXT never
SET ratelimit.fixed_clock = 1000;
\i test/sql/include/concurrency_leases.sql
-- A memory policy's leases are rows of the table all the same.
SELECT name, storage, lease FROM rate_limit_define_concurrency('lease-llm', 2, lease => '1 minute', storage => 'memory');
SELECT allowed, remaining FROM rate_limit_lease('lease-llm', 'k');
SELECT name, key, places FROM ratelimit.leases WHERE name = 'lease-llm' AND key = 'k';
SELECT rate_limit_drop(name) FROM rate_limit_policies ORDER BY name;
DELETE FROM ratelimit.leases WHERE name LIKE 'lease-llm%';
RESET ratelimit.fixed_clock;

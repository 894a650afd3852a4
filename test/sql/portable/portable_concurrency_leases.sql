--
-- Concurrency limits held as leases in the portable limiter: the native
-- table engine's answers, field by field and error by error
-- (test/sql/include/concurrency_leases.sql, which
-- test/sql/native/concurrency_leases.sql runs too).  Other transactions'
-- leases: test/specs/portable_concurrency_leases.spec; the same random
-- calls against both: test/sql/native/portable_leases.sql.
--
\i test/sql/include/error_of.sql
\set SHOW_CONTEXT never
SET ratelimit.fixed_clock = 1000;
\i test/sql/include/concurrency_leases.sql

-- What the tables hold: one row per lease; one per key, whose lock
-- serialises the key's takes; purged once expired and unused.
SELECT name FROM rate_limit_define_concurrency('lease-llm', 3, lease => '30 seconds');
SELECT allowed FROM rate_limit_lease('lease-llm', 'k', 2);
SELECT name, key, places, rl_timestamp(expires_us) AS expires_at FROM rl_leases WHERE name LIKE 'lease-llm%' ORDER BY expires_us, name;
SELECT name, key FROM rl_lease_keys WHERE name LIKE 'lease-llm%' ORDER BY key, name;
SET ratelimit.fixed_clock = 1030;
CALL rate_limit_purge('lease-llm');
SELECT count(*) AS leases FROM rl_leases WHERE name LIKE 'lease-llm%';
SELECT name, key FROM rl_lease_keys WHERE name LIKE 'lease-llm%' ORDER BY key, name;
SELECT rate_limit_drop('lease-llm');
RESET ratelimit.fixed_clock;

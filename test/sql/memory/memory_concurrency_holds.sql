--
-- Concurrency limits in the memory engine's run: every policy of
-- test/sql/include/concurrency_holds.sql is stored with storage 'memory'
-- (memory_setup's trigger), and every answer is the table engine's
-- (test/sql/native/concurrency_holds.sql) and the portable limiter's: the
-- places live in the lock table whichever the storage.
--
\i test/sql/include/error_of.sql
\set SHOW_CONTEXT never
SET ratelimit.fixed_clock = 1000;
\i test/sql/include/concurrency_holds.sql
SELECT name, storage FROM rate_limit_policies WHERE kind = 'concurrency' ORDER BY name;
SELECT rate_limit_drop(name) FROM rate_limit_policies ORDER BY name;
RESET ratelimit.fixed_clock;

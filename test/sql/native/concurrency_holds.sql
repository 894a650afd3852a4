--
-- Concurrency limits held until the transaction ends (table engine): a
-- take holds whole places of the key until its transaction (or the
-- savepoint before it) ends; remaining is the places free; a denial holds
-- nothing and cannot know when a place comes back (retry_after NULL).
-- Other transactions' holds: test/specs/concurrency_holds.spec.
--
\i test/sql/include/error_of.sql
\set SHOW_CONTEXT never
SET ratelimit.fixed_clock = 1000;
\i test/sql/include/concurrency_holds.sql

-- A take outside a transaction block would give its place back as it
-- answers: refused, alone or with other limits, taking nothing; a check
-- answers anywhere.  (Shown by psql: error_of's exception block is a
-- subtransaction, which the server counts as a transaction block.)
\set SHOW_CONTEXT never
SELECT rate_limit_take('exports', 'tenant:7');
SELECT rate_limit_take_all(ARRAY['exports'], ARRAY['tenant:7']);
SELECT name FROM rate_limit_define('exports-rate', 2, '1 minute');
SELECT rate_limit_take_all(ARRAY['exports-rate', 'exports'], ARRAY['t', 't']);
SELECT key, balance FROM rate_limit_buckets('exports-rate');
SELECT allowed, remaining FROM rate_limit_check('exports', 'tenant:7');

-- The table's constraint holds a concurrency limit to its shape.
SELECT pg_temp.error_of($$UPDATE ratelimit.policies SET rate = 1 WHERE name = 'exports'$$);
SELECT pg_temp.error_of($$UPDATE ratelimit.policies SET burst = 2.5 WHERE name = 'exports'$$);
SELECT name, kind FROM rate_limit_define('bk', 1);
SELECT pg_temp.error_of($$UPDATE ratelimit.policies SET lease = '1 minute' WHERE name = 'bk'$$);
SELECT rate_limit_drop('exports'), rate_limit_drop('exports-rate'), rate_limit_drop('llm'), rate_limit_drop('bk');
RESET ratelimit.fixed_clock;

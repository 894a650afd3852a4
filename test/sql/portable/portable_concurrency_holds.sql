--
-- Concurrency limits held until the transaction ends in the portable
-- limiter: the native table engine's answers, field by field and error by
-- error (test/sql/include/concurrency_holds.sql, which
-- test/sql/native/concurrency_holds.sql runs too), and where the two
-- differ.  Other transactions' holds: test/specs/portable_concurrency_holds.spec;
-- the same random calls against both: test/sql/native/portable_holds.sql.
--
\i test/sql/include/error_of.sql
\set SHOW_CONTEXT never
SET ratelimit.fixed_clock = 1000;
\i test/sql/include/concurrency_holds.sql

-- A place is an advisory lock of this database, in pg_locks while held: the
-- hash of name and key in the high 48 bits of its number, the place in the
-- low 16 (classid, objid and objsubid 1).
BEGIN;
SELECT allowed, remaining FROM rate_limit_take('exports', 'tenant:7', 2);
SELECT count(*) AS places, count(DISTINCT classid) AS keys,
       max(objid::bigint & 65535) - min(objid::bigint & 65535) < 3 AS numbered_below_max_held
  FROM pg_locks
 WHERE locktype = 'advisory' AND objsubid = 1 AND pid = pg_backend_pid()
   AND database = (SELECT oid FROM pg_database WHERE datname = current_database());
-- A lock this transaction holds is counted as held, not taken again.
SELECT allowed, remaining FROM rate_limit_take('exports', 'tenant:7');
SELECT allowed, remaining FROM rate_limit_take('exports', 'tenant:7');
COMMIT;

-- Where the portable limiter differs: SQL cannot tell a statement in a
-- transaction block from one that is its own transaction (README), so a
-- take outside a transaction block is not refused; its places are held
-- until the statement's transaction ends, which is as it answers.
SELECT allowed, remaining FROM rate_limit_take('exports', 'tenant:7', 2);
SELECT allowed, remaining FROM rate_limit_take_all(ARRAY['exports'], ARRAY['tenant:7'], ARRAY[3]);
SELECT allowed, remaining FROM rate_limit_check('exports', 'tenant:7', 3);
-- It has no memory engine.
SELECT pg_temp.error_of($$SELECT rate_limit_define_concurrency('c', 1, storage => 'memory')$$);
-- A policy table altered by hand to an impossible shape is refused by its
-- constraint, as the native one.
SELECT pg_temp.error_of($$UPDATE rl_policies SET rate = 1 WHERE name = 'exports'$$);
SELECT rate_limit_drop('exports'), rate_limit_drop('llm');
RESET ratelimit.fixed_clock;

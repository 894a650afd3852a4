--
-- Every signature of 0.1.0 and 0.2.0 gives the same answers with this
-- library on a database not yet updated (the state between installing a new
-- build and ALTER EXTENSION UPDATE) and after the update.  Each include runs
-- the same calls and leaves nothing behind, so its answers repeat.
--
SET ratelimit.fixed_clock = 1000;

-- A database at 0.1.0.
DROP EXTENSION ratelimit;
CREATE EXTENSION ratelimit VERSION '0.1.0';
\i test/sql/include/calls_0_1_0.sql
ALTER EXTENSION ratelimit UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'ratelimit';
\i test/sql/include/calls_0_1_0.sql

-- A database at 0.2.0.
DROP EXTENSION ratelimit;
CREATE EXTENSION ratelimit VERSION '0.2.0';
\i test/sql/include/calls_0_1_0.sql
\i test/sql/include/calls_0_2_0.sql
ALTER EXTENSION ratelimit UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'ratelimit';
\i test/sql/include/calls_0_1_0.sql
\i test/sql/include/calls_0_2_0.sql

-- A database at 0.3.0, which has no table of leases yet: a purge forgets
-- what it can, before the update and after it.
DROP EXTENSION ratelimit;
CREATE EXTENSION ratelimit VERSION '0.3.0';
SELECT name FROM rate_limit_define('old-purge', 10, '1 second');
SELECT allowed FROM rate_limit_take('old-purge', 'k');
SET ratelimit.fixed_clock = 1002;
CALL rate_limit_purge('old-purge');
SELECT allowed FROM rate_limit_take('old-purge', 'k');
ALTER EXTENSION ratelimit UPDATE;
SET ratelimit.fixed_clock = 1004;
CALL rate_limit_purge('old-purge');

RESET ratelimit.fixed_clock;
DROP EXTENSION ratelimit;
CREATE EXTENSION ratelimit;

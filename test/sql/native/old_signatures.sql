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

RESET ratelimit.fixed_clock;
DROP EXTENSION ratelimit;
CREATE EXTENSION ratelimit;

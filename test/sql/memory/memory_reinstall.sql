--
-- In the memory run, in place of hostile_schema (which installs the native
-- extension into hostile schemas, and leaves it reinstalled): the buckets
-- of every policy the run has stored in the memory engine forgotten (the
-- engine keeps them across a reinstall) and the extension reinstalled with
-- memory_setup's trigger, so that the tests after it start from the same
-- state, with no policies and no buckets.
--
DO $$
DECLARE
    policy text;
    reset bigint;
BEGIN
    FOR policy IN SELECT n.name FROM memory_run.names AS n LOOP
        CALL rate_limit_reset_limit(policy, reset);
    END LOOP;
END
$$;
DROP EXTENSION ratelimit;
CREATE EXTENSION ratelimit;
\set ECHO none
SET client_min_messages = warning;
\i test/sql/memory/memory_setup.sql
RESET client_min_messages;
\set ECHO all
SELECT count(*) AS policies FROM ratelimit.policies;
SELECT count(*) AS buckets FROM ratelimit.buckets;

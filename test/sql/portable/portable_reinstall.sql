--
-- In the portable run, in place of hostile_schema (which installs the
-- native extension into hostile schemas, and leaves it reinstalled): the
-- portable extension reinstalled, so that the tests after it start from
-- the same state, with no policies and no buckets.
--
DROP SCHEMA ratelimit CASCADE;
DROP EXTENSION ratelimit_portable;
\set ECHO none
\i test/sql/portable/portable_setup.sql
\set ECHO all
SELECT count(*) AS policies FROM ratelimit.policies;
SELECT count(*) AS buckets FROM ratelimit.buckets;

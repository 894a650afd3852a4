-- sql/src/buckets_upgrade.sql
--
-- The end of the upgrade of rate_limit_buckets to 0.4.0, the same in the
-- native extension and the portable limiter (their
-- update--0.3.0--0.4.0.sql): the listing gains a last column, previous,
-- which makes a new result type, so each template renames the old function
-- to rate_limit_buckets_0_3_0 before it makes the new one.  The new one
-- gets the grants of the old, which then goes.
--upgrade: REVOKE ALL ON FUNCTION :"rl_schema".rate_limit_buckets(text) FROM PUBLIC;
\set rl_grants_from :"rl_schema" .rate_limit_buckets_0_3_0(text)
\set rl_grants_to :"rl_schema" .rate_limit_buckets(text)
\ir copy_grants.sql
DROP FUNCTION :"rl_schema".rate_limit_buckets_0_3_0(text);

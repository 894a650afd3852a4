-- portable/memory_engine.sql: included by policies.sql and by the upgrade
-- script to 0.4.0 (update--0.3.0--0.4.0.sql).
--
-- The portable limiter has no memory engine: rate_limit_define refuses a
-- memory policy (the native require_memory_engine() refuses one only where
-- its engine cannot run).
CREATE FUNCTION rl_require_memory_engine() RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'the portable limiter has no memory engine'
        USING ERRCODE = 'feature_not_supported',
              DETAIL = 'Keeping buckets in shared memory needs the native extension ratelimit.',
              HINT = 'Define the policy with storage => ''table'' (the default), or install the native extension.';
END
$$;
COMMENT ON FUNCTION rl_require_memory_engine() IS
    'refuses a policy with storage ''memory'': the portable limiter has no memory engine';

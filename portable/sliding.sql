-- portable/sliding.sql
--
-- rate_limit_define_sliding_window's check of what this target keeps: the
-- portable limiter does not count sliding windows yet (its algebra,
-- portable/core.sql, is the token bucket's), so it refuses to define one
-- rather than decide it as a bucket; a take, check, refund or take_all of
-- one (a policy restored from the native extension) raises the same.
CREATE FUNCTION rl_require_sliding(storage text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'the portable limiter keeps no sliding windows'
        USING ERRCODE = 'feature_not_supported',
              DETAIL = 'In this version only the native extension counts a sliding window.',
              HINT = 'Define a token bucket with rate_limit_define (burst + rate x window <= N admits at most N in any window), or use the native extension.';
END
$$;
COMMENT ON FUNCTION rl_require_sliding(text) IS
    'raises an error: the portable limiter keeps no sliding windows in this version';

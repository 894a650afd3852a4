-- sql/sliding.sql: included by ratelimit.sql and by the upgrade to 0.4.0
--
-- rate_limit_define_sliding_window's check of what this target keeps: the
-- native extension keeps sliding windows in either engine, so this raises
-- nothing (the portable limiter's raises 0A000).
CREATE FUNCTION ratelimit.require_sliding(storage text) RETURNS void
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT $$;
COMMENT ON FUNCTION ratelimit.require_sliding(text) IS
    'raises an error for a sliding window this version does not keep (none: both engines keep them)';
REVOKE ALL ON FUNCTION ratelimit.require_sliding(text) FROM PUBLIC;

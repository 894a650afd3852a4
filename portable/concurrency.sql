-- portable/concurrency.sql: included by policies.sql and by the upgrade
--
-- The portable limiter keeps no concurrency limit yet:
-- rate_limit_define_concurrency refuses every one (the native
-- require_concurrency() accepts places held until the transaction ends, in
-- the table).
CREATE FUNCTION rl_require_concurrency(storage text, lease interval) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'the portable limiter has no concurrency limits'
        USING ERRCODE = 'feature_not_supported',
              DETAIL = 'Holding places at once per key needs the native extension ratelimit in this version.',
              HINT = 'Define a rate limit with rate_limit_define, or install the native extension.';
END
$$;
COMMENT ON FUNCTION rl_require_concurrency(text, interval) IS
    'refuses a concurrency limit: the portable limiter keeps none yet';

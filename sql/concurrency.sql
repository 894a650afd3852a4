-- sql/concurrency.sql: included by ratelimit.sql and by the upgrade to 0.4.0
--
-- Raises 0A000 for the concurrency limits this version does not keep yet:
-- leases; rate_limit_define_concurrency calls it.
CREATE FUNCTION ratelimit.require_concurrency(storage text, lease interval) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF $2 IS NOT NULL THEN
        RAISE EXCEPTION 'concurrency limits with a lease are not available'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'In this version a place is held until the transaction that took it ends.',
                  HINT = 'Define the concurrency limit without a lease.';
    END IF;
END
$$;
COMMENT ON FUNCTION ratelimit.require_concurrency(text, interval) IS
    'raises an error for a concurrency limit this version does not keep (a lease)';
REVOKE ALL ON FUNCTION ratelimit.require_concurrency(text, interval) FROM PUBLIC;

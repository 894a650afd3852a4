-- sql/src/lease_headers.sql
--
-- rate_limit_headers of a rate_limit_lease row: those of its decision
-- (headers.sql), the lease's id and expiry left aside.
CREATE FUNCTION :"rl_schema".rate_limit_headers(
    decision :"rl_schema".rate_limit_lease,
    OUT ratelimit_policy text,
    OUT ratelimit        text,
    OUT retry_after      text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT h.ratelimit_policy, h.ratelimit, h.retry_after
  FROM @extschema@.rate_limit_headers(ROW($1.allowed, $1.remaining, $1.retry_after, $1.reset_after,
                                          $1.capacity, $1.name, $1.quota, $1.per,
                                          $1.refill_after)::@extschema@.rate_limit_decision) AS h
$$;
COMMENT ON FUNCTION :"rl_schema".rate_limit_headers(:"rl_schema".rate_limit_lease) IS
    'values of the RateLimit-Policy, RateLimit and Retry-After HTTP headers (draft-ietf-httpapi-ratelimit-headers-11) for a decision of rate_limit_lease()';

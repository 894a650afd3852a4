-- sql/src/lease_type.sql
--
-- The row rate_limit_lease returns: a decision's columns, then the lease it
-- took (NULL when denied, or when it asked for no place) and when that
-- lease expires.
CREATE TYPE :"rl_schema".rate_limit_lease AS (
    allowed      boolean,
    remaining    float8,
    retry_after  float8,
    reset_after  float8,
    capacity     float8,
    name         text,
    quota        float8,
    per          interval,
    refill_after float8,
    lease        uuid,
    expires_at   timestamptz
);
COMMENT ON TYPE :"rl_schema".rate_limit_lease IS
    'answer of rate_limit_lease: the columns of rate_limit_decision, then the id of the lease taken (NULL if none was) and when it expires';

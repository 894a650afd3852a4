-- sql/src/decision_types.sql
--
-- The row types the calls answer with.  Included by sql/ratelimit.sql,
-- portable/ratelimit.sql and router/ratelimit_router.sql (see sql/src/README).

CREATE TYPE :"rl_schema".rate_limit_decision AS (
    allowed      boolean,
    remaining    float8,
    retry_after  float8,
    reset_after  float8,
    capacity     float8,
    name         text,
    quota        float8,
    per          interval,
    refill_after float8
);
COMMENT ON TYPE :"rl_schema".rate_limit_decision IS
    'answer of a rate limit call: allowed, tokens remaining (negative = reserved debt), seconds until a retry succeeds or reserved work may start, seconds until full, the burst, the limit''s name, its quota per period, and seconds until more quota arrives';

-- All or nothing over several limits.
CREATE TYPE :"rl_schema".rate_limit_all_decision AS (
    allowed      boolean,
    retry_after  float8,
    binding_name text,
    binding_key  text,
    remaining    float8[],
    decisions    :"rl_schema".rate_limit_decision[]
);
COMMENT ON TYPE :"rl_schema".rate_limit_all_decision IS
    'answer of rate_limit_take_all: allowed, seconds until every limit would grant, the binding limit, the tokens remaining per limit given, and each limit''s own decision';

-- sql/src/headers_policy.sql
--
-- The values of the RateLimit-Policy, RateLimit and Retry-After HTTP header
-- fields for a decision under a stored policy, the same in the native
-- extension and the portable limiter (the router, which stores no policy,
-- has only the forms of headers.sql).  The policy's row comes from
-- :rl_policy_source (see sql/src/README): the native table, read in the
-- caller's snapshot, or the portable limiter's rl_find_policy(policy),
-- which reads it as its calls do.

-- HTTP header values (draft-ietf-httpapi-ratelimit-headers-10): the policy
-- as a quota q per window w (the time the bucket takes to refill from empty),
-- the state as remaining r and seconds t until the next change that matters
-- (the retry when one is pending, otherwise until full), and Retry-After.
CREATE FUNCTION :"rl_schema".rate_limit_headers(
    decision :"rl_schema".rate_limit_decision,
    policy   text,
    rate     float8 DEFAULT NULL,
    OUT ratelimit_policy text,
    OUT ratelimit        text,
    OUT retry_after      text)
LANGUAGE plpgsql STABLE PARALLEL SAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    -- Structured-field integers have at most 15 digits: every value is
    -- capped there.
    sf_max CONSTANT float8 := '999999999999999'::float8;
    per_second float8 := rate_limit_headers.rate;
    item text;
    window_seconds float8;
    sliding_window_us bigint;
    wait float8;
BEGIN
    IF decision IS NULL OR policy IS NULL THEN
        RAISE EXCEPTION 'decision and policy must not be null'
            USING ERRCODE = 'null_value_not_allowed',
                  DETAIL = 'The header values describe one decision under one policy.',
                  HINT = 'Pass the row rate_limit_take() returned and the policy name.';
    END IF;
    -- The limiter's decisions hold a finite positive capacity and waits of
    -- zero or more, or NULL where nobody can know them (a concurrency
    -- limit's place comes back when a holder's transaction ends: then no t
    -- and no Retry-After, as rate_limit_headers(decision) says); NaN compares
    -- equal to itself and above every number.
    IF (decision.capacity OPERATOR(pg_catalog.>) '0'::float8
        AND decision.capacity OPERATOR(pg_catalog.<) 'Infinity'::float8
        AND decision.remaining OPERATOR(pg_catalog.<>) 'NaN'::float8
        AND (decision.retry_after IS NULL
             OR (decision.retry_after OPERATOR(pg_catalog.>=) '0'::float8
                 AND decision.retry_after OPERATOR(pg_catalog.<>) 'NaN'::float8))
        AND (decision.reset_after IS NULL
             OR (decision.reset_after OPERATOR(pg_catalog.>=) '0'::float8
                 AND decision.reset_after OPERATOR(pg_catalog.<>) 'NaN'::float8))) IS NOT TRUE THEN
        RAISE EXCEPTION 'decision is not a rate limit decision'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('The decision given was %s; a decision has a finite capacity above zero, a remaining balance and waits of zero or more.', decision),
                  HINT = 'Pass the row rate_limit_take() or rate_limit_check() returned.';
    END IF;
    IF policy OPERATOR(pg_catalog.=) '' OR policy OPERATOR(pg_catalog.!~) '^[ -~]*$' THEN
        RAISE EXCEPTION 'policy name cannot be written as a structured-field string'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'HTTP structured-field strings hold printable ASCII characters only.',
                  HINT = 'Name the policy in the headers with a non-empty ASCII name.';
    END IF;
    IF per_second IS NULL THEN
        SELECT p.tokens_per_second,
               CASE WHEN p.kind OPERATOR(pg_catalog.=) 'sliding' THEN p.window_us END
          INTO per_second, sliding_window_us
          FROM @rl_policy_source@ AS p WHERE p.name OPERATOR(pg_catalog.=) policy;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'rate limit policy "%" does not exist', policy
                USING ERRCODE = 'undefined_object',
                      DETAIL = 'Without a rate, the headers take it from a policy defined with rate_limit_define().',
                      HINT = 'Pass the rate used for the decision, or define the policy.';
        END IF;
    END IF;
    IF NOT (per_second OPERATOR(pg_catalog.>=) '0'::float8 AND per_second OPERATOR(pg_catalog.<) 'Infinity'::float8) THEN
        RAISE EXCEPTION 'rate must be a finite number greater than or equal to zero'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('The rate given was %s.', per_second),
                  HINT = 'Pass the refill rate in tokens per second that the decision used.';
    END IF;

    -- The window, capacity / per_second, without a quotient beyond float8:
    -- one second when the capacity is no more than a second's worth, and
    -- sf_max when the quotient would exceed it; a sliding window's own.
    window_seconds := CASE
        WHEN sliding_window_us IS NOT NULL
        THEN greatest(pg_catalog.ceil(sliding_window_us::float8 OPERATOR(pg_catalog./) '1000000'::float8), '1'::float8)
        WHEN decision.capacity OPERATOR(pg_catalog.<=) per_second THEN '1'::float8
        WHEN per_second OPERATOR(pg_catalog.<) '1'::float8
             AND decision.capacity OPERATOR(pg_catalog.>) (per_second OPERATOR(pg_catalog.*) sf_max) THEN sf_max
        ELSE pg_catalog.ceil(decision.capacity OPERATOR(pg_catalog./) per_second) END;
    item := '"' OPERATOR(pg_catalog.||) pg_catalog.replace(pg_catalog.replace(policy, '\', '\\'), '"', '\"')
            OPERATOR(pg_catalog.||) '"';
    ratelimit_policy := item OPERATOR(pg_catalog.||) ';q='
        OPERATOR(pg_catalog.||) least(pg_catalog.floor(decision.capacity), sf_max)::bigint::text
        OPERATOR(pg_catalog.||) CASE WHEN per_second OPERATOR(pg_catalog.>) '0'::float8
                THEN ';w=' OPERATOR(pg_catalog.||) least(window_seconds, sf_max)::bigint::text
                ELSE '' END;
    wait := CASE WHEN decision.retry_after IS NULL THEN NULL
                 WHEN decision.retry_after OPERATOR(pg_catalog.>) '0'::float8
                 THEN decision.retry_after ELSE decision.reset_after END;
    ratelimit := item OPERATOR(pg_catalog.||) ';r='
        OPERATOR(pg_catalog.||) least(pg_catalog.floor(greatest(decision.remaining, '0'::float8)), sf_max)::bigint::text
        OPERATOR(pg_catalog.||) CASE WHEN wait OPERATOR(pg_catalog.<) 'Infinity'::float8
                THEN ';t=' OPERATOR(pg_catalog.||) least(pg_catalog.ceil(wait), sf_max)::bigint::text
                ELSE '' END;
    retry_after := CASE WHEN decision.retry_after OPERATOR(pg_catalog.>) '0'::float8
                             AND decision.retry_after OPERATOR(pg_catalog.<) 'Infinity'::float8
                        THEN least(pg_catalog.ceil(decision.retry_after), sf_max)::bigint::text END;
END
$$;
COMMENT ON FUNCTION :"rl_schema".rate_limit_headers(:"rl_schema".rate_limit_decision, text, float8) IS
    'values of the RateLimit-Policy, RateLimit and Retry-After HTTP headers (draft-ietf-httpapi-ratelimit-headers-10) for a decision under a policy (its rate from the stored policy unless given)';

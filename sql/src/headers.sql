-- sql/src/headers.sql
--
-- The values of the RateLimit-Policy, RateLimit and Retry-After HTTP header
-- fields from a decision alone: the same functions in the native extension,
-- the portable limiter and the router, which computes them itself (they need
-- nothing but a decision).  The form that reads a stored policy is in
-- headers_policy.sql.

-- HTTP header values (draft-ietf-httpapi-ratelimit-headers-11) from a
-- decision alone: the policy as a whole quota q per window w in seconds, the
-- state as whole units remaining r and seconds t until more quota arrives,
-- and Retry-After when the call was denied.  Every value is capped at 15
-- digits, as structured-field integers are.  It reads nothing but its
-- argument, so it runs with the caller's rights.
CREATE FUNCTION :"rl_schema".rate_limit_headers(
    decision :"rl_schema".rate_limit_decision,
    OUT ratelimit_policy text,
    OUT ratelimit        text,
    OUT retry_after      text)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    sf_max CONSTANT float8 := '999999999999999'::float8;
    per_seconds float8 := pg_catalog.date_part('epoch', decision.per);
    scale float8;
    item text;
BEGIN
    -- What the limiter returns: a name, a finite quota of zero or more per
    -- a positive period, a finite capacity above zero, a finite balance and
    -- waits of zero or more.  NaN compares equal to itself and above every
    -- number; NULL makes the whole condition NULL, but for a wait, which is
    -- NULL when nobody can know it (a concurrency limit's place comes back
    -- when a holder's transaction ends): then no t and no Retry-After.
    IF (decision.allowed IS NOT NULL
        AND decision.remaining OPERATOR(pg_catalog.>) '-Infinity'::float8
        AND decision.remaining OPERATOR(pg_catalog.<) 'Infinity'::float8
        AND (decision.retry_after IS NULL
             OR (decision.retry_after OPERATOR(pg_catalog.>=) '0'::float8
                 AND decision.retry_after OPERATOR(pg_catalog.<>) 'NaN'::float8))
        AND (decision.reset_after IS NULL
             OR (decision.reset_after OPERATOR(pg_catalog.>=) '0'::float8
                 AND decision.reset_after OPERATOR(pg_catalog.<>) 'NaN'::float8))
        AND decision.capacity OPERATOR(pg_catalog.>) '0'::float8
        AND decision.capacity OPERATOR(pg_catalog.<) 'Infinity'::float8
        AND decision.name OPERATOR(pg_catalog.<>) ''
        AND decision.quota OPERATOR(pg_catalog.>=) '0'::float8
        AND decision.quota OPERATOR(pg_catalog.<) 'Infinity'::float8
        AND per_seconds OPERATOR(pg_catalog.>) '0'::float8
        AND per_seconds OPERATOR(pg_catalog.<) 'Infinity'::float8
        AND (decision.refill_after IS NULL
             OR (decision.refill_after OPERATOR(pg_catalog.>=) '0'::float8
                 AND decision.refill_after OPERATOR(pg_catalog.<>) 'NaN'::float8))) IS NOT TRUE THEN
        RAISE EXCEPTION 'decision is not a rate limit decision'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('The decision given was %s; a decision has a name, a quota of zero or more per a positive period, a finite capacity above zero, a finite balance and waits of zero or more.', decision),
                  HINT = 'Pass the row a rate_limit_take() or rate_limit_check() call returned.';
    END IF;
    IF decision.name OPERATOR(pg_catalog.!~) '^[ -~]+$' THEN
        RAISE EXCEPTION 'limit name cannot be written as a structured-field string'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'HTTP structured-field strings hold printable ASCII characters only (space to tilde).',
                  HINT = 'Give the limit a name of letters, digits and punctuation, such as ''api-free'' or ''login:v2''.';
    END IF;
    item := '"' OPERATOR(pg_catalog.||)
            pg_catalog.replace(pg_catalog.replace(decision.name, '\', '\\'), '"', '\"')
            OPERATOR(pg_catalog.||) '"';

    -- The quota per window in whole numbers: scaled by the smallest whole
    -- number that makes both the quota and the period at least 1 (1 when they
    -- are), so that "5 per minute" is q=5;w=60 and "0.5 per second" q=1;w=2.
    -- Nothing overflows: 1/quota stays below 1e300 (a quota below 1e-300 has
    -- a window far beyond sf_max seconds), a window beyond sf_max is capped
    -- before it is computed, and so is a quota.  A quota of 0 never refills:
    -- q is the capacity, over no window.
    IF decision.quota OPERATOR(pg_catalog.=) '0'::float8 THEN
        ratelimit_policy := item OPERATOR(pg_catalog.||) ';q='
            OPERATOR(pg_catalog.||) least(pg_catalog.floor(decision.capacity), sf_max)::bigint::text;
    ELSE
        scale := pg_catalog.ceil(greatest(
            CASE WHEN decision.quota OPERATOR(pg_catalog.>=) '1e-300'::float8
                 THEN '1'::float8 OPERATOR(pg_catalog./) decision.quota ELSE '1e300'::float8 END,
            '1'::float8 OPERATOR(pg_catalog./) per_seconds));
        ratelimit_policy := item OPERATOR(pg_catalog.||) ';q='
            OPERATOR(pg_catalog.||) least(greatest(pg_catalog.floor(least(decision.quota, sf_max)
                                                                    OPERATOR(pg_catalog.*) scale),
                                                   '1'::float8), sf_max)::bigint::text
            OPERATOR(pg_catalog.||) ';w='
            OPERATOR(pg_catalog.||) least(CASE
                WHEN scale OPERATOR(pg_catalog.>=) (sf_max OPERATOR(pg_catalog./) per_seconds) THEN sf_max
                ELSE pg_catalog.ceil(per_seconds OPERATOR(pg_catalog.*) scale) END, sf_max)::bigint::text;
    END IF;

    -- t: seconds within which the client gets no more than r; none when the
    -- bucket is full or never refills.
    ratelimit := item OPERATOR(pg_catalog.||) ';r='
        OPERATOR(pg_catalog.||) least(pg_catalog.floor(greatest(decision.remaining, '0'::float8)), sf_max)::bigint::text
        OPERATOR(pg_catalog.||) CASE
            WHEN decision.remaining OPERATOR(pg_catalog.<) decision.capacity
                 AND decision.refill_after OPERATOR(pg_catalog.<) 'Infinity'::float8
            THEN ';t=' OPERATOR(pg_catalog.||) least(pg_catalog.ceil(decision.refill_after), sf_max)::bigint::text
            ELSE '' END;
    retry_after := CASE WHEN NOT decision.allowed
                             AND decision.retry_after OPERATOR(pg_catalog.>) '0'::float8
                             AND decision.retry_after OPERATOR(pg_catalog.<) 'Infinity'::float8
                        THEN least(pg_catalog.ceil(decision.retry_after), sf_max)::bigint::text END;
END
$$;
COMMENT ON FUNCTION :"rl_schema".rate_limit_headers(:"rl_schema".rate_limit_decision) IS
    'values of the RateLimit-Policy, RateLimit and Retry-After HTTP headers (draft-ietf-httpapi-ratelimit-headers-11) for a decision of rate_limit_take() or rate_limit_check()';

-- Several limits at once: one item per limit, in the order given, and
-- Retry-After when the whole call was denied.
CREATE FUNCTION :"rl_schema".rate_limit_headers(
    decision :"rl_schema".rate_limit_all_decision,
    OUT ratelimit_policy text,
    OUT ratelimit        text,
    OUT retry_after      text)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    sf_max CONSTANT float8 := '999999999999999'::float8;
    element @extschema@.rate_limit_decision;
    one record;
BEGIN
    IF (decision.allowed IS NOT NULL
        AND (decision.retry_after IS NULL
             OR (decision.retry_after OPERATOR(pg_catalog.>=) '0'::float8
                 AND decision.retry_after OPERATOR(pg_catalog.<>) 'NaN'::float8))
        AND pg_catalog.array_ndims(decision.decisions) OPERATOR(pg_catalog.=) 1
        AND pg_catalog.cardinality(decision.remaining) OPERATOR(pg_catalog.=) pg_catalog.cardinality(decision.decisions))
       IS NOT TRUE THEN
        RAISE EXCEPTION 'decision is not a rate limit decision'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('The decision given was %s; a decision of rate_limit_take_all() has a wait of zero or more and one decision and one balance per limit.', decision),
                  HINT = 'Pass the row a rate_limit_take_all() call returned.';
    END IF;
    FOREACH element IN ARRAY decision.decisions LOOP
        one := @extschema@.rate_limit_headers(element);
        ratelimit_policy := CASE WHEN ratelimit_policy IS NULL THEN one.ratelimit_policy
                                 ELSE ratelimit_policy OPERATOR(pg_catalog.||) ', '
                                      OPERATOR(pg_catalog.||) one.ratelimit_policy END;
        ratelimit := CASE WHEN ratelimit IS NULL THEN one.ratelimit
                          ELSE ratelimit OPERATOR(pg_catalog.||) ', '
                               OPERATOR(pg_catalog.||) one.ratelimit END;
    END LOOP;
    retry_after := CASE WHEN NOT decision.allowed
                             AND decision.retry_after OPERATOR(pg_catalog.>) '0'::float8
                             AND decision.retry_after OPERATOR(pg_catalog.<) 'Infinity'::float8
                        THEN least(pg_catalog.ceil(decision.retry_after), sf_max)::bigint::text END;
END
$$;
COMMENT ON FUNCTION :"rl_schema".rate_limit_headers(:"rl_schema".rate_limit_all_decision) IS
    'values of the RateLimit-Policy and RateLimit HTTP headers (one item per limit, in the order given) and of Retry-After (draft-ietf-httpapi-ratelimit-headers-11) for a decision of rate_limit_take_all()';

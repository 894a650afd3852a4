-- portable/policy_decide.sql: the limit a policy sets and a take or check
-- by a policy's name in the general way.  Included by policies.sql, after
-- the helpers they call, and by the upgrade script to 0.4.0
-- (update--0.3.0--0.4.0.sql).

-- The limit policy p sets for key (PolicyLimit): fixed windows start at
-- window_start, or where the key's hash puts them; a report-only policy
-- starts no penalty box.
CREATE FUNCTION rl_policy_limit(p rl_policies, p_name text, p_key text) RETURNS rl_limit
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT ROW(p.tokens_per_second, p.burst,
                 CASE WHEN p.fixed_window THEN p.window_us ELSE '0'::bigint END,
                 CASE WHEN NOT p.fixed_window THEN '0'::bigint
                      WHEN p.window_start_us IS NOT NULL THEN p.window_start_us OPERATOR(pg_catalog.%) p.window_us
                      ELSE (@extschema@.rl_bucket_hash(p_name, p_key, '131294707347319'::bigint)
                            OPERATOR(pg_catalog.%) p.window_us::numeric)::bigint END,
                 p.floor_per_second,
                 CASE WHEN p.enforce THEN coalesce(p.penalty_us, '0'::bigint) ELSE '0'::bigint END)::@extschema@.rl_limit $$;

-- Take or check (op) cost from key under policy name, reserving within
-- max_wait as the policy allows (PolicyDecision); of a concurrency limit,
-- cost places, never reserving.
CREATE FUNCTION rl_policy_call(function_name text, p_name text, p_key text, cost float8,
                               max_wait float8, op text)
RETURNS rate_limit_decision
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    p @extschema@.rl_policies;
    l @extschema@.rl_limit;
    r @extschema@.rl_request;
    d @extschema@.rl_decision;
BEGIN
    PERFORM @extschema@.rl_check_name_and_key(p_name, p_key);
    p := @extschema@.rl_policy_to_take(p_name, op OPERATOR(pg_catalog.=) 'take'::pg_catalog.text);
    -- A concurrency limit holds places (concurrency.sql).
    IF p.kind OPERATOR(pg_catalog.=) 'concurrency'::pg_catalog.text THEN
        RETURN @extschema@.rl_hold_call(function_name, p, p_name, p_key, cost, op);
    END IF;
    -- A sliding window counts in its own algebra (sliding.sql).
    IF p.kind OPERATOR(pg_catalog.=) 'sliding'::pg_catalog.text THEN
        l := @extschema@.rl_sliding_limit(p);
        r := @extschema@.rl_policy_request(p, cost, max_wait);
        PERFORM @extschema@.rl_check_sliding_request(l, r);
        IF op OPERATOR(pg_catalog.=) 'check'::pg_catalog.text THEN
            PERFORM @extschema@.rl_require_readable(function_name);
        ELSE
            PERFORM @extschema@.rl_require_writable(function_name);
        END IF;
        d := @extschema@.rl_apply(p_name, p_key, l, r, op, '0'::pg_catalog.float8, NULL::pg_catalog.float8, true);
        d.allowed := d.allowed OR NOT p.enforce;
        RETURN @extschema@.rl_policy_answer(d, p, p_name);
    END IF;
    l := @extschema@.rl_policy_limit(p, p_name, p_key);
    r := @extschema@.rl_policy_request(p, cost, max_wait);
    PERFORM @extschema@.rl_check_request(l, r, 'policy'::pg_catalog.text, l.rate);
    IF op OPERATOR(pg_catalog.=) 'check'::pg_catalog.text THEN
        PERFORM @extschema@.rl_require_readable(function_name);
    ELSE
        PERFORM @extschema@.rl_require_writable(function_name);
    END IF;
    IF p.shards OPERATOR(pg_catalog.>) 1 THEN
        d := @extschema@.rl_sharded_call(p_name, p_key, p, l, r, op, '0'::pg_catalog.float8);
    ELSE
        d := @extschema@.rl_apply(p_name, p_key, l, r, op, '0'::pg_catalog.float8, p.initial);
    END IF;
    IF p.jitter OPERATOR(pg_catalog.>) '0'::pg_catalog.float8 AND NOT d.allowed THEN
        d.retry_after := @extschema@.rl_jittered(d.retry_after, p.jitter, p_name, p_key);
    END IF;
    -- A report-only policy's would-be denial: allowed, the rest the denial's.
    d.allowed := d.allowed OR NOT p.enforce;
    RETURN @extschema@.rl_policy_answer(d, p, p_name);
END
$$;

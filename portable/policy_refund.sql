-- portable/policy_refund.sql: rate_limit_refund by a policy's name.
-- Included by policies.sql and by the upgrade script to 0.4.0
-- (update--0.3.0--0.4.0.sql), replacing 0.3.0's there: a concurrency limit
-- holds places, which are not refunded (0A000, as the native one).

CREATE FUNCTION rate_limit_refund(name text, key text, amount float8)
RETURNS rate_limit_decision
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p @extschema@.rl_policies;
    l @extschema@.rl_limit;
    d @extschema@.rl_decision;
BEGIN
    IF pg_catalog.num_nulls($1, $2, $3) > 0 THEN
        PERFORM @extschema@.rl_null_argument('rate_limit_refund', ARRAY['name', 'key', 'amount'],
                                 ARRAY[$1, $2, $3::text], 'Every argument of this function needs a value.');
    END IF;
    PERFORM @extschema@.rl_check_name_and_key($1, $2);
    IF NOT ($3 >= 0 AND $3 < 'Infinity'::float8) THEN
        PERFORM @extschema@.rl_report_invalid_amount($3);
    END IF;
    -- In the native limiter's order: the policy, then what it allows.
    p := @extschema@.rl_policy($1);
    IF p.kind OPERATOR(pg_catalog.=) 'concurrency'::pg_catalog.text THEN
        PERFORM @extschema@.rl_report_concurrency_refund($1, p.lease_us IS NOT NULL);
    END IF;
    PERFORM @extschema@.rl_require_writable('rate_limit_refund');
    -- A sliding window lowers its current count (sliding.sql).
    IF p.kind OPERATOR(pg_catalog.=) 'sliding'::pg_catalog.text THEN
        d := @extschema@.rl_apply($1, $2, @extschema@.rl_sliding_limit(p), NULL::@extschema@.rl_request, 'refund', $3,
                                  NULL::pg_catalog.float8, true);
        RETURN @extschema@.rl_policy_answer(d, p, $1);
    END IF;
    l := @extschema@.rl_policy_limit(p, $1, $2);
    IF p.shards > 1 THEN
        d := @extschema@.rl_sharded_call($1, $2, p, l, NULL::@extschema@.rl_request, 'refund', $3);
    ELSE
        d := @extschema@.rl_apply($1, $2, l, NULL::@extschema@.rl_request, 'refund', $3, p.initial);
    END IF;
    RETURN @extschema@.rl_policy_answer(d, p, $1);
END
$$;
COMMENT ON FUNCTION rate_limit_refund(text, text, float8) IS
    'gives amount tokens back to the bucket (name, key) of policy name, never beyond its burst';
REVOKE ALL ON FUNCTION rate_limit_refund(text, text, float8) FROM PUBLIC;

-- bench/portable_floor.sql
--
-- The floors of a portable take by a policy's name, for bench/instructions,
-- bench/run and bench/portable: routines that make the calls a take makes
-- and decide nothing.  Installed
-- beside the portable limiter (portable/ratelimit.sql) in the schema it was
-- installed in, as its owner, in a throwaway database only.

-- The same read and write as rate_limit_take(name, key)'s common case (the
-- policy and the bucket in one statement, the clock after them; an UPDATE
-- of the row if it still holds what was read), a SECURITY DEFINER routine
-- without a SET clause, returning the decision type: with no algebra.
CREATE FUNCTION floor_two_statements(p_name text, p_key text, cost float8 DEFAULT 1)
RETURNS rate_limit_decision
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
AS $$
DECLARE
    limit_burst pg_catalog.float8;
    limit_quota pg_catalog.float8;
    limit_per interval;
    stored_tokens pg_catalog.float8;
    stored_stamp_us bigint;
    now_us bigint;
BEGIN
    SELECT p.burst, p.rate, p.per, b.tokens, b.stamp_us, rl_now()
      INTO limit_burst, limit_quota, limit_per, stored_tokens, stored_stamp_us, now_us
      FROM rl_policies AS p, rl_buckets AS b
     WHERE p.name = $1 AND b.name = $1 AND b.key = $2;
    UPDATE rl_buckets AS t
       SET (tokens, stamp_us, full_at_us, previous) = ROW(stored_tokens, now_us, now_us, '0'::float8)
     WHERE t.name = $1 AND t.key = $2 AND t.tokens = stored_tokens AND t.stamp_us = stored_stamp_us;
    RETURN ROW(true, stored_tokens, '0'::float8, '0'::float8, limit_burst, $1, limit_quota, limit_per,
               '0'::float8)::rate_limit_decision;
END
$$;
COMMENT ON FUNCTION floor_two_statements(text, text, float8) IS
    'the calls of a portable take by policy (one read, one UPDATE), deciding nothing: its floor';

-- The least any take by a policy's name can do: one UPDATE of the bucket
-- that reads the policy in the same statement, nothing decided.
CREATE FUNCTION floor_one_statement(p_name text, p_key text, cost float8 DEFAULT 1)
RETURNS rate_limit_decision
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
AS $$
DECLARE
    decision rate_limit_decision;
BEGIN
    UPDATE rl_buckets AS t
       SET (tokens, stamp_us, full_at_us, previous) = ROW(t.tokens, rl_now(), t.stamp_us, '0'::float8)
      FROM rl_policies AS p
     WHERE p.name = $1 AND t.name = $1 AND t.key = $2
    RETURNING true, t.tokens, '0'::float8, '0'::float8, p.burst, $1, p.rate, p.per, '0'::float8
         INTO decision;
    RETURN decision;
END
$$;
COMMENT ON FUNCTION floor_one_statement(text, text, float8) IS
    'one UPDATE of a bucket that reads its policy, deciding nothing: the floor of any take by policy';

-- What one operator costs a PL/pgSQL routine: an assignment of one
-- variable, and of the sum of 101 of them (100 additions).
CREATE FUNCTION floor_no_operator(a float8) RETURNS float8
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    x float8;
BEGIN
    x := a;
    RETURN x;
END
$$;
COMMENT ON FUNCTION floor_no_operator(float8) IS 'one assignment of a variable';

DO $make$
BEGIN
    EXECUTE pg_catalog.format($f$
        CREATE FUNCTION floor_hundred_operators(a float8) RETURNS float8
        LANGUAGE plpgsql VOLATILE
        AS $body$
        DECLARE
            x float8;
        BEGIN
            x := %s;
            RETURN x;
        END
        $body$$f$, (SELECT pg_catalog.string_agg('a', ' + ') FROM pg_catalog.generate_series(1, 101)));
END
$make$;
COMMENT ON FUNCTION floor_hundred_operators(float8) IS 'one assignment of the sum of 101 variables: 100 operators';

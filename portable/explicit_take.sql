-- portable/explicit_take.sql: rate_limit_take and rate_limit_check with
-- explicit parameters (tokens a second).  Included by ratelimit.sql and by
-- the upgrade script to 0.4.0 (update--0.3.0--0.4.0.sql).
--
-- A call that does not reserve goes rl_quick_call's way first (its common
-- case: a key seen before, no policy of that name); the rest, and what that
-- cannot tell, checks the name, the key and the limit and decides by
-- rl_apply, as the native functions do.

CREATE FUNCTION rate_limit_take(
    name         text,
    key          text,
    cost         float8,
    rate         float8,
    burst        float8,
    reserve      boolean DEFAULT false,
    max_reserved float8  DEFAULT NULL)
RETURNS rate_limit_decision
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    quick @extschema@.rate_limit_decision;
BEGIN
    IF pg_catalog.num_nulls($1, $2, $3, $4, $5, $6) > 0 THEN
        PERFORM @extschema@.rl_null_argument('rate_limit_take', ARRAY['name', 'key', 'cost', 'rate', 'burst', 'reserve'],
                                 ARRAY[$1, $2, $3::text, $4::text, $5::text, $6::text],
                                 'Only max_reserved may be NULL, meaning no cap on reserved debt.');
    END IF;
    IF NOT $6 AND $7 IS NULL THEN
        quick := @extschema@.rl_quick_call($1, $2, $3, 'take', $4, $5);
        IF quick.allowed IS NOT NULL THEN
            RETURN quick;
        END IF;
    END IF;
    PERFORM @extschema@.rl_explicit_name('rate_limit_take', $1, $2);
    RETURN @extschema@.rl_explicit_call('rate_limit_take', $1, $2, ROW($4, $5, 0, 0, 0, 0)::@extschema@.rl_limit,
                            ROW($3, $6, $7 IS NOT NULL, coalesce($7, 0), 'Infinity')::@extschema@.rl_request,
                            'per_second', 'take', 0::float8, $4, '1 second'::interval);
END
$$;
COMMENT ON FUNCTION rate_limit_take(text, text, float8, float8, float8, boolean, float8) IS
    'takes cost tokens from the bucket (name, key) that refills at rate tokens per second up to burst; a denial changes nothing; rolled back with the caller''s transaction';

CREATE FUNCTION rate_limit_check(
    name         text,
    key          text,
    cost         float8,
    rate         float8,
    burst        float8,
    reserve      boolean DEFAULT false,
    max_reserved float8  DEFAULT NULL)
RETURNS rate_limit_decision
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    quick @extschema@.rate_limit_decision;
BEGIN
    IF pg_catalog.num_nulls($1, $2, $3, $4, $5, $6) > 0 THEN
        PERFORM @extschema@.rl_null_argument('rate_limit_check', ARRAY['name', 'key', 'cost', 'rate', 'burst', 'reserve'],
                                 ARRAY[$1, $2, $3::text, $4::text, $5::text, $6::text],
                                 'Only max_reserved may be NULL, meaning no cap on reserved debt.');
    END IF;
    IF NOT $6 AND $7 IS NULL THEN
        quick := @extschema@.rl_quick_call($1, $2, $3, 'check', $4, $5);
        IF quick.allowed IS NOT NULL THEN
            RETURN quick;
        END IF;
    END IF;
    PERFORM @extschema@.rl_explicit_name('rate_limit_check', $1, $2);
    RETURN @extschema@.rl_explicit_call('rate_limit_check', $1, $2, ROW($4, $5, 0, 0, 0, 0)::@extschema@.rl_limit,
                            ROW($3, $6, $7 IS NOT NULL, coalesce($7, 0), 'Infinity')::@extschema@.rl_request,
                            'per_second', 'check', 0::float8, $4, '1 second'::interval);
END
$$;
COMMENT ON FUNCTION rate_limit_check(text, text, float8, float8, float8, boolean, float8) IS
    'answers as rate_limit_take would, without consuming or writing anything';

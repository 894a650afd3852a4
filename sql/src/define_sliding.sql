-- sql/src/define_sliding.sql
--
-- rate_limit_define_sliding_window: at most max_count in any window of
-- `window` per key, counted as a sliding window (the count of the window
-- before, weighted by what is left of this one, plus this one's), stored in
-- the policy table beside the token buckets (one name, one policy): kind
-- 'sliding', rate and burst max_count, per the window, every other bucket
-- option at its default (policies_kind_check).  Windows are aligned on
-- multiples of the window since the Unix epoch.  The body calls
-- @rl@require_sliding(storage), which raises the error of a target that
-- does not keep sliding windows (yet).  Its name, storage and enforce are
-- checked by @rl@check_policy_options (policy_options.sql).  Its
-- parameters are define_params.sql's, which the router's takes too.

\ir define_params.sql
CREATE FUNCTION :"rl_schema".rate_limit_define_sliding_window(:rl_define_sliding_params)
RETURNS :rl_policies
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    window_micros float8 := pg_catalog.round(pg_catalog.date_part('epoch', $3)
                                             OPERATOR(pg_catalog.*) '1000000'::float8);
    -- The largest bigint, rounded up to a float8: 2^63.
    micros_limit  CONSTANT float8 := '9223372036854775807'::float8;
    stored        @rl@policies;
BEGIN
    IF $1 IS NULL OR $2 IS NULL OR $3 IS NULL THEN
        RAISE EXCEPTION 'name, max_count and window must not be null'
            USING ERRCODE = 'null_value_not_allowed',
                  DETAIL = 'A sliding window admits at most max_count in any window of the length given.',
                  HINT = 'Pass the policy''s name, the most a key may take in one window, and the window, such as ''1 minute''.';
    END IF;
    -- The name, storage and enforce, as rate_limit_define checks them.
    PERFORM @rl@check_policy_options('sliding', $1, $4, $5);
    IF NOT ($2 OPERATOR(pg_catalog.>) '0'::float8 AND $2 OPERATOR(pg_catalog.<) 'Infinity'::float8) THEN
        RAISE EXCEPTION 'max_count must be a finite number greater than zero'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('The max_count given was %s.', $2),
                  HINT = 'Pass the most a key may take in any one window, such as 100.';
    END IF;
    IF NOT (window_micros OPERATOR(pg_catalog.>=) '1'::float8
            AND window_micros OPERATOR(pg_catalog.<) micros_limit) THEN
        RAISE EXCEPTION 'window must be a positive interval'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('The window given was %s.', $3),
                  HINT = 'Pass the length of the window, such as ''1 minute''.';
    END IF;
    PERFORM @rl@require_sliding($4);
    IF $4 OPERATOR(pg_catalog.=) 'memory' THEN
        PERFORM @rl@require_memory_engine();
    END IF;
    INSERT INTO @rl@policies AS p
        (name, rate, per, burst, initial, jitter, fixed_window, window_start, floor_rate, shards,
         max_reserved, penalty, storage, enforce, kind, lease)
    VALUES ($1, $2, $3, $2, NULL, '0'::float8, false, NULL,
            '0'::float8, 1, '0'::float8, NULL, $4, $5, 'sliding', NULL)
    ON CONFLICT (name) DO UPDATE
        SET rate = excluded.rate, per = excluded.per, burst = excluded.burst,
            initial = excluded.initial, jitter = excluded.jitter,
            fixed_window = excluded.fixed_window, window_start = excluded.window_start,
            floor_rate = excluded.floor_rate, shards = excluded.shards,
            max_reserved = excluded.max_reserved, penalty = excluded.penalty,
            storage = excluded.storage, enforce = excluded.enforce,
            kind = excluded.kind, lease = excluded.lease
    RETURNING p.* INTO stored;
    RETURN stored;
END
$$;
COMMENT ON FUNCTION :"rl_schema".rate_limit_define_sliding_window(:rl_define_sliding_types) IS
    'defines (or replaces) the sliding window name: each key takes at most max_count in any window of the length given, estimated as the previous window''s count weighted by what is left of the current window plus the current window''s count (windows aligned on multiples of the window since the Unix epoch); enforce false makes it report-only; returns the stored policy';
REVOKE ALL ON FUNCTION :"rl_schema".rate_limit_define_sliding_window(:rl_define_sliding_types) FROM PUBLIC;

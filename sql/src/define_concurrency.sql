-- sql/src/define_concurrency.sql
--
-- rate_limit_define_concurrency: a concurrency limit, at most max_held
-- places held at once per key, stored in the policy table beside the token
-- buckets (one name, one policy): kind 'concurrency', burst max_held, rate
-- 0, every bucket option at its default (policies_kind_check).  Without a
-- lease a place is held until the transaction that took it ends; with one,
-- until it expires or is released.  Where the two targets differ, the body
-- calls @rl@require_concurrency(storage, lease): it raises the error of a
-- kind of hold the target does not keep (yet).  Its name, storage and
-- enforce are checked by @rl@check_policy_options (policy_options.sql).
-- Its parameters are define_params.sql's, which the router's takes too.

\ir limits.sql
\ir define_params.sql
CREATE FUNCTION :"rl_schema".rate_limit_define_concurrency(:rl_define_concurrency_params)
RETURNS :rl_policies
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    lease_micros  float8 := pg_catalog.round(pg_catalog.date_part('epoch', $3)
                                             OPERATOR(pg_catalog.*) '1000000'::float8);
    -- The largest bigint, rounded up to a float8: 2^63.
    micros_limit  CONSTANT float8 := '9223372036854775807'::float8;
    stored        @rl@policies;
BEGIN
    IF $1 IS NULL OR $2 IS NULL THEN
        RAISE EXCEPTION 'name and max_held must not be null'
            USING ERRCODE = 'null_value_not_allowed',
                  DETAIL = 'Only lease may be NULL, meaning that a place is held until the transaction that took it ends.',
                  HINT = 'Pass the policy''s name and the most places a key may hold at once.';
    END IF;
    -- The name, storage and enforce, as rate_limit_define checks them.
    PERFORM @rl@check_policy_options('concurrency', $1, $4, $5);
    IF NOT ($2 OPERATOR(pg_catalog.>=) 1 AND $2 OPERATOR(pg_catalog.<=) @rl_max_held@) THEN
        RAISE EXCEPTION 'max_held must be between 1 and @rl_max_held@'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('The max_held given was %s; each place held is an entry of the server''s shared lock table while it is held.', $2),
                  HINT = 'Pass the most places a key may hold at once, such as 3.';
    END IF;
    IF $3 IS NOT NULL AND NOT (lease_micros OPERATOR(pg_catalog.>=) '1'::float8
                               AND lease_micros OPERATOR(pg_catalog.<) micros_limit) THEN
        RAISE EXCEPTION 'lease must be a positive interval'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('The lease given was %s.', $3),
                  HINT = 'Pass how long a place is held at most, such as ''5 minutes''; NULL (the default) to hold it until the transaction ends.';
    END IF;
    PERFORM @rl@require_concurrency($4, $3);
    -- Places are kept in the server's lock table by either engine; storage
    -- says which buckets the limit is taken with in one rate_limit_take_all,
    -- and is refused where that engine cannot run, as for rate_limit_define.
    IF $4 OPERATOR(pg_catalog.=) 'memory' THEN
        PERFORM @rl@require_memory_engine();
    END IF;
    INSERT INTO @rl@policies AS p
        (name, rate, per, burst, initial, jitter, fixed_window, window_start, floor_rate, shards,
         max_reserved, penalty, storage, enforce, kind, lease)
    VALUES ($1, '0'::float8, '1 second'::interval, $2::float8, NULL, '0'::float8, false, NULL,
            '0'::float8, 1, '0'::float8, NULL, $4, $5, 'concurrency', $3)
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
COMMENT ON FUNCTION :"rl_schema".rate_limit_define_concurrency(:rl_define_concurrency_types) IS
    'defines (or replaces) the concurrency limit name: each key holds at most max_held places at once, each taken by rate_limit_take and held until the taking transaction ends, or with a lease until it expires or is released; places are kept in the server''s lock table whichever the storage, which says with which buckets rate_limit_take_all may take the limit; enforce false makes it report-only; returns the stored policy';
REVOKE ALL ON FUNCTION :"rl_schema".rate_limit_define_concurrency(:rl_define_concurrency_types) FROM PUBLIC;

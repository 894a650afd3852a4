-- sql/src/define.sql
--
-- rate_limit_define and rate_limit_drop: the checks, messages and writes of
-- a policy, the same in the native extension and the portable limiter (the
-- router, which runs them on every partition, takes its parameters from
-- define_params.sql too).  :rl_policies (@rl@policies in the bodies) is the
-- policy table; where the two differ, the body calls a function of each
-- target's own, named @rl@...: require_memory_engine() raises an error
-- where a memory policy cannot run (native: 55000 before PostgreSQL 17
-- without the library preloaded; portable: always, 0A000), and
-- drop_leases(name) deletes the leases of a policy dropped.  The checks of
-- the name, storage and enforce, which every define function makes, are
-- @rl@check_policy_options's (policy_options.sql, included before this).

\ir define_params.sql
CREATE FUNCTION :"rl_schema".rate_limit_define(:rl_define_params)
RETURNS :rl_policies
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    -- Periods in seconds and whole microseconds, as @rl@policies
    -- derives them (see its generated columns).
    seconds       float8 := pg_catalog.date_part('epoch', $3);
    micros        float8 := pg_catalog.round(seconds OPERATOR(pg_catalog.*) '1000000'::float8);
    start_seconds float8 := pg_catalog.date_part('epoch', $8);
    start_micros  float8 := pg_catalog.round(start_seconds OPERATOR(pg_catalog.*) '1000000'::float8);
    -- The largest bigint, rounded up to a float8: 2^63.
    micros_limit  CONSTANT float8 := '9223372036854775807'::float8;
    dividend      text;
    quotient      float8;
    stored        @rl@policies;
    penalty_micros float8;
BEGIN
    IF $1 IS NULL OR $2 IS NULL OR $3 IS NULL THEN
        RAISE EXCEPTION 'name, rate and per must not be null'
            USING ERRCODE = 'null_value_not_allowed',
                  DETAIL = 'Only burst may be NULL, meaning one period''s worth of tokens.',
                  HINT = 'Pass the policy''s name, its rate and the period the rate is counted over.';
    END IF;
    -- The name, storage and enforce, checked as every define function
    -- checks them (policy_options.sql).
    PERFORM @rl@check_policy_options('bucket', $1, $13, $14);
    IF NOT ($2 OPERATOR(pg_catalog.>=) '0'::float8 AND $2 OPERATOR(pg_catalog.<) 'Infinity'::float8) THEN
        RAISE EXCEPTION 'rate must be a finite number greater than or equal to zero'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('The rate given was %s.', $2),
                  HINT = 'Pass how many tokens refill per period; 0 means the bucket never refills.';
    END IF;
    -- An interval compares as 30-day months, but lasts 365.25 days a year:
    -- '-1 year 361 days' is greater than zero and lasts -4.25 days.  The
    -- length in microseconds is what the limiter uses.
    IF NOT (micros OPERATOR(pg_catalog.>=) '1'::float8) THEN
        RAISE EXCEPTION 'per must be a positive interval'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = CASE WHEN $3 OPERATOR(pg_catalog.>) '0'::interval
                                THEN pg_catalog.format('The period given, %s, lasts %s seconds, counting a year as 365.25 days and a month as 30 days.', $3, seconds)
                                ELSE pg_catalog.format('The period given was %s.', $3) END,
                  HINT = 'Pass the period the rate is counted over, such as ''1 minute''.';
    END IF;
    IF NOT (micros OPERATOR(pg_catalog.<) micros_limit) THEN
        RAISE EXCEPTION 'per is too long'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('The period given, %s, lasts %s seconds; a period is kept in microseconds, in a bigint, so it lasts less than 9223372036854.775808 seconds (about 292,271 years).', $3, seconds),
                  HINT = 'Pass a shorter period, such as ''1 year''.';
    END IF;
    IF NOT (coalesce($4, $2) OPERATOR(pg_catalog.>) '0'::float8
            AND coalesce($4, $2) OPERATOR(pg_catalog.<) 'Infinity'::float8) THEN
        RAISE EXCEPTION 'burst must be a finite number greater than zero'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = CASE WHEN $4 IS NULL
                                THEN pg_catalog.format('No burst was given, so it is the rate, %s.', $2)
                                ELSE pg_catalog.format('The burst given was %s.', $4) END,
                  HINT = 'Pass the capacity of the bucket, the most tokens it can hold.';
    END IF;
    IF $5 IS NOT NULL AND NOT ($5 OPERATOR(pg_catalog.>=) '0'::float8
                               AND $5 OPERATOR(pg_catalog.<=) coalesce($4, $2)) THEN
        RAISE EXCEPTION 'initial must be between zero and burst'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('The initial balance given was %s and the burst is %s.', $5, coalesce($4, $2)),
                  HINT = 'Pass how many tokens a key starts with, or NULL to start full.';
    END IF;
    IF $6 IS NULL OR NOT ($6 OPERATOR(pg_catalog.>=) '0'::float8 AND $6 OPERATOR(pg_catalog.<=) '1'::float8) THEN
        RAISE EXCEPTION 'jitter must be between 0 and 1'
            USING ERRCODE = CASE WHEN $6 IS NULL THEN 'null_value_not_allowed' ELSE 'invalid_parameter_value' END,
                  DETAIL = pg_catalog.format('The jitter given was %s.', coalesce($6::text, 'NULL')),
                  HINT = 'Pass the largest fraction retry_after may be stretched by, such as 0.1; 0 for none.';
    END IF;
    IF $7 IS NULL THEN
        RAISE EXCEPTION 'fixed_window must not be null'
            USING ERRCODE = 'null_value_not_allowed',
                  DETAIL = 'fixed_window chooses between continuous refill and fixed windows.',
                  HINT = 'Pass true for fixed windows, false (the default) for a token bucket.';
    END IF;
    IF $8 IS NOT NULL AND (NOT $7 OR NOT (start_micros OPERATOR(pg_catalog.>=) '0'::float8)) THEN
        RAISE EXCEPTION 'window_start needs fixed_window and a non-negative interval'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = CASE WHEN $7 AND $8 OPERATOR(pg_catalog.>=) '0'::interval
                                THEN pg_catalog.format('The window_start given, %s, lasts %s seconds, counting a year as 365.25 days and a month as 30 days.', $8, start_seconds)
                                ELSE pg_catalog.format('The window_start given was %s, with fixed_window %s.', $8, $7) END,
                  HINT = 'Pass the offset of the windows from midnight UTC, such as ''0 seconds'' to start them on the minute; omit it to spread keys over the window.';
    END IF;
    IF $8 IS NOT NULL AND NOT (start_micros OPERATOR(pg_catalog.<) micros_limit) THEN
        RAISE EXCEPTION 'window_start is too long'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('The window_start given, %s, lasts %s seconds; it is kept in microseconds, in a bigint, so it lasts less than 9223372036854.775808 seconds (about 292,271 years).', $8, start_seconds),
                  HINT = 'Pass an offset shorter than the period, such as ''0 seconds''.';
    END IF;
    IF $9 IS NULL OR NOT ($9 OPERATOR(pg_catalog.>=) '0'::float8 AND $9 OPERATOR(pg_catalog.<) 'Infinity'::float8)
       OR ($9 OPERATOR(pg_catalog.>) '0'::float8 AND $7) THEN
        RAISE EXCEPTION 'floor_rate must be a finite number greater than or equal to zero, without fixed_window'
            USING ERRCODE = CASE WHEN $9 IS NULL THEN 'null_value_not_allowed' ELSE 'invalid_parameter_value' END,
                  DETAIL = pg_catalog.format('The floor_rate given was %s, with fixed_window %s.', coalesce($9::text, 'NULL'), $7),
                  HINT = 'Pass the tokens per period a client still gets once its burst is spent; 0 for none.';
    END IF;
    IF $10 IS NULL OR NOT ($10 OPERATOR(pg_catalog.>=) 1 AND $10 OPERATOR(pg_catalog.<=) 64) THEN
        RAISE EXCEPTION 'shards must be between 1 and 64'
            USING ERRCODE = CASE WHEN $10 IS NULL THEN 'null_value_not_allowed' ELSE 'invalid_parameter_value' END,
                  DETAIL = pg_catalog.format('The shards given were %s.', coalesce($10::text, 'NULL')),
                  HINT = 'Split a hot key over a few rows, such as 8; 1 keeps it in one row.';
    END IF;
    IF $11 IS NULL OR NOT ($11 OPERATOR(pg_catalog.>=) '0'::float8 AND $11 OPERATOR(pg_catalog.<) 'Infinity'::float8) THEN
        RAISE EXCEPTION 'max_reserved must be a finite number greater than or equal to zero'
            USING ERRCODE = CASE WHEN $11 IS NULL THEN 'null_value_not_allowed' ELSE 'invalid_parameter_value' END,
                  DETAIL = pg_catalog.format('The max_reserved given was %s.', coalesce($11::text, 'NULL')),
                  HINT = 'Pass the most tokens a key may owe after a reservation; 0 (the default) allows none.';
    END IF;
    IF $12 IS NOT NULL THEN
        penalty_micros := pg_catalog.round(pg_catalog.date_part('epoch', $12)
                                           OPERATOR(pg_catalog.*) '1000000'::float8);
        IF NOT (penalty_micros OPERATOR(pg_catalog.>=) '0'::float8
                AND penalty_micros OPERATOR(pg_catalog.<) micros_limit) THEN
            RAISE EXCEPTION 'penalty must be an interval of zero or more'
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = pg_catalog.format('The penalty given was %s.', $12),
                      HINT = 'Pass how long a denied key stays denied, such as ''1 minute''; NULL (the default) for none.';
        END IF;
        IF penalty_micros OPERATOR(pg_catalog.>) '0'::float8 AND $10 OPERATOR(pg_catalog.>) 1 THEN
            RAISE EXCEPTION 'a policy with shards cannot have a penalty'
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = 'A penalty box holds a whole key, and the shards of a key decide one row at a time.',
                      HINT = 'Define the policy with shards => 1, or without a penalty.';
        END IF;
    END IF;
    IF $13 OPERATOR(pg_catalog.=) 'memory' AND $10 OPERATOR(pg_catalog.>) 1 THEN
        RAISE EXCEPTION 'a policy with storage ''memory'' cannot have shards'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'The memory engine serves a hot key without a row lock: there is no queue for shards to spread.',
                  HINT = 'Define the policy with shards => 1, or with storage => ''table''.';
    END IF;
    -- Before PostgreSQL 17 the memory engine has shared memory only with the
    -- library preloaded: a memory policy is refused here, when it is
    -- defined, rather than at every call.  A row written otherwise (as
    -- pg_restore writes the rows of a dump) is kept.
    IF $13 OPERATOR(pg_catalog.=) 'memory' THEN
        PERFORM @rl@require_memory_engine();
    END IF;
    -- Tokens per second, computed as the table computes them: a quotient
    -- beyond float8 (too many per microsecond, or too few per century) is
    -- reported here rather than as a bare overflow or underflow.
    BEGIN
        dividend := 'rate';
        quotient := $2 OPERATOR(pg_catalog./) seconds;
        dividend := 'floor_rate';
        quotient := $9 OPERATOR(pg_catalog./) seconds;
    EXCEPTION WHEN numeric_value_out_of_range THEN
        RAISE EXCEPTION '% per second is out of range', dividend
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('%s tokens per %s is %s tokens per second than a float8 can hold.',
                                             CASE WHEN dividend OPERATOR(pg_catalog.=) 'rate' THEN $2 ELSE $9 END, $3,
                                             CASE WHEN seconds OPERATOR(pg_catalog.<) '1'::float8 THEN 'more' ELSE 'fewer' END),
                  HINT = pg_catalog.format('Pass a %s and period that come to about 5e-324 to 1.8e308 tokens per second, or a %s of 0.',
                                           dividend, dividend);
    END;
    INSERT INTO @rl@policies AS p
        (name, rate, per, burst, initial, jitter, fixed_window, window_start, floor_rate, shards,
         max_reserved, penalty, storage, enforce, kind, lease)
    VALUES ($1, $2, $3, coalesce($4, $2), $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, 'bucket', NULL)
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
\set rl_define :"rl_schema" .rate_limit_define( :rl_define_types )
COMMENT ON FUNCTION :rl_define IS
    'defines (or replaces) the policy name: rate tokens per period per, holding at most burst (default: rate); new keys start with initial tokens (default: burst); retry_after gets a per-key jitter of up to the fraction jitter; fixed_window adds the rate at once at each window of length per, starting at window_start (default: spread by key); floor_rate tokens per period are still granted once the burst is spent; shards splits each key over that many rows for hot keys; a key may owe up to max_reserved tokens after a reservation; once a take is denied, penalty keeps the key denied that long; storage ''memory'' keeps the keys in shared memory instead of a table; enforce false makes it report-only: every call is allowed, what it would deny counted; returns the stored policy';
REVOKE ALL ON FUNCTION :rl_define FROM PUBLIC;

CREATE FUNCTION :"rl_schema".rate_limit_drop(name text)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF $1 IS NULL THEN
        RAISE EXCEPTION 'name must not be null'
            USING ERRCODE = 'null_value_not_allowed',
                  DETAIL = 'rate_limit_drop() requires a value for name.',
                  HINT = 'Pass the name of the policy to remove.';
    END IF;
    -- Its leases go with it (a policy defined again under the name would
    -- count them); its buckets stay.
    PERFORM @rl@drop_leases($1);
    DELETE FROM @rl@policies AS p WHERE p.name OPERATOR(pg_catalog.=) $1;
    RETURN FOUND;
END
$$;
COMMENT ON FUNCTION :"rl_schema".rate_limit_drop(text) IS
    'removes the policy name and its leases, in the caller''s transaction; true if it existed (buckets already used stay until reset)';
REVOKE ALL ON FUNCTION :"rl_schema".rate_limit_drop(text) FROM PUBLIC;

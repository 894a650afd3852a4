-- portable/core.sql
--
-- The token-bucket algebra of src/core/token_bucket.cpp in PL/pgSQL, for
-- servers that cannot load the C module.  The same formulas in the same
-- order, so that both give the same float8 numbers: test/sql/native/portable_core.sql
-- compares them call by call.  Times are whole microseconds since
-- 2000-01-01 (bigint); window arithmetic that may leave bigint is done in
-- numeric.
--
-- These functions run on every call, many times over, and are called by
-- roles of every kind, superusers included: none has a SET clause (which
-- costs a call a good deal, and keeps a LANGUAGE sql function from being
-- inlined), so none may leave a name to the caller's search_path.  Every
-- operator is OPERATOR(pg_catalog.x), every function, type and table is
-- schema-qualified (the limiter's own with @extschema@, which the install
-- replaces by its schema), and the limiter's functions are called with
-- arguments of their parameters' types, so that no overload another role
-- creates can be a better match.

-- A limit: tokens per second, capacity, fixed windows (window_us > 0) and
-- their phase, floor rate, penalty box.
CREATE TYPE rl_limit AS (
    rate       float8,
    burst      float8,
    window_us  bigint,
    phase_us   bigint,
    floor_rate float8,
    penalty_us bigint);

-- A bucket's stored state: balance, the stamp refill is credited up to, and
-- the end of a penalty box (-2^63: none).
CREATE TYPE rl_bucket AS (
    tokens           float8,
    stamp_us         bigint,
    blocked_until_us bigint);

-- One call: take cost tokens, reserving (into debt) within max_reserved when
-- debt_capped and within what refill repays in max_wait seconds.
CREATE TYPE rl_request AS (
    cost         float8,
    reserve      boolean,
    debt_capped  boolean,
    max_reserved float8,
    max_wait     float8);

-- The answer: as core::Decision.
CREATE TYPE rl_decision AS (
    allowed      boolean,
    write        boolean,
    remaining    float8,
    retry_after  float8,
    reset_after  float8,
    refill_after float8,
    next         rl_bucket,
    refunded     float8);

CREATE FUNCTION rl_not_blocked() RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT '-9223372036854775808'::bigint $$;

-- a * b as C computes it, where float8 * raises 22003: a product beyond
-- float8 is ±Infinity there, and one below its least magnitude ±0.
CREATE FUNCTION rl_far_product(a float8, b float8) RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN a OPERATOR(pg_catalog.*) b;
EXCEPTION WHEN numeric_value_out_of_range THEN
    -- Both factors are finite and not zero (else there is no error):
    -- beyond float8 when their magnitudes multiply to more than 1.
    IF (pg_catalog.ln(pg_catalog.abs(a)) OPERATOR(pg_catalog.+) pg_catalog.ln(pg_catalog.abs(b))) OPERATOR(pg_catalog.>) '0'::pg_catalog.float8 THEN
        RETURN CASE WHEN (a OPERATOR(pg_catalog.<) '0'::pg_catalog.float8) OPERATOR(pg_catalog.=) (b OPERATOR(pg_catalog.<) '0'::pg_catalog.float8)
                    THEN 'Infinity'::pg_catalog.float8 ELSE '-Infinity'::pg_catalog.float8 END;
    END IF;
    RETURN CASE WHEN (a OPERATOR(pg_catalog.<) '0'::pg_catalog.float8) OPERATOR(pg_catalog.=) (b OPERATOR(pg_catalog.<) '0'::pg_catalog.float8)
                THEN '0'::pg_catalog.float8 ELSE '-0'::pg_catalog.float8 END;
END
$$;

-- a * b as C computes it: a rate times a time may leave float8's range
-- only when a factor is at one of its ends.
CREATE FUNCTION rl_product(a float8, b float8) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN pg_catalog.abs(a) OPERATOR(pg_catalog.<) '1e150'::pg_catalog.float8
                       AND (pg_catalog.abs(a) OPERATOR(pg_catalog.>) '1e-150'::pg_catalog.float8 OR a OPERATOR(pg_catalog.=) '0'::pg_catalog.float8)
                       AND pg_catalog.abs(b) OPERATOR(pg_catalog.<) '1e150'::pg_catalog.float8
                       AND (pg_catalog.abs(b) OPERATOR(pg_catalog.>) '1e-150'::pg_catalog.float8 OR b OPERATOR(pg_catalog.=) '0'::pg_catalog.float8)
                  THEN a OPERATOR(pg_catalog.*) b ELSE @extschema@.rl_far_product(a, b) END $$;

-- Tokens credited for elapsed_us: the one refill formula.
CREATE FUNCTION rl_credit(rate float8, elapsed_us float8) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT @extschema@.rl_product(rate, elapsed_us OPERATOR(pg_catalog./) '1000000'::pg_catalog.float8) $$;

-- ceil((target - tokens) / rate * 1e6) as C computes it, where a step
-- beyond float8 gives Infinity (or 0) instead of an error: only for a gap
-- or a rate at the ends of the range.
CREATE FUNCTION rl_far_micros(tokens float8, target float8, rate float8) RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    gap pg_catalog.float8;
    seconds pg_catalog.float8;
BEGIN
    BEGIN
        gap := target OPERATOR(pg_catalog.-) tokens;
    EXCEPTION WHEN numeric_value_out_of_range THEN
        RETURN 'Infinity';
    END;
    BEGIN
        seconds := gap OPERATOR(pg_catalog./) rate;
    EXCEPTION WHEN numeric_value_out_of_range THEN
        seconds := CASE WHEN gap OPERATOR(pg_catalog.>) rate THEN 'Infinity'::pg_catalog.float8 ELSE '0'::pg_catalog.float8 END;
    END;
    BEGIN
        RETURN pg_catalog.ceil(seconds OPERATOR(pg_catalog.*) '1000000'::pg_catalog.float8);
    EXCEPTION WHEN numeric_value_out_of_range THEN
        RETURN 'Infinity';
    END;
END
$$;

-- Whole microseconds until tokens reach target at rate ('Infinity': never).
CREATE FUNCTION rl_micros_until(tokens float8, target float8, rate float8) RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    us pg_catalog.float8;
BEGIN
    IF NOT (tokens OPERATOR(pg_catalog.<) target) THEN RETURN 0; END IF;
    IF NOT (rate OPERATOR(pg_catalog.>) '0'::pg_catalog.float8) THEN RETURN 'Infinity'; END IF;
    IF tokens OPERATOR(pg_catalog.>) '-1e150'::pg_catalog.float8 AND target OPERATOR(pg_catalog.<) '1e150'::pg_catalog.float8
       AND rate OPERATOR(pg_catalog.>) '1e-150'::pg_catalog.float8 THEN
        us := pg_catalog.ceil(((target OPERATOR(pg_catalog.-) tokens) OPERATOR(pg_catalog./) rate) OPERATOR(pg_catalog.*) '1000000'::pg_catalog.float8);
    ELSE
        us := @extschema@.rl_far_micros(tokens, target, rate);
    END IF;
    IF NOT (us OPERATOR(pg_catalog.<) '9007199254740992'::pg_catalog.float8) THEN
        -- Far future: finite (a positive rate gets there), at most the
        -- largest float8.
        RETURN CASE WHEN us OPERATOR(pg_catalog.<) 'Infinity'::pg_catalog.float8 THEN us
                    ELSE '1.7976931348623157e308'::pg_catalog.float8 END;
    END IF;
    FOR i IN 1..8 LOOP
        EXIT WHEN NOT ((tokens OPERATOR(pg_catalog.+) @extschema@.rl_credit(rate, us)) OPERATOR(pg_catalog.<) target);
        us := us OPERATOR(pg_catalog.+) '1'::pg_catalog.float8;
    END LOOP;
    RETURN us;
END
$$;

CREATE FUNCTION rl_add_waits(a float8, b float8) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN a OPERATOR(pg_catalog.=) 'Infinity'::pg_catalog.float8 OR b OPERATOR(pg_catalog.=) 'Infinity'::pg_catalog.float8
                  THEN 'Infinity'::pg_catalog.float8
                  WHEN a OPERATOR(pg_catalog.>) ('1.7976931348623157e308'::pg_catalog.float8 OPERATOR(pg_catalog.-) b)
                  THEN '1.7976931348623157e308'::pg_catalog.float8
                  ELSE a OPERATOR(pg_catalog.+) b END $$;

-- floor(a / b) for b > 0.
CREATE FUNCTION rl_floor_div(a numeric, b numeric) RETURNS numeric
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN pg_catalog.mod(a, b) OPERATOR(pg_catalog.<>) '0'::numeric AND a OPERATOR(pg_catalog.<) '0'::numeric
                  THEN pg_catalog.div(a, b) OPERATOR(pg_catalog.-) '1'::numeric
                  ELSE pg_catalog.div(a, b) END $$;

CREATE FUNCTION rl_next_boundary(l rl_limit, us bigint) RETURNS numeric
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT l.phase_us::numeric
             OPERATOR(pg_catalog.+) ((@extschema@.rl_floor_div(us::numeric OPERATOR(pg_catalog.-) l.phase_us::numeric, l.window_us::numeric)
                  OPERATOR(pg_catalog.+) '1'::numeric) OPERATOR(pg_catalog.*) l.window_us::numeric) $$;

CREATE FUNCTION rl_boundaries_crossed(l rl_limit, from_us bigint, to_us bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT (@extschema@.rl_floor_div(to_us::numeric OPERATOR(pg_catalog.-) l.phase_us::numeric, l.window_us::numeric)
              OPERATOR(pg_catalog.-) @extschema@.rl_floor_div(from_us::numeric OPERATOR(pg_catalog.-) l.phase_us::numeric, l.window_us::numeric))::bigint $$;

CREATE FUNCTION rl_per_window(l rl_limit) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT @extschema@.rl_product(l.rate, l.window_us::pg_catalog.float8 OPERATOR(pg_catalog./) '1000000'::pg_catalog.float8) $$;

CREATE FUNCTION rl_floor_level(l rl_limit) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN l.floor_rate OPERATOR(pg_catalog.<) l.burst THEN l.floor_rate ELSE l.burst END $$;

CREATE FUNCTION rl_fast_rate(l rl_limit) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN l.floor_rate OPERATOR(pg_catalog.>) l.rate THEN l.floor_rate ELSE l.rate END $$;

CREATE FUNCTION rl_refills(l rl_limit) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN l.window_us OPERATOR(pg_catalog.>) '0'::bigint THEN @extschema@.rl_per_window(l) OPERATOR(pg_catalog.>) '0'::pg_catalog.float8
                  ELSE l.rate OPERATOR(pg_catalog.>) '0'::pg_catalog.float8 OR l.floor_rate OPERATOR(pg_catalog.>) '0'::pg_catalog.float8 END $$;

CREATE FUNCTION rl_restart_micros(l rl_limit) RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    hour CONSTANT pg_catalog.float8 := '3600000000'::pg_catalog.float8;
    rate pg_catalog.float8 := @extschema@.rl_fast_rate(l);
    fill pg_catalog.float8;
BEGIN
    IF NOT (rate OPERATOR(pg_catalog.>) '0'::pg_catalog.float8) THEN RETURN 'Infinity'; END IF;
    IF rate OPERATOR(pg_catalog.>) '1e-150'::pg_catalog.float8 AND rate OPERATOR(pg_catalog.<) '1e150'::pg_catalog.float8
       AND l.burst OPERATOR(pg_catalog.>) '1e-150'::pg_catalog.float8 AND l.burst OPERATOR(pg_catalog.<) '1e150'::pg_catalog.float8 THEN
        fill := (l.burst OPERATOR(pg_catalog./) rate) OPERATOR(pg_catalog.*) '1000000'::pg_catalog.float8;
    ELSE
        fill := @extschema@.rl_far_micros('0'::pg_catalog.float8, l.burst, rate);
    END IF;
    IF l.window_us OPERATOR(pg_catalog.>) '0'::bigint THEN
        fill := l.window_us::pg_catalog.float8
                OPERATOR(pg_catalog.*) (pg_catalog.ceil(fill OPERATOR(pg_catalog./) l.window_us::pg_catalog.float8) OPERATOR(pg_catalog.+) '1'::pg_catalog.float8);
    END IF;
    RETURN CASE WHEN fill OPERATOR(pg_catalog.>) hour THEN fill ELSE hour END;
END
$$;

CREATE FUNCTION rl_credit_continuous(l rl_limit, tokens float8, elapsed_us float8) RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    level pg_catalog.float8 := @extschema@.rl_floor_level(l);
    fast pg_catalog.float8;
    to_level_us pg_catalog.float8;
    added pg_catalog.float8;
BEGIN
    IF l.floor_rate OPERATOR(pg_catalog.>) '0'::pg_catalog.float8 AND tokens OPERATOR(pg_catalog.<) level THEN
        fast := @extschema@.rl_fast_rate(l);
        to_level_us := ((level OPERATOR(pg_catalog.-) tokens) OPERATOR(pg_catalog./) fast) OPERATOR(pg_catalog.*) '1000000'::pg_catalog.float8;
        IF elapsed_us OPERATOR(pg_catalog.<=) to_level_us THEN
            RETURN tokens OPERATOR(pg_catalog.+) @extschema@.rl_credit(fast, elapsed_us);
        END IF;
        tokens := level;
        elapsed_us := elapsed_us OPERATOR(pg_catalog.-) to_level_us;
    END IF;
    added := @extschema@.rl_credit(l.rate, elapsed_us);
    RETURN CASE WHEN added OPERATOR(pg_catalog.>=) (l.burst OPERATOR(pg_catalog.-) tokens) THEN l.burst ELSE tokens OPERATOR(pg_catalog.+) added END;
END
$$;

-- Credits refill up to now_us (core::Refill).
CREATE FUNCTION rl_refill(b rl_bucket, l rl_limit, now_us bigint) RETURNS rl_bucket
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    tokens pg_catalog.float8 := CASE WHEN b.tokens OPERATOR(pg_catalog.<) l.burst THEN b.tokens ELSE l.burst END;
    windows bigint;
    added pg_catalog.float8;
BEGIN
    IF now_us OPERATOR(pg_catalog.<=) b.stamp_us THEN
        IF (b.stamp_us::pg_catalog.float8 OPERATOR(pg_catalog.-) now_us::pg_catalog.float8) OPERATOR(pg_catalog.>) @extschema@.rl_restart_micros(l) THEN
            RETURN ROW(tokens, now_us, b.blocked_until_us)::@extschema@.rl_bucket;
        END IF;
        RETURN ROW(tokens, b.stamp_us, b.blocked_until_us)::@extschema@.rl_bucket;
    END IF;
    IF l.window_us OPERATOR(pg_catalog.>) '0'::bigint THEN
        windows := @extschema@.rl_boundaries_crossed(l, b.stamp_us, now_us);
        IF windows OPERATOR(pg_catalog.>) '0'::bigint THEN
            added := @extschema@.rl_product(@extschema@.rl_per_window(l), windows::pg_catalog.float8);
            tokens := CASE WHEN added OPERATOR(pg_catalog.>=) (l.burst OPERATOR(pg_catalog.-) tokens) THEN l.burst ELSE tokens OPERATOR(pg_catalog.+) added END;
        END IF;
        RETURN ROW(tokens, now_us, b.blocked_until_us)::@extschema@.rl_bucket;
    END IF;
    -- An elapsed time beyond bigint: full (as __builtin_sub_overflow).
    IF b.stamp_us OPERATOR(pg_catalog.<) '0'::bigint AND now_us OPERATOR(pg_catalog.>) (b.stamp_us OPERATOR(pg_catalog.+) '9223372036854775807'::bigint) THEN
        RETURN ROW(l.burst, now_us, b.blocked_until_us)::@extschema@.rl_bucket;
    END IF;
    tokens := @extschema@.rl_credit_continuous(l, tokens, (now_us OPERATOR(pg_catalog.-) b.stamp_us)::pg_catalog.float8);
    IF tokens OPERATOR(pg_catalog.>) l.burst THEN tokens := l.burst; END IF;
    RETURN ROW(tokens, now_us, b.blocked_until_us)::@extschema@.rl_bucket;
END
$$;

CREATE FUNCTION rl_repaid_within(l rl_limit, seconds float8) RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    micros pg_catalog.float8;
    win pg_catalog.float8;
    windows pg_catalog.float8;
    usable pg_catalog.float8;
BEGIN
    IF NOT (seconds OPERATOR(pg_catalog.<) 'Infinity'::pg_catalog.float8) THEN RETURN 'Infinity'; END IF;
    IF l.window_us OPERATOR(pg_catalog.>) '0'::bigint THEN
        micros := pg_catalog.floor(seconds OPERATOR(pg_catalog.*) '1000000'::pg_catalog.float8);
        win := l.window_us::pg_catalog.float8;
        windows := pg_catalog.floor(micros OPERATOR(pg_catalog./) win);
        IF (windows OPERATOR(pg_catalog.*) win) OPERATOR(pg_catalog.>) micros THEN windows := windows OPERATOR(pg_catalog.-) '1'::pg_catalog.float8; END IF;
        RETURN CASE WHEN windows OPERATOR(pg_catalog.>) '0'::pg_catalog.float8 THEN @extschema@.rl_product(windows, @extschema@.rl_per_window(l))
                    ELSE '0'::pg_catalog.float8 END;
    END IF;
    usable := seconds OPERATOR(pg_catalog.-) ('16'::pg_catalog.float8 OPERATOR(pg_catalog./) '1000000'::pg_catalog.float8);
    RETURN CASE WHEN usable OPERATOR(pg_catalog.>) '0'::pg_catalog.float8 THEN @extschema@.rl_product(@extschema@.rl_fast_rate(l), usable)
                ELSE '0'::pg_catalog.float8 END;
END
$$;

CREATE FUNCTION rl_lagging(r rl_request, lag_us float8) RETURNS rl_request
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    left_s pg_catalog.float8;
BEGIN
    IF lag_us OPERATOR(pg_catalog.>) '0'::pg_catalog.float8 AND r.max_wait OPERATOR(pg_catalog.<) 'Infinity'::pg_catalog.float8 THEN
        left_s := r.max_wait OPERATOR(pg_catalog.-) (lag_us OPERATOR(pg_catalog./) '1000000'::pg_catalog.float8);
        r.max_wait := CASE WHEN left_s OPERATOR(pg_catalog.>) '0'::pg_catalog.float8 THEN left_s ELSE '0'::pg_catalog.float8 END;
    END IF;
    RETURN r;
END
$$;

CREATE FUNCTION rl_lag_micros(refilled rl_bucket, at_us bigint) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN refilled.stamp_us OPERATOR(pg_catalog.>) at_us
                  THEN refilled.stamp_us::pg_catalog.float8 OPERATOR(pg_catalog.-) at_us::pg_catalog.float8
                  ELSE '0'::pg_catalog.float8 END $$;

CREATE FUNCTION rl_debt_cap(l rl_limit, r rl_request) RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    by_time pg_catalog.float8;
BEGIN
    IF NOT r.reserve THEN RETURN 0; END IF;
    by_time := @extschema@.rl_repaid_within(l, r.max_wait);
    IF r.debt_capped AND r.max_reserved OPERATOR(pg_catalog.<) by_time THEN RETURN r.max_reserved; END IF;
    RETURN by_time;
END
$$;

-- a - b as C computes it: beyond float8, -Infinity or Infinity instead of
-- an error.
CREATE FUNCTION rl_difference(a float8, b float8) RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN a OPERATOR(pg_catalog.-) b;
EXCEPTION WHEN numeric_value_out_of_range THEN
    RETURN CASE WHEN a OPERATOR(pg_catalog.>) b THEN 'Infinity'::pg_catalog.float8 ELSE '-Infinity'::pg_catalog.float8 END;
END
$$;

CREATE FUNCTION rl_admits(tokens float8, l rl_limit, r rl_request) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    after pg_catalog.float8 := CASE WHEN tokens OPERATOR(pg_catalog.>) '-1e300'::pg_catalog.float8
                                         AND r.cost OPERATOR(pg_catalog.<) '1e300'::pg_catalog.float8
                                    THEN tokens OPERATOR(pg_catalog.-) r.cost ELSE @extschema@.rl_difference(tokens, r.cost) END;
BEGIN
    IF after OPERATOR(pg_catalog.>=) '0'::pg_catalog.float8 THEN RETURN true; END IF;
    IF after OPERATOR(pg_catalog.=) '-Infinity'::pg_catalog.float8 OR after OPERATOR(pg_catalog.=) 'NaN'::pg_catalog.float8 THEN RETURN false; END IF;
    IF NOT r.reserve OR NOT @extschema@.rl_refills(l) THEN RETURN false; END IF;
    RETURN (OPERATOR(pg_catalog.-) after) OPERATOR(pg_catalog.<=) @extschema@.rl_debt_cap(l, r);
END
$$;

CREATE FUNCTION rl_estimate_micros(l rl_limit, stamp_us bigint, now_us bigint, tokens float8,
                                   target float8) RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    lag_us pg_catalog.float8 := CASE WHEN now_us OPERATOR(pg_catalog.<) stamp_us
                                     THEN stamp_us::pg_catalog.float8 OPERATOR(pg_catalog.-) now_us::pg_catalog.float8
                                     ELSE '0'::pg_catalog.float8 END;
    level pg_catalog.float8;
    fast pg_catalog.float8;
    per_window pg_catalog.float8;
    windows pg_catalog.float8;
    later pg_catalog.float8;
BEGIN
    IF l.window_us OPERATOR(pg_catalog.<=) '0'::bigint THEN
        level := @extschema@.rl_floor_level(l);
        IF NOT (l.floor_rate OPERATOR(pg_catalog.>) '0'::pg_catalog.float8) OR NOT (tokens OPERATOR(pg_catalog.<) level) THEN
            RETURN @extschema@.rl_add_waits(lag_us, @extschema@.rl_micros_until(tokens, target, l.rate));
        END IF;
        fast := @extschema@.rl_fast_rate(l);
        IF target OPERATOR(pg_catalog.<=) level THEN
            RETURN @extschema@.rl_add_waits(lag_us, @extschema@.rl_micros_until(tokens, target, fast));
        END IF;
        RETURN @extschema@.rl_add_waits(lag_us, @extschema@.rl_add_waits(@extschema@.rl_micros_until(tokens, level, fast),
                                                   @extschema@.rl_micros_until(level, target, l.rate)));
    END IF;
    IF NOT (tokens OPERATOR(pg_catalog.<) target) THEN RETURN 0; END IF;
    per_window := @extschema@.rl_per_window(l);
    IF NOT (per_window OPERATOR(pg_catalog.>) '0'::pg_catalog.float8) THEN RETURN 'Infinity'; END IF;
    windows := pg_catalog.ceil((target OPERATOR(pg_catalog.-) tokens) OPERATOR(pg_catalog./) per_window);
    later := (windows OPERATOR(pg_catalog.-) '1'::pg_catalog.float8) OPERATOR(pg_catalog.*) l.window_us::pg_catalog.float8;
    RETURN @extschema@.rl_add_waits((@extschema@.rl_next_boundary(l, CASE WHEN stamp_us OPERATOR(pg_catalog.>) now_us THEN stamp_us ELSE now_us END)
                          OPERATOR(pg_catalog.-) now_us::numeric)::pg_catalog.float8, later);
END
$$;

-- Whether the wait condition holds of refilled bucket b at at_us: the
-- balance reaches level (r NULL), or request r is admitted.
CREATE FUNCTION rl_holds(b rl_bucket, at_us bigint, l rl_limit, level float8, r rl_request)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN r IS NULL THEN b.tokens OPERATOR(pg_catalog.>=) level
                  ELSE @extschema@.rl_admits(b.tokens, l, @extschema@.rl_lagging(r, @extschema@.rl_lag_micros(b, at_us))) END $$;

-- The smallest whole-µs wait after which the condition holds (core::WaitMicros).
CREATE FUNCTION rl_wait_micros(from_b rl_bucket, l rl_limit, now_us bigint, estimate_us float8,
                               level float8, r rl_request) RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    max_us CONSTANT numeric := '9223372036854775807'::numeric;
    first numeric;
    wait_n numeric;
    wait bigint;
    at bigint;
BEGIN
    IF NOT (estimate_us OPERATOR(pg_catalog.<) '9007199254740992'::pg_catalog.float8) THEN RETURN estimate_us; END IF;
    IF l.window_us OPERATOR(pg_catalog.>) '0'::bigint THEN
        first := pg_catalog.trunc(estimate_us)::numeric OPERATOR(pg_catalog.-) ('2'::numeric OPERATOR(pg_catalog.*) l.window_us::numeric);
        FOR k IN 0..5 LOOP
            wait_n := first OPERATOR(pg_catalog.+) (k::numeric OPERATOR(pg_catalog.*) l.window_us::numeric);
            CONTINUE WHEN wait_n OPERATOR(pg_catalog.<) '1'::numeric;
            EXIT WHEN (now_us::numeric OPERATOR(pg_catalog.+) wait_n) OPERATOR(pg_catalog.>) max_us;
            at := (now_us::numeric OPERATOR(pg_catalog.+) wait_n)::bigint;
            IF @extschema@.rl_holds(@extschema@.rl_refill(from_b, l, at), at, l, level, r) THEN
                RETURN wait_n::pg_catalog.float8;
            END IF;
        END LOOP;
        RETURN estimate_us;
    END IF;
    wait := CASE WHEN estimate_us OPERATOR(pg_catalog.<) '1'::pg_catalog.float8 THEN '1'::bigint
                 ELSE pg_catalog.trunc(estimate_us)::bigint END;
    IF (now_us::numeric OPERATOR(pg_catalog.+) wait::numeric) OPERATOR(pg_catalog.>) max_us THEN RETURN wait::pg_catalog.float8; END IF;
    at := now_us OPERATOR(pg_catalog.+) wait;
    FOR i IN 1..64 LOOP
        EXIT WHEN NOT (wait OPERATOR(pg_catalog.>) '1'::bigint
                       AND @extschema@.rl_holds(@extschema@.rl_refill(from_b, l, at OPERATOR(pg_catalog.-) '1'::bigint), at OPERATOR(pg_catalog.-) '1'::bigint, l, level, r));
        wait := wait OPERATOR(pg_catalog.-) '1'::bigint;
        at := at OPERATOR(pg_catalog.-) '1'::bigint;
    END LOOP;
    FOR i IN 1..64 LOOP
        EXIT WHEN @extschema@.rl_holds(@extschema@.rl_refill(from_b, l, at), at, l, level, r);
        EXIT WHEN at::numeric OPERATOR(pg_catalog.=) max_us;
        at := at OPERATOR(pg_catalog.+) '1'::bigint;
        wait := wait OPERATOR(pg_catalog.+) '1'::bigint;
    END LOOP;
    RETURN wait::pg_catalog.float8;
END
$$;

CREATE FUNCTION rl_seconds_to_level(after_call rl_bucket, l rl_limit, now_us bigint, stamp_us bigint,
                                    tokens float8, level float8) RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF tokens OPERATOR(pg_catalog.>=) level THEN RETURN 0; END IF;
    RETURN @extschema@.rl_wait_micros(after_call, l, now_us,
                           @extschema@.rl_estimate_micros(l, stamp_us, now_us, tokens, level), level, NULL::@extschema@.rl_request)
           OPERATOR(pg_catalog./) '1000000'::pg_catalog.float8;
END
$$;

CREATE FUNCTION rl_box_end(l rl_limit, now_us bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN (now_us::numeric OPERATOR(pg_catalog.+) l.penalty_us::numeric) OPERATOR(pg_catalog.>) '9223372036854775807'::numeric
                  THEN '9223372036854775807'::bigint ELSE now_us OPERATOR(pg_catalog.+) l.penalty_us END $$;

-- Refills stored to now_us and decides the request (core::Decide).
CREATE FUNCTION rl_decide(stored rl_bucket, l rl_limit, r rl_request, now_us bigint)
RETURNS rl_decision
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    cur @extschema@.rl_bucket := @extschema@.rl_refill(stored, l, now_us);
    restarted boolean := cur.stamp_us OPERATOR(pg_catalog.<) stored.stamp_us;
    now_r @extschema@.rl_request := @extschema@.rl_lagging(r, @extschema@.rl_lag_micros(cur, now_us));
    boxed boolean := r.cost OPERATOR(pg_catalog.>) '0'::pg_catalog.float8 AND now_us OPERATOR(pg_catalog.<) stored.blocked_until_us;
    admits boolean := @extschema@.rl_admits(cur.tokens, l, now_r);
    d @extschema@.rl_decision;
    nb @extschema@.rl_bucket;
    after_call @extschema@.rl_bucket;
    cap pg_catalog.float8;
    target pg_catalog.float8;
    box pg_catalog.float8;
BEGIN
    d.allowed := NOT boxed AND admits;
    IF d.allowed THEN
        d.remaining := cur.tokens OPERATOR(pg_catalog.-) r.cost;
        d.write := r.cost OPERATOR(pg_catalog.>) '0'::pg_catalog.float8 OR restarted;
        nb := ROW(d.remaining, cur.stamp_us, cur.blocked_until_us)::@extschema@.rl_bucket;
    ELSE
        d.remaining := cur.tokens;
        nb := cur;
        IF NOT boxed AND l.penalty_us OPERATOR(pg_catalog.>) '0'::bigint AND r.cost OPERATOR(pg_catalog.>) '0'::pg_catalog.float8 THEN
            nb.blocked_until_us := @extschema@.rl_box_end(l, now_us);
            d.write := true;
        ELSE
            d.write := restarted;
        END IF;
    END IF;
    d.next := nb;
    after_call := CASE WHEN d.write OR d.allowed THEN nb ELSE stored END;
    IF d.allowed THEN
        d.retry_after := @extschema@.rl_seconds_to_level(after_call, l, now_us, cur.stamp_us, d.remaining,
                                              '0'::pg_catalog.float8);
    ELSE
        -- Denied by the box alone: the box's end is the wait.
        IF admits THEN
            d.retry_after := '0'::pg_catalog.float8;
        ELSE
            cap := CASE WHEN @extschema@.rl_refills(l) THEN @extschema@.rl_debt_cap(l, now_r) ELSE '0'::pg_catalog.float8 END;
            target := CASE WHEN cap OPERATOR(pg_catalog.<) 'Infinity'::pg_catalog.float8 THEN r.cost OPERATOR(pg_catalog.-) cap ELSE r.cost END;
            d.retry_after := @extschema@.rl_wait_micros(after_call, l, now_us,
                                             @extschema@.rl_estimate_micros(l, cur.stamp_us, now_us, d.remaining, target),
                                             NULL::pg_catalog.float8, r)
                             OPERATOR(pg_catalog./) '1000000'::pg_catalog.float8;
        END IF;
        IF nb.blocked_until_us OPERATOR(pg_catalog.>) now_us THEN
            box := (nb.blocked_until_us::pg_catalog.float8 OPERATOR(pg_catalog.-) now_us::pg_catalog.float8)
                   OPERATOR(pg_catalog./) '1000000'::pg_catalog.float8;
            IF box OPERATOR(pg_catalog.>) d.retry_after THEN d.retry_after := box; END IF;
        END IF;
    END IF;
    d.reset_after := @extschema@.rl_seconds_to_level(after_call, l, now_us, cur.stamp_us, d.remaining, l.burst);
    d.refill_after := @extschema@.rl_seconds_to_level(after_call, l, now_us, cur.stamp_us, d.remaining,
                                           @extschema@.rl_next_whole_token(d.remaining, l.burst));
    RETURN d;
END
$$;

-- Gives amount tokens back after refilling to now_us, capped at burst
-- (core::Refund).
CREATE FUNCTION rl_refund(stored rl_bucket, l rl_limit, amount float8, now_us bigint)
RETURNS rl_decision
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    cur @extschema@.rl_bucket := @extschema@.rl_refill(stored, l, now_us);
    tokens pg_catalog.float8 := cur.tokens OPERATOR(pg_catalog.+) amount;
    d @extschema@.rl_decision;
BEGIN
    IF tokens OPERATOR(pg_catalog.>) l.burst THEN
        tokens := l.burst;
        d.refunded := l.burst OPERATOR(pg_catalog.-) cur.tokens;
    ELSE
        d.refunded := amount;
    END IF;
    d.allowed := true;
    d.remaining := tokens;
    d.next := ROW(tokens, cur.stamp_us, cur.blocked_until_us)::@extschema@.rl_bucket;
    d.write := tokens OPERATOR(pg_catalog.<>) stored.tokens OR cur.stamp_us OPERATOR(pg_catalog.<>) stored.stamp_us;
    d.retry_after := @extschema@.rl_seconds_to_level(d.next, l, now_us, cur.stamp_us, tokens, '0'::pg_catalog.float8);
    d.reset_after := @extschema@.rl_seconds_to_level(d.next, l, now_us, cur.stamp_us, tokens, l.burst);
    d.refill_after := @extschema@.rl_seconds_to_level(d.next, l, now_us, cur.stamp_us, tokens,
                                           @extschema@.rl_next_whole_token(tokens, l.burst));
    RETURN d;
END
$$;

-- When the bucket a decision made at now_us stored is full again and out of
-- any penalty box (core::FullAtMicros); 2^63 - 1: never.
CREATE FUNCTION rl_full_at(d rl_decision, now_us bigint) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    x pg_catalog.float8 := CASE WHEN d.reset_after OPERATOR(pg_catalog.<) '1e300'::pg_catalog.float8
                                THEN d.reset_after OPERATOR(pg_catalog.*) '1000000'::pg_catalog.float8
                                ELSE 'Infinity'::pg_catalog.float8 END;
    -- Halves away from zero, as std::round (round() on float8 goes to even).
    wait_us pg_catalog.float8 := CASE WHEN (x OPERATOR(pg_catalog.-) pg_catalog.floor(x)) OPERATOR(pg_catalog.>=) '0.5'::pg_catalog.float8
                                      THEN pg_catalog.ceil(x) ELSE pg_catalog.floor(x) END;
    at numeric;
BEGIN
    IF NOT (wait_us OPERATOR(pg_catalog.<) '9007199254740992'::pg_catalog.float8) THEN RETURN '9223372036854775807'::bigint; END IF;
    at := now_us::numeric OPERATOR(pg_catalog.+) wait_us::numeric;
    IF at OPERATOR(pg_catalog.>) '9223372036854775807'::numeric THEN RETURN '9223372036854775807'::bigint; END IF;
    RETURN greatest(at::bigint, (d.next).blocked_until_us);
END
$$;

-- Whether forgetting stored at now_us changes no later answer (core::IsFull).
CREATE FUNCTION rl_is_full(stored rl_bucket, l rl_limit, now_us bigint) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT stored.stamp_us OPERATOR(pg_catalog.<=) now_us AND stored.blocked_until_us OPERATOR(pg_catalog.<=) now_us
             AND (@extschema@.rl_refill(stored, l, now_us)).tokens OPERATOR(pg_catalog.>=) l.burst $$;

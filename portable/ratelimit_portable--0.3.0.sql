-- ratelimit_portable--0.3.0.sql: made by portable/extension-script from the files of portable/

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION ratelimit_portable" to load this file. \quit

-- portable/ratelimit.sql
--
-- The limiter in SQL and PL/pgSQL only, for servers that cannot load its C
-- module: run it with psql into the schema of your choice (the first of
-- search_path), as any role that may create objects there.
--
--   psql -v ON_ERROR_STOP=1 -c 'SET search_path = app' -f portable/ratelimit.sql
--
-- The same API as the native extension, with the same arguments, result
-- rows, SQLSTATEs and messages; the refill algebra is the native one's,
-- number for number (core.sql).  Bucket state is a table in that schema,
-- read and written with ordinary SQL, so a concurrent update of the same
-- bucket under REPEATABLE READ or SERIALIZABLE fails with 40001 (retry the
-- transaction), where the native extension never fails.  The functions run
-- with the rights of the role that ran this script (SECURITY DEFINER): the
-- tables are theirs alone, and the functions are the interface.
--
-- No routine resolves a name or an operator through its caller's
-- search_path, nor finds one that another role could put in this schema.
-- A routine either has a SET search_path = pg_catalog, pg_temp clause (the
-- SECURITY DEFINER functions, and those that run at most a few times a
-- call or only to raise an error), or, for speed, has none and writes
-- every operator as OPERATOR(pg_catalog.x) and every function, type and
-- table schema-qualified (the algebra and the other helpers on every
-- call's way: a SET clause costs each call of a function a good deal, and
-- keeps a LANGUAGE sql function from being inlined).  Either way the
-- limiter's own objects are named @extschema@.name, which the extension's
-- install replaces by the schema, and which this script replaces once
-- every routine is created (created unchecked, checked then); and the
-- limiter's own functions get arguments of their parameters' own types
-- (or text literals), so that no overload can match better.  PUBLIC may
-- execute the API only, and rl_purge_batch, which rate_limit_purge calls
-- with its caller's rights.


-- Every function runs with the rights of the role that installs it and
-- calls the others by name: a schema where every role may create objects
-- (public, before PostgreSQL 15) would let any of them put a function or an
-- operator in the place of one of these.
DO $$
BEGIN
    IF pg_catalog.has_schema_privilege('public', pg_catalog.current_schema(), 'CREATE') THEN
        RAISE EXCEPTION 'schema "%" lets every role create objects', pg_catalog.current_schema()
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'The limiter''s functions run with the rights of the role that installs them and call each other by name, so a function or an operator that another role created in the schema could run in their place.',
                  HINT = 'Install it into a schema of its own, such as one made by CREATE SCHEMA limits, or revoke CREATE on this schema from PUBLIC.';
    END IF;
END
$$;

-- portable/core.sql
--
-- The token-bucket algebra of src/core/token_bucket.cpp in PL/pgSQL, for
-- servers that cannot load the C module.  The same formulas in the same
-- order, so that both give the same float8 numbers: test/sql/portable_core.sql
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

CREATE FUNCTION rl_next_whole_token(tokens float8, burst float8) RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    whole pg_catalog.float8 := CASE WHEN tokens OPERATOR(pg_catalog.>) '0'::pg_catalog.float8 THEN pg_catalog.floor(tokens)
                                    ELSE '0'::pg_catalog.float8 END;
    next pg_catalog.float8 := whole OPERATOR(pg_catalog.+) '1'::pg_catalog.float8;
BEGIN
    IF NOT (next OPERATOR(pg_catalog.>) tokens) THEN
        -- Beyond 2^53 a token more is not representable: the next float8.
        next := tokens OPERATOR(pg_catalog.+) (tokens OPERATOR(pg_catalog.*) '2.220446049250313e-16'::pg_catalog.float8);
    END IF;
    RETURN CASE WHEN next OPERATOR(pg_catalog.<) burst THEN next ELSE burst END;
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
-- portable/errors.sql
--
-- The user-facing errors of src/pg/errors.cpp in PL/pgSQL, for servers that
-- cannot load the C module: each function raises what its C counterpart
-- raises, with the same SQLSTATE, message, detail and hint.  Numbers are
-- shown as float8::text shows them (float8out, as the C module's Show), and
-- intervals as interval::text.  Needs the types and rl_debt_cap of core.sql,
-- run before it.  The reports run only on the way to an error: each has
-- its search_path set to pg_catalog and names the limiter's own objects
-- with @extschema@.  The checks on every call's way (rl_check_request,
-- rl_check_name_and_key) have no SET clause and qualify all they name, as
-- core.sql does.
--
-- The functions are STABLE, not IMMUTABLE: a call of an immutable function
-- on constants is evaluated when its statement is planned, and would raise
-- its error wherever the statement merely mentions it.

-- ReportCostExceedsTimedDebtCap (kCostExceedsDebtCap of a call that takes max_wait)
CREATE FUNCTION rl_report_cost_exceeds_timed_debt_cap(l rl_limit, r rl_request, form text)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    untimed @extschema@.rl_request := r;
    repaid float8;
    owner text := CASE WHEN form = 'policy' THEN 'the policy''s max_reserved'
                       ELSE 'max_reserved' END;
    tokens text;
    advice text;
BEGIN
    untimed.debt_capped := false;
    repaid := @extschema@.rl_debt_cap(l, untimed);
    tokens := CASE WHEN r.debt_capped THEN pg_catalog.format('%s is %s', owner, r.max_reserved)
                   ELSE pg_catalog.format('%s is not given', owner) END;
    -- max_reserved > 0 as C compares: NaN is not (float8 > counts it greater).
    advice := CASE
        WHEN form = 'per_period' THEN
            'Lower cost, pass a longer max_wait, or raise burst or max_reserved.'
        WHEN r.max_reserved > 0 AND r.max_reserved <> 'NaN'::float8 THEN
            'Lower cost, pass a longer max_wait, or define the policy with a larger burst or max_reserved.'
        ELSE
            'The policy allows no reserved debt: define it with max_reserved to reserve, raise its burst, or lower cost.'
        END;
    RAISE EXCEPTION 'cost exceeds burst plus the debt allowed'
        USING ERRCODE = 'invalid_parameter_value',
              DETAIL = pg_catalog.format(
                  'A cost of %s can never be taken from a bucket of burst %s that may owe at most %s tokens: %s, and refill repays %s tokens within the max_wait of %s seconds.',
                  r.cost, l.burst, @extschema@.rl_debt_cap(l, r), tokens, repaid, r.max_wait),
              HINT = advice;
END
$$;

-- ReportInvalidRequest; status: 'cost_invalid' ... 'max_wait_invalid' (core::Status)
CREATE FUNCTION rl_report_invalid_request(status text, l rl_limit, r rl_request, form text,
                                          rate float8)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    CASE status
    WHEN 'cost_invalid' THEN
        RAISE EXCEPTION 'cost must be a finite number greater than or equal to zero'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('The cost given was %s.', r.cost),
                  HINT = 'Pass the number of tokens the call needs; a cost of 0 only looks at the bucket.';
    WHEN 'rate_invalid' THEN
        RAISE EXCEPTION 'rate must be a finite number greater than or equal to zero'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('The rate given was %s.', rate),
                  HINT = CASE WHEN form = 'per_second'
                              THEN 'Pass the refill rate in tokens per second; 0 means the bucket never refills.'
                              ELSE 'Pass how many tokens refill per period; 0 means the bucket never refills.'
                              END;
    WHEN 'burst_invalid' THEN
        RAISE EXCEPTION 'burst must be a finite number greater than zero'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('The burst given was %s.', l.burst),
                  HINT = CASE WHEN form = 'per_second'
                              THEN 'Pass the capacity of the bucket, the most tokens it can hold.'
                              ELSE 'Pass the capacity of the bucket, the most tokens it can hold; without burst it is the rate.'
                              END;
    WHEN 'max_reserved_invalid' THEN
        RAISE EXCEPTION 'max_reserved must be a finite number greater than or equal to zero'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('The max_reserved given was %s.', r.max_reserved),
                  HINT = 'Pass NULL for reserved debt without a cap.';
    WHEN 'cost_exceeds_burst' THEN
        RAISE EXCEPTION 'cost exceeds burst'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format(
                      'A cost of %s can never be taken from a bucket that holds at most %s tokens.',
                      r.cost, l.burst),
                  HINT = CASE form
                         WHEN 'per_second' THEN
                             'Raise burst, lower cost, or pass reserve => true to borrow from future refill.'
                         WHEN 'per_period' THEN
                             'Raise burst, lower cost, or pass max_wait to borrow from future refill.'
                         ELSE
                             'Raise the policy''s burst, lower cost, or define the policy with max_reserved and pass max_wait to borrow from future refill.'
                         END;
    WHEN 'cost_exceeds_debt_cap' THEN
        IF form IS DISTINCT FROM 'per_second' THEN
            PERFORM @extschema@.rl_report_cost_exceeds_timed_debt_cap(l, r, form);
        END IF;
        RAISE EXCEPTION 'cost exceeds burst plus max_reserved'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format(
                      'A cost of %s can never be taken from a bucket of burst %s that may owe at most %s tokens.',
                      r.cost, l.burst, r.max_reserved),
                  HINT = 'Raise burst or max_reserved, or lower cost.';
    WHEN 'floor_rate_invalid' THEN
        RAISE EXCEPTION 'floor rate must be a finite number greater than or equal to zero'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('The floor rate given was %s tokens per second.',
                                             l.floor_rate),
                  HINT = 'Pass 0 for no floor.';
    WHEN 'max_wait_invalid' THEN
        RAISE EXCEPTION 'max_wait must not be negative'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('The max_wait given lasts %s seconds.', r.max_wait),
                  HINT = 'Pass how long reserved work may wait to start, such as ''30 seconds''; NULL or 0 for no reservation.';
    ELSE
        NULL;
    END CASE;
    -- kOk, or no status at all: the C module's elog, with the status's number.
    RAISE EXCEPTION 'unexpected rate limit status %',
        coalesce((pg_catalog.array_position(
                      ARRAY['ok', 'cost_invalid', 'rate_invalid', 'burst_invalid',
                            'max_reserved_invalid', 'cost_exceeds_burst', 'cost_exceeds_debt_cap',
                            'floor_rate_invalid', 'max_wait_invalid'], status) - 1)::text,
                 status, 'NULL')
        USING ERRCODE = 'internal_error';
END
$$;

-- CheckRequest: core::Validate's checks in its order (CheckRequest passes l.rate as rate)
CREATE FUNCTION rl_check_request(l rl_limit, r rl_request, form text, rate float8)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
DECLARE
    cap pg_catalog.float8;
    total pg_catalog.float8;
BEGIN
    -- Finite and >= 0: NaN passes >= 0 in SQL, but not < 'Infinity'.
    IF NOT (r.cost OPERATOR(pg_catalog.>=) '0'::pg_catalog.float8 AND r.cost OPERATOR(pg_catalog.<) 'Infinity'::pg_catalog.float8) THEN
        PERFORM @extschema@.rl_report_invalid_request('cost_invalid'::pg_catalog.text, l, r, form, rate);
    END IF;
    IF NOT (l.rate OPERATOR(pg_catalog.>=) '0'::pg_catalog.float8 AND l.rate OPERATOR(pg_catalog.<) 'Infinity'::pg_catalog.float8) THEN
        PERFORM @extschema@.rl_report_invalid_request('rate_invalid'::pg_catalog.text, l, r, form, rate);
    END IF;
    IF NOT (l.burst OPERATOR(pg_catalog.>) '0'::pg_catalog.float8 AND l.burst OPERATOR(pg_catalog.<) 'Infinity'::pg_catalog.float8) THEN
        PERFORM @extschema@.rl_report_invalid_request('burst_invalid'::pg_catalog.text, l, r, form, rate);
    END IF;
    IF r.debt_capped AND NOT (r.max_reserved OPERATOR(pg_catalog.>=) '0'::pg_catalog.float8
                              AND r.max_reserved OPERATOR(pg_catalog.<) 'Infinity'::pg_catalog.float8) THEN
        PERFORM @extschema@.rl_report_invalid_request('max_reserved_invalid'::pg_catalog.text, l, r, form, rate);
    END IF;
    IF NOT (l.floor_rate OPERATOR(pg_catalog.>=) '0'::pg_catalog.float8 AND l.floor_rate OPERATOR(pg_catalog.<) 'Infinity'::pg_catalog.float8) THEN
        PERFORM @extschema@.rl_report_invalid_request('floor_rate_invalid'::pg_catalog.text, l, r, form, rate);
    END IF;
    IF NOT (r.max_wait OPERATOR(pg_catalog.>=) '0'::pg_catalog.float8 AND r.max_wait OPERATOR(pg_catalog.<>) 'NaN'::pg_catalog.float8) THEN
        PERFORM @extschema@.rl_report_invalid_request('max_wait_invalid'::pg_catalog.text, l, r, form, rate);
    END IF;
    IF NOT r.reserve AND r.cost OPERATOR(pg_catalog.>) l.burst THEN
        PERFORM @extschema@.rl_report_invalid_request('cost_exceeds_burst'::pg_catalog.text, l, r, form, rate);
    END IF;
    IF r.reserve THEN
        cap := @extschema@.rl_debt_cap(l, r);
        -- burst + cap as C adds them: a sum beyond float8 is Infinity there,
        -- where float8 + raises 22003; only that near the top of the range.
        IF l.burst OPERATOR(pg_catalog.<) '8e307'::pg_catalog.float8
           AND (cap OPERATOR(pg_catalog.<) '8e307'::pg_catalog.float8 OR cap OPERATOR(pg_catalog.=) 'Infinity'::pg_catalog.float8) THEN
            total := l.burst OPERATOR(pg_catalog.+) cap;
        ELSE
            BEGIN
                total := l.burst OPERATOR(pg_catalog.+) cap;
            EXCEPTION WHEN numeric_value_out_of_range THEN
                total := 'Infinity';
            END;
        END IF;
        IF r.cost OPERATOR(pg_catalog.>) total THEN
            PERFORM @extschema@.rl_report_invalid_request('cost_exceeds_debt_cap'::pg_catalog.text, l, r, form, rate);
        END IF;
    END IF;
END
$$;

-- ReportInvalidPeriod
CREATE FUNCTION rl_report_invalid_period(what text, given interval, seconds float8)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION '% must be a positive interval of at least a microsecond', what
        USING ERRCODE = 'invalid_parameter_value',
              DETAIL = CASE WHEN seconds > '-Infinity'::float8 AND seconds < 'Infinity'::float8
                            THEN pg_catalog.format(
                                'The %s given, %s, lasts %s seconds, counting a year as 365.25 days and a month as 30 days.',
                                what, given, seconds)
                            ELSE pg_catalog.format('The %s given was %s.', what, given)
                            END,
              HINT = 'Pass the period the rate is counted over, such as ''1 minute''.';
END
$$;

-- ReportRateOutOfRange
CREATE FUNCTION rl_report_rate_out_of_range(rate float8, per interval)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'rate per second is out of range'
        USING ERRCODE = 'invalid_parameter_value',
              DETAIL = pg_catalog.format(
                  '%s tokens per %s is more or fewer tokens per second than a float8 can hold.',
                  rate, per),
              HINT = 'Pass a rate and period that come to about 5e-324 to 1.8e308 tokens per second, or a rate of 0.';
END
$$;

-- ReportNegativeMaxWait
CREATE FUNCTION rl_report_negative_max_wait(given interval)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'max_wait must not be negative'
        USING ERRCODE = 'invalid_parameter_value',
              DETAIL = pg_catalog.format('The max_wait given was %s.', given),
              HINT = 'Pass how long reserved work may wait to start, such as ''30 seconds''; NULL or 0 for no reservation.';
END
$$;

-- ReportNullArgument
CREATE FUNCTION rl_report_null_argument(function_name text, argument text, hint text)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION '% must not be null', argument
        USING ERRCODE = 'null_value_not_allowed',
              DETAIL = pg_catalog.format('%s() requires a value for %s.', function_name, argument),
              HINT = hint;
END
$$;

-- ReportEmptyName
CREATE FUNCTION rl_report_empty_name()
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'name must not be empty'
        USING ERRCODE = 'invalid_parameter_value',
              DETAIL = 'The name identifies the limit, such as ''api'' or ''login''.',
              HINT = 'Pass a non-empty name; use key '''' for a limit shared by every caller.';
END
$$;

-- ReportTooLong
CREATE FUNCTION rl_report_too_long(what text, bytes integer, max_bytes integer)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION '% is too long', what
        USING ERRCODE = 'program_limit_exceeded',
              DETAIL = pg_catalog.format('The %s is %s bytes long; at most %s bytes are allowed.',
                                         what, bytes, max_bytes),
              HINT = 'Hash long values first, for example with md5().';
END
$$;

-- CheckNameAndKey (kMaxNameBytes 256, kMaxKeyBytes 1024)
CREATE FUNCTION rl_check_name_and_key(name text, key text)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
DECLARE
    name_bytes integer := pg_catalog.octet_length(name);
    key_bytes integer := pg_catalog.octet_length(key);
BEGIN
    IF name_bytes OPERATOR(pg_catalog.=) 0 THEN
        PERFORM @extschema@.rl_report_empty_name();
    END IF;
    IF name_bytes OPERATOR(pg_catalog.>) 256 THEN
        PERFORM @extschema@.rl_report_too_long('name'::pg_catalog.text, name_bytes, 256);
    END IF;
    IF key_bytes OPERATOR(pg_catalog.>) 1024 THEN
        PERFORM @extschema@.rl_report_too_long('key'::pg_catalog.text, key_bytes, 1024);
    END IF;
END
$$;

-- ReportReadOnly
CREATE FUNCTION rl_report_read_only(function_name text)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'cannot execute %() in a read-only transaction', function_name
        USING ERRCODE = 'read_only_sql_transaction',
              DETAIL = pg_catalog.format('%s() writes the bucket''s state.', function_name),
              HINT = 'Call it in a read-write transaction; rate_limit_check() works in read-only ones.';
END
$$;

-- ReportRecovery
CREATE FUNCTION rl_report_recovery(function_name text, state_logged boolean)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF state_logged THEN
        RAISE EXCEPTION 'cannot execute %() during recovery', function_name
            USING ERRCODE = 'read_only_sql_transaction',
                  DETAIL = 'A standby server holds bucket state but cannot change it.',
                  HINT = 'Call it on the primary server; rate_limit_check() and rate_limit_buckets() answer on a standby.';
    END IF;
    RAISE EXCEPTION 'cannot execute %() during recovery', function_name
        USING ERRCODE = 'read_only_sql_transaction',
              DETAIL = 'Bucket state lives in an unlogged table, which standby servers do not have.',
              HINT = 'Call it on the primary server, or keep bucket state in a logged table (rate_limit_set_logged) to read it on a standby.';
END
$$;

-- ReportReadOnlyDelete
CREATE FUNCTION rl_report_read_only_delete(function_name text)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'cannot execute %() in a read-only transaction', function_name
        USING ERRCODE = 'read_only_sql_transaction',
              DETAIL = pg_catalog.format('%s() deletes rows of bucket state.', function_name),
              HINT = 'Call it in a read-write transaction.';
END
$$;

-- ReportAtomicCall
CREATE FUNCTION rl_report_atomic_call(function_name text, batch text)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION '%() cannot run inside a transaction block or a function', function_name
        USING ERRCODE = 'active_sql_transaction',
              DETAIL = pg_catalog.format(
                  'It commits after each batch of %s, so that no batch holds its row locks for long.',
                  batch),
              HINT = pg_catalog.format(
                  'Run CALL %s(...) as a statement of its own, outside BEGIN and COMMIT and not from a function.',
                  function_name);
END
$$;

-- ReportBadLimitList
CREATE FUNCTION rl_report_bad_limit_list(why text)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'invalid list of limits'
        USING ERRCODE = 'invalid_parameter_value',
              DETAIL = why,
              HINT = 'Pass one-dimensional arrays of equal length: names[i], keys[i] and costs[i] describe one limit.';
END
$$;

-- ReportTooManyLimits
CREATE FUNCTION rl_report_too_many_limits(count integer, max_count integer)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'too many limits'
        USING ERRCODE = 'program_limit_exceeded',
              DETAIL = pg_catalog.format('%s limits were given; at most %s can be taken at once.',
                                         count, max_count),
              HINT = 'Split the limits over several calls in one transaction, in a consistent order.';
END
$$;

-- ReportShardedCost
CREATE FUNCTION rl_report_sharded_cost(cost float8, pair_capacity float8, shards integer,
                                       reserving boolean)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'cost exceeds what two shards hold'
        USING ERRCODE = 'invalid_parameter_value',
              DETAIL = pg_catalog.format(
                  'A take from a key split over %s shards draws on two of them, which hold at most %s tokens together; the cost was %s.',
                  shards, pair_capacity, cost),
              HINT = CASE WHEN reserving
                          THEN 'Use fewer shards for this policy, or a smaller cost; a reservation is made on one shard, within its share of max_reserved and max_wait.'
                          ELSE 'Use fewer shards for this policy, or a smaller cost.'
                          END;
END
$$;

-- ReportShardedTakeAll
CREATE FUNCTION rl_report_sharded_take_all(name text)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'rate_limit_take_all() does not take from sharded policies'
        USING ERRCODE = 'feature_not_supported',
              DETAIL = pg_catalog.format('Policy "%s" splits its keys over several rows.', name),
              HINT = 'Take from the sharded limit in a call of its own.';
END
$$;

-- ReportGovernedName
CREATE FUNCTION rl_report_governed_name(name text, function_name text)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'rate limit "%" is governed by a policy', name
        USING ERRCODE = 'insufficient_privilege',
              DETAIL = pg_catalog.format(
                  'The buckets of policy "%s" take their rate and burst from it; %s() with a rate and burst of its own could refill them or lock them out.',
                  name, function_name),
              HINT = pg_catalog.format(
                  'Call %s() without rate and burst to use the policy''s, or give the limit with explicit parameters a name of its own.',
                  function_name);
END
$$;

-- ReportMergedCostExceedsBurst
CREATE FUNCTION rl_report_merged_cost_exceeds_burst(name text, key text, burst float8,
                                                    debt_cap float8)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'costs of one bucket exceed burst'
        USING ERRCODE = 'invalid_parameter_value',
              -- debt_cap > 0 as C compares: NaN is not.
              DETAIL = CASE WHEN debt_cap > 0 AND debt_cap <> 'NaN'::float8
                            THEN pg_catalog.format(
                                'The costs given for bucket ("%s", "%s") add up to more than its burst of %s tokens and the %s tokens it may owe, so they could never be taken together.',
                                name, key, burst, debt_cap)
                            ELSE pg_catalog.format(
                                'The costs given for bucket ("%s", "%s") add up to more than its burst of %s tokens, so they could never be taken together.',
                                name, key, burst)
                            END,
              HINT = 'Name each bucket once, or lower the costs.';
END
$$;

-- ReportUndefinedPolicy
CREATE FUNCTION rl_report_undefined_policy(name text, table_exists boolean)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT table_exists THEN
        RAISE EXCEPTION 'rate limit policy "%" does not exist', name
            USING ERRCODE = 'undefined_object',
                  DETAIL = 'This database has no table ratelimit.policies, where policies are kept.',
                  HINT = 'Policies arrive with version 0.2.0 of the extension: run ALTER EXTENSION ratelimit UPDATE. If the table was renamed or moved, give it back its name.';
    END IF;
    RAISE EXCEPTION 'rate limit policy "%" does not exist', name
        USING ERRCODE = 'undefined_object',
              DETAIL = 'A call without rate and burst takes them from a policy defined with rate_limit_define().',
              HINT = 'Define the policy first, or pass rate and burst in the call.';
END
$$;

-- A policy whose definition in the caller's snapshot was replaced or
-- removed by a transaction that has committed since: the portable
-- limiter's own error (the native one reads the latest definition).
CREATE FUNCTION rl_report_policy_changed(name text)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'could not serialize access due to a concurrent change of policy "%"', name
        USING ERRCODE = 'serialization_failure',
              DETAIL = 'A transaction that committed after this transaction''s snapshot was taken redefined or dropped the policy, and the limiter uses only its latest definition.',
              HINT = 'Retry the transaction.';
END
$$;

-- No policy called name in the caller's snapshot, which is older than
-- the latest definition or removal of a policy (rl_find_policy): the
-- portable limiter's own error.
CREATE FUNCTION rl_report_policies_changed(name text)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'could not serialize access due to a concurrent change of policies'
        USING ERRCODE = 'serialization_failure',
              DETAIL = pg_catalog.format('A transaction that committed after this transaction''s snapshot was taken defined, redefined or dropped a policy, so the snapshot cannot tell whether policy "%s" exists, and the limiter uses only the latest policies.', name),
              HINT = 'Retry the transaction.';
END
$$;

-- ReportInvalidAmount
CREATE FUNCTION rl_report_invalid_amount(amount float8)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'amount must be a finite number greater than or equal to zero'
        USING ERRCODE = 'invalid_parameter_value',
              DETAIL = pg_catalog.format('The amount given was %s.', amount),
              HINT = 'Pass the number of tokens to give back; the bucket never holds more than its burst.';
END
$$;

-- portable/decision_types.sql
--
-- The row types the calls answer with, as the native extension declares
-- them: included by portable/ratelimit.sql and by router/ratelimit_router.sql.

CREATE TYPE rate_limit_decision AS (
    allowed      boolean,
    remaining    float8,
    retry_after  float8,
    reset_after  float8,
    capacity     float8,
    name         text,
    quota        float8,
    per          interval,
    refill_after float8);
COMMENT ON TYPE rate_limit_decision IS
    'answer of a rate limit call: allowed, tokens remaining (negative = reserved debt), seconds until a retry succeeds or reserved work may start, seconds until full, the burst, the limit''s name, its quota per period, and seconds until more quota arrives';

-- All or nothing over several limits.
CREATE TYPE rate_limit_all_decision AS (
    allowed      boolean,
    retry_after  float8,
    binding_name text,
    binding_key  text,
    remaining    float8[],
    decisions    rate_limit_decision[]
);
COMMENT ON TYPE rate_limit_all_decision IS
    'answer of rate_limit_take_all: allowed, seconds until every limit would grant, the binding limit, the tokens remaining per limit given, and each limit''s own decision';

-- One row per bucket; times in whole microseconds since 2000-01-01 UTC, as
-- the algebra counts them.  On PostgreSQL, UNLOGGED as in the native
-- extension (a crash empties it: every bucket starts full again; see
-- rate_limit_set_logged), with room on each page for HOT updates.
-- YugabyteDB keeps rows in tablets, not heap pages: there the primary key is
-- hash-sharded over (name, key), so that one limit's keys spread over
-- tablets, and the table is a plain one (older releases reject UNLOGGED,
-- newer ones ignore it).
DO $$
BEGIN
    IF pg_catalog.version() ~ '-YB-' THEN
        EXECUTE 'CREATE TABLE rl_buckets (
            name          text COLLATE "C" NOT NULL,
            key           text COLLATE "C" NOT NULL,
            tokens        float8 NOT NULL,
            stamp_us      bigint NOT NULL,
            full_at_us    bigint NOT NULL,
            blocked_until_us bigint NOT NULL,
            CONSTRAINT rl_buckets_pkey PRIMARY KEY ((name, key) HASH))';
    ELSE
        EXECUTE 'CREATE UNLOGGED TABLE rl_buckets (
            name          text COLLATE "C" NOT NULL,
            key           text COLLATE "C" NOT NULL,
            tokens        float8 NOT NULL,
            stamp_us      bigint NOT NULL,
            full_at_us    bigint NOT NULL,
            blocked_until_us bigint NOT NULL,
            CONSTRAINT rl_buckets_pkey PRIMARY KEY (name, key)
        ) WITH (fillfactor = 30, autovacuum_vacuum_scale_factor = 0,
                autovacuum_vacuum_threshold = 1000)';
    END IF;
END
$$;
REVOKE ALL ON TABLE rl_buckets FROM PUBLIC;
COMMENT ON TABLE rl_buckets IS
    'token buckets of the portable rate limiter: written only by its functions';

-- The clock, in whole microseconds since 2000-01-01 UTC: the whole minutes
-- of the epoch (exact in a float8) and the microseconds within the minute,
-- as the timestamp holds them (an epoch in seconds with six decimals has
-- more digits than a float8 keeps).
CREATE FUNCTION rl_now() RETURNS bigint
LANGUAGE sql VOLATILE PARALLEL SAFE
AS $$ SELECT ((pg_catalog.floor(pg_catalog.date_part('epoch'::pg_catalog.text, c.t) OPERATOR(pg_catalog./) '60'::pg_catalog.float8)::bigint
               OPERATOR(pg_catalog.*) '60000000'::bigint)
              OPERATOR(pg_catalog.+) pg_catalog.date_part('microseconds'::pg_catalog.text,
                                       pg_catalog.timezone('UTC'::pg_catalog.text, c.t))::bigint)
             OPERATOR(pg_catalog.-) '946684800000000'::bigint
        FROM (SELECT pg_catalog.clock_timestamp() AS t) AS c $$;
COMMENT ON FUNCTION rl_now() IS 'the limiter''s clock: microseconds since 2000-01-01 UTC';

-- 22004 for the first of arguments (named by names) that is NULL, as the
-- native functions say it (hint: what may be NULL instead; key has its
-- own).  Called only when one is: num_nulls() is the cheap test on the way
-- of every call.
CREATE FUNCTION rl_null_argument(function_name text, names text[], arguments text[], hint text)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    FOR i IN 1..pg_catalog.array_length(names, 1) LOOP
        IF arguments[i] IS NULL THEN
            PERFORM @extschema@.rl_report_null_argument(function_name, names[i],
                                            CASE WHEN names[i] = 'key'
                                                 THEN 'Use key '''' for a limit shared by every caller.'
                                                 ELSE hint END);
        END IF;
    END LOOP;
END
$$;

-- A request with nothing to take (core::Request::Plain(0)).
CREATE FUNCTION rl_no_request() RETURNS rl_request
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT ROW('0'::pg_catalog.float8, false, false, '0'::pg_catalog.float8,
                 'Infinity'::pg_catalog.float8)::@extschema@.rl_request $$;

-- max_wait in seconds: 0 when NULL; 22023 when negative (MaxWaitArg).
CREATE FUNCTION rl_max_wait(max_wait interval) RETURNS float8
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
DECLARE
    seconds pg_catalog.float8;
BEGIN
    IF max_wait IS NULL THEN
        RETURN 0;
    END IF;
    seconds := pg_catalog.date_part('epoch'::pg_catalog.text, max_wait);
    IF NOT (seconds OPERATOR(pg_catalog.>=) '0'::pg_catalog.float8) THEN
        PERFORM @extschema@.rl_report_negative_max_wait(max_wait);
    END IF;
    RETURN seconds;
END
$$;

-- The limit of an explicit per-period call (PerPeriodLimit): rate tokens
-- per period per (seconds as date_part('epoch', ...) counts them), burst by
-- default the rate; the period and the rate are checked first.
CREATE FUNCTION rl_per_period_limit(rate float8, per interval, burst float8) RETURNS rl_limit
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
DECLARE
    seconds pg_catalog.float8 := pg_catalog.date_part('epoch'::pg_catalog.text, per);
    l @extschema@.rl_limit := ROW(rate, coalesce(burst, rate), 0, 0, '0'::pg_catalog.float8, 0)::@extschema@.rl_limit;
    per_second pg_catalog.float8;
BEGIN
    IF NOT (seconds OPERATOR(pg_catalog.>) '-Infinity'::pg_catalog.float8 AND seconds OPERATOR(pg_catalog.<) 'Infinity'::pg_catalog.float8
            AND pg_catalog.round(seconds OPERATOR(pg_catalog.*) '1000000'::pg_catalog.float8) OPERATOR(pg_catalog.>=) '1'::pg_catalog.float8) THEN
        PERFORM @extschema@.rl_report_invalid_period('per'::pg_catalog.text, per, seconds);
    END IF;
    IF NOT (rate OPERATOR(pg_catalog.>=) '0'::pg_catalog.float8 AND rate OPERATOR(pg_catalog.<) 'Infinity'::pg_catalog.float8) THEN
        PERFORM @extschema@.rl_report_invalid_request('rate_invalid'::pg_catalog.text, l, @extschema@.rl_no_request(),
                                           'per_period'::pg_catalog.text, rate);
    END IF;
    -- A quotient beyond float8 is an error in SQL (Infinity or 0 in C); only
    -- rates at the ends of the range can give one.
    IF rate OPERATOR(pg_catalog.>) '0'::pg_catalog.float8
       AND (rate OPERATOR(pg_catalog.>) '1e300'::pg_catalog.float8 OR rate OPERATOR(pg_catalog.<) '1e-300'::pg_catalog.float8) THEN
        BEGIN
            per_second := rate OPERATOR(pg_catalog./) seconds;
        EXCEPTION WHEN numeric_value_out_of_range THEN
            per_second := 0;
        END;
    ELSE
        per_second := rate OPERATOR(pg_catalog./) seconds;
    END IF;
    IF rate OPERATOR(pg_catalog.>) '0'::pg_catalog.float8
       AND NOT (per_second OPERATOR(pg_catalog.>) '0'::pg_catalog.float8 AND per_second OPERATOR(pg_catalog.<) 'Infinity'::pg_catalog.float8) THEN
        PERFORM @extschema@.rl_report_rate_out_of_range(rate, per);
    END IF;
    l.rate := per_second;
    RETURN l;
END
$$;

-- A request of cost that may reserve when the work can start within
-- max_wait (core::Request::Within), capped at max_reserved when given.
CREATE FUNCTION rl_within(cost float8, max_wait interval, max_reserved float8) RETURNS rl_request
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
DECLARE
    wait_s pg_catalog.float8 := @extschema@.rl_max_wait(max_wait);
BEGIN
    RETURN ROW(cost, wait_s OPERATOR(pg_catalog.>) '0'::pg_catalog.float8, max_reserved IS NOT NULL,
               coalesce(max_reserved, '0'::pg_catalog.float8),
               CASE WHEN wait_s OPERATOR(pg_catalog.>) '0'::pg_catalog.float8 THEN wait_s
                    ELSE 'Infinity'::pg_catalog.float8 END)::@extschema@.rl_request;
END
$$;

-- A take whose call as a whole was denied (take_all): one that would now
-- be granted takes nothing and starts no box.
CREATE FUNCTION rl_penalized(d rl_decision) RETURNS rl_decision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN d.allowed
                  THEN ROW(false, false, d.remaining, d.retry_after, d.reset_after, d.refill_after,
                           d.next, d.refunded)::@extschema@.rl_decision
                  ELSE d END $$;

-- What operation op decides on bucket b (Evaluate): 'take' and 'check' of
-- request r, 'refund' of amount, 'record' (a first sighting: nothing
-- taken) and 'penalize' (a take of a call denied as a whole).
CREATE FUNCTION rl_operate(b rl_bucket, l rl_limit, r rl_request, op text, amount float8,
                           now_us bigint) RETURNS rl_decision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN op OPERATOR(pg_catalog.=) 'refund'::pg_catalog.text THEN @extschema@.rl_refund(b, l, amount, now_us)
                  WHEN op OPERATOR(pg_catalog.=) 'record'::pg_catalog.text THEN @extschema@.rl_decide(b, l, @extschema@.rl_no_request(), now_us)
                  WHEN op OPERATOR(pg_catalog.=) 'penalize'::pg_catalog.text THEN @extschema@.rl_penalized(@extschema@.rl_decide(b, l, r, now_us))
                  ELSE @extschema@.rl_decide(b, l, r, now_us) END $$;

-- Decides (and, but for a check, stores) operation op on bucket (name, key),
-- a new one starting with initial tokens (NULL: full), as the native
-- DecideBucket does.  A decision that writes nothing (a denial, a look) is
-- made on the bucket as committed, without a lock; one that writes locks
-- the row and, if the row changed meanwhile, decides again on what it holds
-- then; it writes in the caller's transaction.  A new key below full is
-- stored even when nothing was taken: its first sighting counts.
CREATE FUNCTION rl_apply(p_name text, p_key text, l rl_limit, r rl_request, op text,
                         amount float8 DEFAULT 0, initial float8 DEFAULT NULL)
RETURNS rl_decision
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    writes boolean := op OPERATOR(pg_catalog.<>) 'check'::pg_catalog.text;
    below_full boolean := coalesce(initial OPERATOR(pg_catalog.<) l.burst, false);
    looked @extschema@.rl_bucket;
    b @extschema@.rl_bucket;
    d @extschema@.rl_decision;
    now_us bigint;
    inserted integer;
BEGIN
    LOOP
        now_us := @extschema@.rl_now();
        SELECT t.tokens, t.stamp_us, t.blocked_until_us INTO looked
          FROM @extschema@.rl_buckets AS t WHERE t.name OPERATOR(pg_catalog.=) p_name AND t.key OPERATOR(pg_catalog.=) p_key;
        IF NOT FOUND THEN
            looked := NULL;
            d := @extschema@.rl_operate(ROW(coalesce(initial, l.burst), now_us, @extschema@.rl_not_blocked())::@extschema@.rl_bucket,
                            l, r, op, amount, now_us);
            IF NOT writes OR NOT (d.write OR below_full) THEN
                RETURN d;
            END IF;
        ELSE
            IF op OPERATOR(pg_catalog.=) 'record'::pg_catalog.text THEN
                RETURN d; -- the key is known already
            END IF;
            d := @extschema@.rl_operate(looked, l, r, op, amount, now_us);
            IF NOT writes OR NOT d.write THEN
                RETURN d;
            END IF;
        END IF;
        -- (A take that ends up writing nothing, because the row changed
        -- meanwhile and now denies, keeps the row locked until the
        -- caller's transaction ends; a sharded take releases it: see
        -- rl_sharded_call.)
        SELECT t.tokens, t.stamp_us, t.blocked_until_us INTO b
          FROM @extschema@.rl_buckets AS t WHERE t.name OPERATOR(pg_catalog.=) p_name AND t.key OPERATOR(pg_catalog.=) p_key FOR UPDATE;
        IF NOT FOUND THEN
            IF looked IS NOT NULL THEN
                CONTINUE; -- reset meanwhile: look again
            END IF;
            INSERT INTO @extschema@.rl_buckets AS t
            VALUES (p_name, p_key, (d.next).tokens, (d.next).stamp_us, @extschema@.rl_full_at(d, now_us),
                    (d.next).blocked_until_us)
            ON CONFLICT ON CONSTRAINT rl_buckets_pkey DO NOTHING;
            GET DIAGNOSTICS inserted = ROW_COUNT;
            IF inserted OPERATOR(pg_catalog.=) 1 THEN
                RETURN d;
            END IF;
            CONTINUE; -- inserted meanwhile: decide again on it
        END IF;
        IF op OPERATOR(pg_catalog.=) 'record'::pg_catalog.text THEN
            RETURN d; -- the key is known already
        END IF;
        -- What was decided on is what is locked: the decision stands, at the
        -- clock reading it was made at.  Otherwise decide again, now.
        IF looked IS NULL OR NOT (b OPERATOR(pg_catalog.=) looked) THEN
            now_us := @extschema@.rl_now();
            d := @extschema@.rl_operate(b, l, r, op, amount, now_us);
        END IF;
        IF d.write THEN
            UPDATE @extschema@.rl_buckets AS t
               SET (tokens, stamp_us, full_at_us, blocked_until_us)
                   = ROW((d.next).tokens, (d.next).stamp_us, @extschema@.rl_full_at(d, now_us), (d.next).blocked_until_us)
             WHERE t.name OPERATOR(pg_catalog.=) p_name AND t.key OPERATOR(pg_catalog.=) p_key;
        END IF;
        RETURN d;
    END LOOP;
END
$$;

-- Whether bucket state is in a logged table (kept on standbys).
CREATE FUNCTION rl_state_logged() RETURNS boolean
LANGUAGE sql STABLE
AS $$ SELECT c.relpersistence OPERATOR(pg_catalog.=) 'p'::pg_catalog."char" FROM pg_catalog.pg_class AS c
       WHERE c.oid OPERATOR(pg_catalog.=) '@extschema@.rl_buckets'::pg_catalog.regclass::pg_catalog.oid $$;

-- A call that writes bucket state: refused on a standby and in a read-only
-- transaction, with the native messages (RequireWritable).
CREATE FUNCTION rl_require_writable(function_name text) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF pg_catalog.pg_is_in_recovery() THEN
        PERFORM @extschema@.rl_report_recovery(function_name, @extschema@.rl_state_logged());
    END IF;
    IF pg_catalog.current_setting('transaction_read_only'::pg_catalog.text) OPERATOR(pg_catalog.=) 'on'::pg_catalog.text THEN
        PERFORM @extschema@.rl_report_read_only(function_name);
    END IF;
END
$$;

-- A call that reads bucket state: refused on a standby unless the state is
-- logged (RequireReadable).
CREATE FUNCTION rl_require_readable(function_name text) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF pg_catalog.pg_is_in_recovery() AND NOT @extschema@.rl_state_logged() THEN
        PERFORM @extschema@.rl_report_recovery(function_name, false);
    END IF;
END
$$;

-- Name and key checked, then refused if a policy governs the name: a call
-- that passes its own rate could refill a policy's buckets or lock them out
-- (DecodeNameAndKey, RefuseGovernedName).
CREATE FUNCTION rl_explicit_name(function_name text, p_name text, p_key text) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM @extschema@.rl_check_name_and_key(p_name, p_key);
    IF (@extschema@.rl_find_policy(p_name)).name IS NOT NULL THEN
        PERFORM @extschema@.rl_report_governed_name(p_name, function_name);
    END IF;
END
$$;

-- The rest of a call with explicit parameters once its name and key are
-- checked: the limit and request checked as the native function checks
-- them in form ('per_second' or 'per_period'), the amount of a refund after
-- them; applied; answered as a decision row labelled quota per per.
CREATE FUNCTION rl_explicit_call(function_name text, p_name text, p_key text, l rl_limit,
                                 r rl_request, form text, op text, amount float8, quota float8,
                                 per interval)
RETURNS rate_limit_decision
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    d @extschema@.rl_decision;
BEGIN
    IF op OPERATOR(pg_catalog.=) 'refund'::pg_catalog.text THEN
        PERFORM @extschema@.rl_check_request(l, @extschema@.rl_no_request(), form, l.rate);
        IF NOT (amount OPERATOR(pg_catalog.>=) '0'::pg_catalog.float8 AND amount OPERATOR(pg_catalog.<) 'Infinity'::pg_catalog.float8) THEN
            PERFORM @extschema@.rl_report_invalid_amount(amount);
        END IF;
    ELSE
        PERFORM @extschema@.rl_check_request(l, r, form, l.rate);
    END IF;
    IF op OPERATOR(pg_catalog.=) 'check'::pg_catalog.text THEN
        PERFORM @extschema@.rl_require_readable(function_name);
    ELSE
        PERFORM @extschema@.rl_require_writable(function_name);
    END IF;
    d := @extschema@.rl_apply(p_name, p_key, l, r, op, amount, NULL::pg_catalog.float8);
    RETURN ROW(d.allowed, d.remaining, d.retry_after, d.reset_after, l.burst, p_name, quota, per,
               d.refill_after)::@extschema@.rate_limit_decision;
END
$$;

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
BEGIN
    IF pg_catalog.num_nulls($1, $2, $3, $4, $5, $6) > 0 THEN
        PERFORM @extschema@.rl_null_argument('rate_limit_take', ARRAY['name', 'key', 'cost', 'rate', 'burst', 'reserve'],
                                 ARRAY[$1, $2, $3::text, $4::text, $5::text, $6::text],
                                 'Only max_reserved may be NULL, meaning no cap on reserved debt.');
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
BEGIN
    IF pg_catalog.num_nulls($1, $2, $3, $4, $5, $6) > 0 THEN
        PERFORM @extschema@.rl_null_argument('rate_limit_check', ARRAY['name', 'key', 'cost', 'rate', 'burst', 'reserve'],
                                 ARRAY[$1, $2, $3::text, $4::text, $5::text, $6::text],
                                 'Only max_reserved may be NULL, meaning no cap on reserved debt.');
    END IF;
    PERFORM @extschema@.rl_explicit_name('rate_limit_check', $1, $2);
    RETURN @extschema@.rl_explicit_call('rate_limit_check', $1, $2, ROW($4, $5, 0, 0, 0, 0)::@extschema@.rl_limit,
                            ROW($3, $6, $7 IS NOT NULL, coalesce($7, 0), 'Infinity')::@extschema@.rl_request,
                            'per_second', 'check', 0::float8, $4, '1 second'::interval);
END
$$;
COMMENT ON FUNCTION rate_limit_check(text, text, float8, float8, float8, boolean, float8) IS
    'answers as rate_limit_take would, without consuming or writing anything';

-- Explicit parameters in the units of rate_limit_define: rate tokens per
-- period per, burst by default the rate, reserving within max_wait.
CREATE FUNCTION rate_limit_take_explicit(
    name         text,
    key          text,
    cost         float8,
    rate         float8,
    per          interval,
    burst        float8   DEFAULT NULL,
    max_wait     interval DEFAULT NULL,
    max_reserved float8   DEFAULT NULL)
RETURNS rate_limit_decision
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.num_nulls($1, $2, $3, $4, $5) > 0 THEN
        PERFORM @extschema@.rl_null_argument('rate_limit_take_explicit', ARRAY['name', 'key', 'cost', 'rate', 'per'],
                                 ARRAY[$1, $2, $3::text, $4::text, $5::text],
                                 'Only burst (meaning the rate), max_wait (meaning no reservation) and max_reserved (meaning no cap on reserved debt) may be NULL.');
    END IF;
    PERFORM @extschema@.rl_explicit_name('rate_limit_take_explicit', $1, $2);
    RETURN @extschema@.rl_explicit_call('rate_limit_take_explicit', $1, $2, @extschema@.rl_per_period_limit($4, $5, $6), @extschema@.rl_within($3, $7, $8),
                            'per_period', 'take', 0::float8, $4, $5);
END
$$;
COMMENT ON FUNCTION rate_limit_take_explicit(text, text, float8, float8, interval, float8, interval, float8) IS
    'takes cost tokens from the bucket (name, key) that refills rate tokens per period per up to burst (default: rate); reserves within max_wait and max_reserved when given; refused on a name a policy governs';

CREATE FUNCTION rate_limit_check_explicit(
    name         text,
    key          text,
    cost         float8,
    rate         float8,
    per          interval,
    burst        float8   DEFAULT NULL,
    max_wait     interval DEFAULT NULL,
    max_reserved float8   DEFAULT NULL)
RETURNS rate_limit_decision
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.num_nulls($1, $2, $3, $4, $5) > 0 THEN
        PERFORM @extschema@.rl_null_argument('rate_limit_check_explicit', ARRAY['name', 'key', 'cost', 'rate', 'per'],
                                 ARRAY[$1, $2, $3::text, $4::text, $5::text],
                                 'Only burst (meaning the rate), max_wait (meaning no reservation) and max_reserved (meaning no cap on reserved debt) may be NULL.');
    END IF;
    PERFORM @extschema@.rl_explicit_name('rate_limit_check_explicit', $1, $2);
    RETURN @extschema@.rl_explicit_call('rate_limit_check_explicit', $1, $2, @extschema@.rl_per_period_limit($4, $5, $6), @extschema@.rl_within($3, $7, $8),
                            'per_period', 'check', 0::float8, $4, $5);
END
$$;
COMMENT ON FUNCTION rate_limit_check_explicit(text, text, float8, float8, interval, float8, interval, float8) IS
    'answers as rate_limit_take_explicit with the same arguments would, without consuming or writing anything';

-- Refunds: amount tokens back, capped at burst, in the caller's transaction.
CREATE FUNCTION rate_limit_refund(name text, key text, amount float8, rate float8, burst float8)
RETURNS rate_limit_decision
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.num_nulls($1, $2, $3, $4, $5) > 0 THEN
        PERFORM @extschema@.rl_null_argument('rate_limit_refund', ARRAY['name', 'key', 'amount', 'rate', 'burst'],
                                 ARRAY[$1, $2, $3::text, $4::text, $5::text],
                                 'Every argument of this function needs a value.');
    END IF;
    PERFORM @extschema@.rl_explicit_name('rate_limit_refund', $1, $2);
    RETURN @extschema@.rl_explicit_call('rate_limit_refund', $1, $2, ROW($4, $5, 0, 0, 0, 0)::@extschema@.rl_limit, NULL::@extschema@.rl_request, 'per_second',
                            'refund', $3, $4, '1 second'::interval);
END
$$;
COMMENT ON FUNCTION rate_limit_refund(text, text, float8, float8, float8) IS
    'gives amount tokens back to the bucket (name, key) that refills at rate up to burst';

CREATE FUNCTION rate_limit_refund_explicit(name text, key text, amount float8, rate float8,
                                           per interval, burst float8 DEFAULT NULL)
RETURNS rate_limit_decision
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.num_nulls($1, $2, $3, $4, $5) > 0 THEN
        PERFORM @extschema@.rl_null_argument('rate_limit_refund_explicit', ARRAY['name', 'key', 'amount', 'rate', 'per'],
                                 ARRAY[$1, $2, $3::text, $4::text, $5::text],
                                 'Only burst may be NULL, meaning the rate.');
    END IF;
    PERFORM @extschema@.rl_explicit_name('rate_limit_refund_explicit', $1, $2);
    RETURN @extschema@.rl_explicit_call('rate_limit_refund_explicit', $1, $2, @extschema@.rl_per_period_limit($4, $5, $6), NULL::@extschema@.rl_request, 'per_period',
                            'refund', $3, $4, $5);
END
$$;
COMMENT ON FUNCTION rate_limit_refund_explicit(text, text, float8, float8, interval, float8) IS
    'gives amount tokens back to the bucket (name, key) that refills rate tokens per period per up to burst (default: rate); refused on a name a policy governs';

-- Forgets one bucket (with the shards of a key a policy splits), so that it
-- starts full again; true if it existed.
CREATE FUNCTION rate_limit_reset(name text, key text) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    deleted int;
    shards int;
BEGIN
    IF pg_catalog.num_nulls($1, $2) > 0 THEN
        PERFORM @extschema@.rl_null_argument('rate_limit_reset', ARRAY['name', 'key'], ARRAY[$1, $2],
                                 'Every argument of this function needs a value.');
    END IF;
    PERFORM @extschema@.rl_check_name_and_key($1, $2);
    PERFORM @extschema@.rl_require_writable('rate_limit_reset');
    shards := coalesce((@extschema@.rl_find_policy($1)).shards, 1);
    IF shards > 1 THEN
        DELETE FROM @extschema@.rl_buckets AS t
         WHERE t.name = $1
           AND (t.key = $2 OR t.key IN (SELECT @extschema@.rl_shard_key($2, s)
                                          FROM pg_catalog.generate_series(0, shards - 1) AS s));
    ELSE
        DELETE FROM @extschema@.rl_buckets AS t WHERE t.name = $1 AND t.key = $2;
    END IF;
    GET DIAGNOSTICS deleted = ROW_COUNT;
    RETURN deleted > 0;
END
$$;
COMMENT ON FUNCTION rate_limit_reset(text, text) IS
    'forgets the bucket (name, key) so that it starts full again; true if it existed';

-- As in the native extension: resetting and refunding hand tokens out, so
-- they are granted deliberately.
REVOKE ALL ON FUNCTION rate_limit_reset(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION rate_limit_refund(text, text, float8, float8, float8) FROM PUBLIC;
REVOKE ALL ON FUNCTION rate_limit_refund_explicit(text, text, float8, float8, interval, float8) FROM PUBLIC;

-- portable/policies.sql
--
-- Named policies in the portable limiter: the table rate_limit_define()
-- writes, the calls that give only a name, a key and a cost, several limits
-- at once, the HTTP header values and the maintenance of the buckets.
-- Included by ratelimit.sql, after core.sql, errors.sql and the calls with
-- explicit parameters; runs in the schema the limiter is installed into,
-- naming its own objects as ratelimit.sql says.
-- Policy checks and messages are the native extension's, word for word: the
-- shared regression suite runs against both.

-- As the native ratelimit.policies, column for column and constraint for
-- constraint.
CREATE TABLE rl_policies (
    name              text COLLATE pg_catalog."C" NOT NULL,
    rate              float8 NOT NULL,
    per               interval NOT NULL,
    burst             float8 NOT NULL,
    tokens_per_second float8 NOT NULL
        GENERATED ALWAYS AS (rate OPERATOR(pg_catalog./) pg_catalog.date_part('epoch', per)) STORED,
    initial           float8,
    jitter            float8 NOT NULL DEFAULT '0'::float8,
    fixed_window      boolean NOT NULL DEFAULT false,
    window_start      interval,
    window_us         bigint NOT NULL
        GENERATED ALWAYS AS (pg_catalog.round(pg_catalog.date_part('epoch', per)
                                              OPERATOR(pg_catalog.*) '1000000'::float8)::bigint) STORED,
    window_start_us   bigint
        GENERATED ALWAYS AS (pg_catalog.round(pg_catalog.date_part('epoch', window_start)
                                              OPERATOR(pg_catalog.*) '1000000'::float8)::bigint) STORED,
    floor_rate        float8 NOT NULL DEFAULT '0'::float8,
    floor_per_second  float8 NOT NULL
        GENERATED ALWAYS AS (floor_rate OPERATOR(pg_catalog./) pg_catalog.date_part('epoch', per)) STORED,
    shards            integer NOT NULL DEFAULT 1,
    max_reserved      float8 NOT NULL DEFAULT '0'::float8,
    penalty           interval,
    penalty_us        bigint
        GENERATED ALWAYS AS (pg_catalog.round(pg_catalog.date_part('epoch', penalty)
                                              OPERATOR(pg_catalog.*) '1000000'::float8)::bigint) STORED,
    storage           text COLLATE pg_catalog."C" NOT NULL DEFAULT 'table'::text,
    CONSTRAINT rl_policies_pkey PRIMARY KEY (name),
    CONSTRAINT policies_name_check CHECK (pg_catalog.octet_length(name) OPERATOR(pg_catalog.>=) 1
                                          AND pg_catalog.octet_length(name) OPERATOR(pg_catalog.<=) 256),
    CONSTRAINT policies_rate_check CHECK (rate OPERATOR(pg_catalog.>=) '0'::float8
                                          AND rate OPERATOR(pg_catalog.<) 'Infinity'::float8),
    CONSTRAINT policies_per_check CHECK (window_us OPERATOR(pg_catalog.>=) '1'::bigint),
    CONSTRAINT policies_burst_check CHECK (burst OPERATOR(pg_catalog.>) '0'::float8
                                           AND burst OPERATOR(pg_catalog.<) 'Infinity'::float8),
    CONSTRAINT policies_initial_check CHECK (initial OPERATOR(pg_catalog.>=) '0'::float8
                                             AND initial OPERATOR(pg_catalog.<=) burst),
    CONSTRAINT policies_jitter_check CHECK (jitter OPERATOR(pg_catalog.>=) '0'::float8
                                            AND jitter OPERATOR(pg_catalog.<=) '1'::float8),
    CONSTRAINT policies_window_start_check CHECK (window_start_us OPERATOR(pg_catalog.>=) '0'::bigint),
    CONSTRAINT policies_shards_check CHECK (shards OPERATOR(pg_catalog.>=) 1
                                            AND shards OPERATOR(pg_catalog.<=) 64),
    CONSTRAINT policies_floor_rate_check CHECK (floor_rate OPERATOR(pg_catalog.>=) '0'::float8
                                                AND floor_rate OPERATOR(pg_catalog.<) 'Infinity'::float8
                                                AND (floor_rate OPERATOR(pg_catalog.=) '0'::float8
                                                     OR NOT fixed_window)),
    CONSTRAINT policies_max_reserved_check
        CHECK (max_reserved OPERATOR(pg_catalog.>=) '0'::float8
               AND max_reserved OPERATOR(pg_catalog.<) 'Infinity'::float8),
    CONSTRAINT policies_penalty_check
        CHECK (penalty_us OPERATOR(pg_catalog.>=) '0'::bigint
               AND (penalty_us OPERATOR(pg_catalog.=) '0'::bigint
                    OR shards OPERATOR(pg_catalog.=) 1)),
    CONSTRAINT policies_storage_check
        CHECK (storage OPERATOR(pg_catalog.=) ANY ('{table,memory}'::text[])
               AND (storage OPERATOR(pg_catalog.=) 'table'::text
                    OR shards OPERATOR(pg_catalog.=) 1))
);
REVOKE ALL ON TABLE rl_policies FROM PUBLIC;
-- Policies are configuration: pg_dump keeps them, also when the limiter is
-- installed as an extension (the line is the extension script's only).
SELECT pg_catalog.pg_extension_config_dump('rl_policies', '');
COMMENT ON TABLE rl_policies IS
    'named rate limit policies of the portable limiter, written by rate_limit_define()';

-- One row, updated by every rate_limit_define and rate_limit_drop in their
-- own transaction before they write rl_policies (so that they queue on it,
-- and never wait for each other's policies in turn): the version of it
-- that a snapshot sees has been replaced by a committed transaction (its
-- xmax) exactly when a policy was defined, redefined or dropped since the
-- snapshot was taken (rl_policies_changed).  Nothing else writes or locks
-- it.  Not dumped with the extension: its install writes the row.
CREATE TABLE rl_policy_changes (
    one     boolean NOT NULL DEFAULT true,
    changes bigint NOT NULL DEFAULT '0'::bigint,
    CONSTRAINT rl_policy_changes_pkey PRIMARY KEY (one),
    CONSTRAINT rl_policy_changes_one_check CHECK (one)
);
INSERT INTO rl_policy_changes (one, changes) VALUES (true, '0'::bigint);
REVOKE ALL ON TABLE rl_policy_changes FROM PUBLIC;
COMMENT ON TABLE rl_policy_changes IS
    'one row, rewritten by every rate_limit_define() and rate_limit_drop(): changes counts them';

-- The checks of the native rate_limit_define, in its order and words.
CREATE FUNCTION rate_limit_define(
    name    text,
    rate    float8,
    per     interval DEFAULT '1 second',
    burst   float8   DEFAULT NULL,
    initial float8   DEFAULT NULL,
    jitter  float8   DEFAULT '0',
    fixed_window boolean DEFAULT false,
    window_start interval DEFAULT NULL,
    floor_rate   float8   DEFAULT '0',
    shards       integer  DEFAULT 1,
    max_reserved float8   DEFAULT '0',
    penalty      interval DEFAULT NULL,
    storage      text     DEFAULT 'table')
RETURNS rl_policies
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    seconds       float8 := pg_catalog.date_part('epoch', $3);
    micros        float8 := pg_catalog.round(seconds OPERATOR(pg_catalog.*) '1000000'::float8);
    start_seconds float8 := pg_catalog.date_part('epoch', $8);
    start_micros  float8 := pg_catalog.round(start_seconds OPERATOR(pg_catalog.*) '1000000'::float8);
    micros_limit  CONSTANT float8 := '9223372036854775807'::float8;
    dividend      text;
    quotient      float8;
    stored        @extschema@.rl_policies;
    penalty_micros float8;
BEGIN
    IF $1 IS NULL OR $2 IS NULL OR $3 IS NULL THEN
        RAISE EXCEPTION 'name, rate and per must not be null'
            USING ERRCODE = 'null_value_not_allowed',
                  DETAIL = 'Only burst may be NULL, meaning one period''s worth of tokens.',
                  HINT = 'Pass the policy''s name, its rate and the period the rate is counted over.';
    END IF;
    IF $1 OPERATOR(pg_catalog.=) '' OR pg_catalog.octet_length($1) OPERATOR(pg_catalog.>) 256 THEN
        RAISE EXCEPTION 'policy name must be 1 to 256 bytes long'
            USING ERRCODE = CASE WHEN $1 OPERATOR(pg_catalog.=) '' THEN 'invalid_parameter_value'
                                 ELSE 'program_limit_exceeded' END,
                  DETAIL = pg_catalog.format('The name given is %s bytes long.', pg_catalog.octet_length($1)),
                  HINT = 'Use a short name, such as ''api'' or ''login''.';
    END IF;
    IF $1 OPERATOR(pg_catalog.!~) '^[ -~]+$' THEN
        RAISE EXCEPTION 'policy name must be printable ASCII'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('Character %s of the name given is outside the printable ASCII range (space to tilde), which the RateLimit header fields cannot carry.',
                                             pg_catalog.length(pg_catalog.substring($1, '^[ -~]*')) OPERATOR(pg_catalog.+) 1),
                  HINT = 'Use letters, digits and punctuation, such as ''api-free'' or ''login:v2''.';
    END IF;
    IF NOT ($2 OPERATOR(pg_catalog.>=) '0'::float8 AND $2 OPERATOR(pg_catalog.<) 'Infinity'::float8) THEN
        RAISE EXCEPTION 'rate must be a finite number greater than or equal to zero'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('The rate given was %s.', $2),
                  HINT = 'Pass how many tokens refill per period; 0 means the bucket never refills.';
    END IF;
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
    IF $13 IS NULL OR NOT ($13 OPERATOR(pg_catalog.=) ANY ('{table,memory}'::text[])) THEN
        RAISE EXCEPTION 'storage must be ''table'' or ''memory'''
            USING ERRCODE = CASE WHEN $13 IS NULL THEN 'null_value_not_allowed' ELSE 'invalid_parameter_value' END,
                  DETAIL = pg_catalog.format('The storage given was %s.', coalesce(pg_catalog.quote_literal($13), 'NULL')),
                  HINT = 'Pass ''table'' (the default) to keep buckets in a table, or ''memory'' to keep them in shared memory.';
    END IF;
    IF $13 OPERATOR(pg_catalog.=) 'memory' AND $10 OPERATOR(pg_catalog.>) 1 THEN
        RAISE EXCEPTION 'a policy with storage ''memory'' cannot have shards'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'The memory engine serves a hot key without a row lock: there is no queue for shards to spread.',
                  HINT = 'Define the policy with shards => 1, or with storage => ''table''.';
    END IF;
    IF $13 OPERATOR(pg_catalog.=) 'memory' THEN
        RAISE EXCEPTION 'the portable limiter has no memory engine'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'Keeping buckets in shared memory needs the native extension ratelimit.',
                  HINT = 'Define the policy with storage => ''table'' (the default), or install the native extension.';
    END IF;
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
    PERFORM @extschema@.rl_policies_change();
    INSERT INTO @extschema@.rl_policies AS p
        (name, rate, per, burst, initial, jitter, fixed_window, window_start, floor_rate, shards,
         max_reserved, penalty, storage)
    VALUES ($1, $2, $3, coalesce($4, $2), $5, $6, $7, $8, $9, $10, $11, $12, $13)
    ON CONFLICT (name) DO UPDATE
        SET rate = excluded.rate, per = excluded.per, burst = excluded.burst,
            initial = excluded.initial, jitter = excluded.jitter,
            fixed_window = excluded.fixed_window, window_start = excluded.window_start,
            floor_rate = excluded.floor_rate, shards = excluded.shards,
            max_reserved = excluded.max_reserved, penalty = excluded.penalty,
            storage = excluded.storage
    RETURNING p.* INTO stored;
    RETURN stored;
END
$$;
COMMENT ON FUNCTION rate_limit_define(text, float8, interval, float8, float8, float8, boolean, interval, float8, integer, float8, interval, text) IS
    'defines (or replaces) the policy name: rate tokens per period per, holding at most burst (default: rate); new keys start with initial tokens (default: burst); retry_after gets a per-key jitter of up to the fraction jitter; fixed_window adds the rate at once at each window of length per, starting at window_start (default: spread by key); floor_rate tokens per period are still granted once the burst is spent; shards splits each key over that many rows for hot keys; a key may owe up to max_reserved tokens after a reservation; once a take is denied, penalty keeps the key denied that long; storage ''memory'' keeps the keys in shared memory instead of a table; returns the stored policy';
REVOKE ALL ON FUNCTION rate_limit_define(text, float8, interval, float8, float8, float8, boolean, interval, float8, integer, float8, interval, text) FROM PUBLIC;

-- The policies, shown to the roles that may execute rate_limit_define.
CREATE VIEW rate_limit_policies WITH (security_barrier) AS
SELECT p.name, p.rate, p.per, p.burst, p.initial, p.jitter, p.fixed_window, p.window_start,
       p.floor_rate, p.shards, p.max_reserved, p.penalty, p.tokens_per_second, p.storage
  FROM rl_policies AS p
 WHERE pg_catalog.has_function_privilege(
           'rate_limit_define(text, float8, interval, float8, float8, float8, boolean, interval, float8, integer, float8, interval, text)'::pg_catalog.regprocedure,
           'EXECUTE');
COMMENT ON VIEW rate_limit_policies IS
    'the stored policies, shown to roles that may execute rate_limit_define';
GRANT SELECT ON rate_limit_policies TO PUBLIC;

CREATE FUNCTION rate_limit_drop(name text)
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
    PERFORM @extschema@.rl_policies_change();
    DELETE FROM @extschema@.rl_policies AS p WHERE p.name = $1;
    RETURN FOUND;
END
$$;
COMMENT ON FUNCTION rate_limit_drop(text) IS
    'removes the policy name; true if it existed (buckets already used stay until reset)';
REVOKE ALL ON FUNCTION rate_limit_drop(text) FROM PUBLIC;

-- Whether transaction x has committed.  x is an xmax, 32 bits: its epoch
-- is the one that puts it nearest the next transaction id of the
-- snapshot.
CREATE FUNCTION rl_committed(x xid) RETURNS boolean
LANGUAGE sql VOLATILE
AS $$ SELECT pg_catalog.pg_xact_status(
                 (s.next OPERATOR(pg_catalog.+) ((((x::pg_catalog.text::bigint OPERATOR(pg_catalog.-) (s.next OPERATOR(pg_catalog.%) '4294967296'::bigint))
                                OPERATOR(pg_catalog.+) '6442450944'::bigint) OPERATOR(pg_catalog.%) '4294967296'::bigint)
                              OPERATOR(pg_catalog.-) '2147483648'::bigint))::pg_catalog.text::pg_catalog.xid8)
             OPERATOR(pg_catalog.=) 'committed'::pg_catalog.text
        FROM (SELECT pg_catalog.pg_snapshot_xmax(pg_catalog.pg_current_snapshot())::pg_catalog.text::bigint
                     AS next) AS s $$;

-- Counts a definition or removal of a policy (see rl_policy_changes): a
-- plain UPDATE, which leaves no lock of its own on the row it writes.
CREATE FUNCTION rl_policies_change() RETURNS void
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$ UPDATE @extschema@.rl_policy_changes AS c
         SET changes = c.changes OPERATOR(pg_catalog.+) '1'::bigint $$;

-- Whether a transaction that committed after the snapshot was taken has
-- defined, redefined or dropped a policy: the snapshot's version of
-- rl_policy_changes has been replaced since.  One single-row read.
CREATE FUNCTION rl_policies_changed() RETURNS boolean
LANGUAGE sql VOLATILE
AS $$ SELECT EXISTS (SELECT FROM @extschema@.rl_policy_changes AS c
                      WHERE CASE WHEN c.xmax OPERATOR(pg_catalog.=) '0'::pg_catalog.xid THEN false
                                 ELSE @extschema@.rl_committed(c.xmax) END) $$;

-- The policy called name as last committed, or NULL, as the native
-- limiter reads it whatever the caller's snapshot.  Plain SQL reads the
-- version the snapshot sees: one that a transaction which has committed
-- since replaced or deleted (its xmax) is not used.  At READ COMMITTED the
-- row is read again, by a statement with a newer snapshot; a REPEATABLE
-- READ or SERIALIZABLE snapshot cannot move, so there the call fails with
-- 40001.  An xmax may also be a row lock: rate_limit_define's INSERT ... ON
-- CONFLICT DO UPDATE leaves its own transaction's lock on the version it
-- writes (xmax = xmin, which a replaced version visible to another
-- snapshot never has); nothing else locks rl_policies' rows, and at READ
-- COMMITTED a version seen twice is taken as merely locked.  No row: a
-- policy defined since a REPEATABLE READ or SERIALIZABLE snapshot was
-- taken would not be in it either, so there the call fails with 40001 if
-- any policy was defined, redefined or dropped since (one more read, off
-- the way of a take by a policy's name).  At READ COMMITTED the snapshot
-- was taken as the statement that found no row began: then no policy of
-- that name had been committed.
CREATE FUNCTION rl_find_policy(p_name text) RETURNS rl_policies
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    got record;
    seen pg_catalog.tid;
BEGIN
    LOOP
        SELECT p AS policy, p.xmin AS creator, p.xmax AS version, p.ctid AS at INTO got
          FROM @extschema@.rl_policies AS p WHERE p.name OPERATOR(pg_catalog.=) p_name;
        IF NOT FOUND THEN
            IF pg_catalog.current_setting('transaction_isolation'::pg_catalog.text)
               OPERATOR(pg_catalog.<>) 'read committed'::pg_catalog.text
               AND @extschema@.rl_policies_changed() THEN
                PERFORM @extschema@.rl_report_policies_changed(p_name);
            END IF;
            RETURN NULL;
        END IF;
        IF got.version OPERATOR(pg_catalog.=) '0'::pg_catalog.xid OR got.version OPERATOR(pg_catalog.=) got.creator OR got.at OPERATOR(pg_catalog.=) seen
           OR NOT @extschema@.rl_committed(got.version) THEN
            RETURN got.policy;
        END IF;
        IF pg_catalog.current_setting('transaction_isolation'::pg_catalog.text)
           OPERATOR(pg_catalog.<>) 'read committed'::pg_catalog.text THEN
            PERFORM @extschema@.rl_report_policy_changed(p_name);
        END IF;
        seen := got.at;
    END LOOP;
END
$$;

-- The policy called name; 42704 if there is none.
CREATE FUNCTION rl_policy(p_name text) RETURNS rl_policies
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    p @extschema@.rl_policies := @extschema@.rl_find_policy(p_name);
BEGIN
    IF p.name IS NULL THEN
        PERFORM @extschema@.rl_report_undefined_policy(p_name, true);
    END IF;
    RETURN p;
END
$$;

-- The native BucketHash(name, key, seed), as an unsigned number: the
-- 64-bit hash of the key's bytes seeded with that of the name's.
CREATE FUNCTION rl_bucket_hash(p_name text, p_key text, seed bigint) RETURNS numeric
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT h::numeric OPERATOR(pg_catalog.+) CASE WHEN h OPERATOR(pg_catalog.<) '0'::bigint THEN '18446744073709551616'::numeric
                                ELSE '0'::numeric END
        FROM (SELECT pg_catalog.hashtextextended(p_key COLLATE pg_catalog."C",
                     pg_catalog.hashtextextended(p_name COLLATE pg_catalog."C", seed)) AS h) AS s $$;

-- The limit policy p sets for key (PolicyLimit): fixed windows start at
-- window_start, or where the key's hash puts them.
CREATE FUNCTION rl_policy_limit(p rl_policies, p_name text, p_key text) RETURNS rl_limit
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT ROW(p.tokens_per_second, p.burst,
                 CASE WHEN p.fixed_window THEN p.window_us ELSE '0'::bigint END,
                 CASE WHEN NOT p.fixed_window THEN '0'::bigint
                      WHEN p.window_start_us IS NOT NULL THEN p.window_start_us OPERATOR(pg_catalog.%) p.window_us
                      ELSE (@extschema@.rl_bucket_hash(p_name, p_key, '131294707347319'::bigint)
                            OPERATOR(pg_catalog.%) p.window_us::numeric)::bigint END,
                 p.floor_per_second, coalesce(p.penalty_us, '0'::bigint))::@extschema@.rl_limit $$;

-- A policy call's request (PolicyRequest): reserving within max_wait
-- seconds, owing at most the policy's max_reserved.
CREATE FUNCTION rl_policy_request(p rl_policies, cost float8, max_wait float8) RETURNS rl_request
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT ROW(cost, max_wait OPERATOR(pg_catalog.>) '0'::pg_catalog.float8, true, p.max_reserved,
                 CASE WHEN max_wait OPERATOR(pg_catalog.>) '0'::pg_catalog.float8 THEN max_wait
                      ELSE 'Infinity'::pg_catalog.float8 END)::@extschema@.rl_request $$;

-- retry_after stretched by the key's share of the policy's jitter
-- (core::Jittered, with the hash of BucketHash's jitter seed).
CREATE FUNCTION rl_jittered(retry_after float8, fraction float8, p_name text, p_key text)
RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    share pg_catalog.float8;
    stretched pg_catalog.float8;
BEGIN
    IF NOT (retry_after OPERATOR(pg_catalog.>) '0'::pg_catalog.float8) OR retry_after OPERATOR(pg_catalog.=) 'Infinity'::pg_catalog.float8
       OR NOT (fraction OPERATOR(pg_catalog.>) '0'::pg_catalog.float8) THEN
        RETURN retry_after;
    END IF;
    share := pg_catalog.floor(@extschema@.rl_bucket_hash(p_name, p_key, '117001157895538'::bigint) OPERATOR(pg_catalog./) '2048'::numeric)::pg_catalog.float8
             OPERATOR(pg_catalog.*) ('1'::pg_catalog.float8 OPERATOR(pg_catalog./) '9007199254740992'::pg_catalog.float8);
    stretched := pg_catalog.ceil((retry_after OPERATOR(pg_catalog.*) ('1'::pg_catalog.float8 OPERATOR(pg_catalog.+) (fraction OPERATOR(pg_catalog.*) share)))
                                 OPERATOR(pg_catalog.*) '1000000'::pg_catalog.float8)
                 OPERATOR(pg_catalog./) '1000000'::pg_catalog.float8;
    RETURN CASE WHEN stretched OPERATOR(pg_catalog.<) retry_after THEN retry_after ELSE stretched END;
END
$$;

-- A decision row of policy p.
CREATE FUNCTION rl_policy_answer(d rl_decision, p rl_policies, p_name text)
RETURNS rate_limit_decision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT ROW(d.allowed, d.remaining, d.retry_after, d.reset_after, p.burst, p_name, p.rate,
                 p.per, d.refill_after)::@extschema@.rate_limit_decision $$;

-- Take or check (op) cost from key under policy name, reserving within
-- max_wait as the policy allows (PolicyDecision).
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
    p := @extschema@.rl_policy(p_name);
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
    RETURN @extschema@.rl_policy_answer(d, p, p_name);
END
$$;

CREATE FUNCTION rate_limit_take(name text, key text, cost float8 DEFAULT 1)
RETURNS rate_limit_decision
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.num_nulls($1, $2, $3) > 0 THEN
        PERFORM @extschema@.rl_null_argument('rate_limit_take', ARRAY['name', 'key', 'cost'],
                                 ARRAY[$1, $2, $3::text], 'Every argument of this function needs a value.');
    END IF;
    RETURN @extschema@.rl_policy_call('rate_limit_take', $1, $2, $3, 0::float8, 'take');
END
$$;
COMMENT ON FUNCTION rate_limit_take(text, text, float8) IS
    'takes cost tokens from the bucket (name, key) with the rate and burst of policy name';

CREATE FUNCTION rate_limit_check(name text, key text, cost float8 DEFAULT 1)
RETURNS rate_limit_decision
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.num_nulls($1, $2, $3) > 0 THEN
        PERFORM @extschema@.rl_null_argument('rate_limit_check', ARRAY['name', 'key', 'cost'],
                                 ARRAY[$1, $2, $3::text], 'Every argument of this function needs a value.');
    END IF;
    RETURN @extschema@.rl_policy_call('rate_limit_check', $1, $2, $3, 0::float8, 'check');
END
$$;
COMMENT ON FUNCTION rate_limit_check(text, text, float8) IS
    'answers as rate_limit_take(name, key, cost) would, without consuming or writing anything';

CREATE FUNCTION rate_limit_take(name text, key text, cost float8, max_wait interval)
RETURNS rate_limit_decision
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.num_nulls($1, $2, $3) > 0 THEN
        PERFORM @extschema@.rl_null_argument('rate_limit_take', ARRAY['name', 'key', 'cost'],
                                 ARRAY[$1, $2, $3::text], 'Only max_wait may be NULL, meaning no reservation.');
    END IF;
    RETURN @extschema@.rl_policy_call('rate_limit_take', $1, $2, $3, @extschema@.rl_max_wait($4), 'take');
END
$$;
COMMENT ON FUNCTION rate_limit_take(text, text, float8, interval) IS
    'takes cost tokens from the bucket (name, key) of policy name; when it holds too few, reserves them if the work may start within max_wait and the policy''s max_reserved allows the debt';

CREATE FUNCTION rate_limit_check(name text, key text, cost float8, max_wait interval)
RETURNS rate_limit_decision
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.num_nulls($1, $2, $3) > 0 THEN
        PERFORM @extschema@.rl_null_argument('rate_limit_check', ARRAY['name', 'key', 'cost'],
                                 ARRAY[$1, $2, $3::text], 'Only max_wait may be NULL, meaning no reservation.');
    END IF;
    RETURN @extschema@.rl_policy_call('rate_limit_check', $1, $2, $3, @extschema@.rl_max_wait($4), 'check');
END
$$;
COMMENT ON FUNCTION rate_limit_check(text, text, float8, interval) IS
    'answers as rate_limit_take(name, key, cost, max_wait) would, without consuming or writing anything';

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
    PERFORM @extschema@.rl_require_writable('rate_limit_refund');
    p := @extschema@.rl_policy($1);
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

-- The elements of array argument what, none NULL (ArrayElements); an
-- array of costs comes as text, with its NULLs and dimensions.
CREATE FUNCTION rl_limit_list_elements(function_name text, what text, elements text[])
RETURNS integer
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.array_ndims(elements) > 1 THEN
        PERFORM @extschema@.rl_report_bad_limit_list(pg_catalog.format('%s has %s dimensions.', what,
                                                           pg_catalog.array_ndims(elements)));
    END IF;
    FOR i IN 1..coalesce(pg_catalog.cardinality(elements), 0) LOOP
        IF elements[pg_catalog.array_lower(elements, 1) + i - 1] IS NULL THEN
            PERFORM @extschema@.rl_report_null_argument(function_name, pg_catalog.format('%s[%s]', what, i),
                                            'Every element of names, keys and costs needs a value.');
        END IF;
    END LOOP;
    RETURN coalesce(pg_catalog.cardinality(elements), 0);
END
$$;

-- Takes request[b] from bucket (name[b], key[b]) under limit[b], a new one
-- starting at initial[b] (NULL: full), for every b or for none (storage's
-- TakeAll); the buckets are distinct and in canonical order (bytewise by
-- name, then key).  A denial on the buckets as committed is final with
-- nothing locked; a grant is decided again once every bucket is locked in
-- that order, inside a subtransaction that a denial found then rolls back.
-- Denied, every bucket reports what it holds; a new key below full is
-- recorded and a denied limit with a penalty box starts it.
CREATE FUNCTION rl_take_buckets(b_name text[], b_key text[], b_limit rl_limit[],
                                b_request rl_request[], b_initial float8[],
                                OUT all_allowed boolean, OUT b_decision rl_decision[])
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    buckets integer := pg_catalog.cardinality(b_name);
    b_state @extschema@.rl_bucket[] := '{}';
    b_exists boolean[] := '{}';
    b_inserted boolean[] := pg_catalog.array_fill(false, ARRAY[pg_catalog.cardinality(b_name)]);
    d @extschema@.rl_decision;
    s @extschema@.rl_bucket;
    now_us bigint;
    wait float8;
    inserted integer;
BEGIN
    all_allowed := true;
    b_decision := '{}';
    IF buckets = 1 THEN
        d := @extschema@.rl_apply(b_name[1], b_key[1], b_limit[1], b_request[1], 'take', 0::float8, b_initial[1]);
        b_decision[1] := d;
        all_allowed := d.allowed;
    ELSE
        -- Every bucket as committed, nothing locked.
        now_us := @extschema@.rl_now();
        FOR b IN 1..buckets LOOP
            SELECT t.tokens, t.stamp_us, t.blocked_until_us INTO s
              FROM @extschema@.rl_buckets AS t WHERE t.name = b_name[b] AND t.key = b_key[b];
            b_exists[b] := FOUND;
            IF NOT FOUND THEN
                s := ROW(coalesce(b_initial[b], b_limit[b].burst), now_us, @extschema@.rl_not_blocked())::@extschema@.rl_bucket;
            END IF;
            b_state[b] := s;
            b_decision[b] := @extschema@.rl_decide(s, b_limit[b], b_request[b], now_us);
            all_allowed := all_allowed AND b_decision[b].allowed;
        END LOOP;
        IF all_allowed THEN
            BEGIN
                FOR b IN 1..buckets LOOP
                    -- The row locked, or a new key's first row, locked by
                    -- being inserted; one inserted (or deleted) meanwhile:
                    -- look again.
                    LOOP
                        SELECT t.tokens, t.stamp_us, t.blocked_until_us INTO s
                          FROM @extschema@.rl_buckets AS t WHERE t.name = b_name[b] AND t.key = b_key[b] FOR UPDATE;
                        EXIT WHEN FOUND;
                        s := ROW(coalesce(b_initial[b], b_limit[b].burst), @extschema@.rl_now(), @extschema@.rl_not_blocked())::@extschema@.rl_bucket;
                        INSERT INTO @extschema@.rl_buckets AS t
                        VALUES (b_name[b], b_key[b], s.tokens, s.stamp_us, s.stamp_us, s.blocked_until_us)
                        ON CONFLICT ON CONSTRAINT rl_buckets_pkey DO NOTHING;
                        GET DIAGNOSTICS inserted = ROW_COUNT;
                        IF inserted = 1 THEN
                            b_inserted[b] := true;
                            EXIT;
                        END IF;
                    END LOOP;
                    b_exists[b] := NOT b_inserted[b];
                    b_state[b] := s;
                END LOOP;
                -- One clock reading once every wait is over.
                now_us := @extschema@.rl_now();
                FOR b IN 1..buckets LOOP
                    IF b_inserted[b] THEN
                        s := b_state[b];
                        s.stamp_us := now_us;
                        b_state[b] := s;
                    END IF;
                    b_decision[b] := @extschema@.rl_decide(b_state[b], b_limit[b], b_request[b], now_us);
                    all_allowed := all_allowed AND b_decision[b].allowed;
                END LOOP;
                IF all_allowed IS NOT TRUE THEN
                    RAISE SQLSTATE 'RLTA0';
                END IF;
                FOR b IN 1..buckets LOOP
                    d := b_decision[b];
                    IF d.write OR (b_inserted[b] AND b_initial[b] < b_limit[b].burst) THEN
                        UPDATE @extschema@.rl_buckets AS t
                           SET tokens = (d.next).tokens, stamp_us = (d.next).stamp_us,
                               full_at_us = @extschema@.rl_full_at(d, now_us),
                               blocked_until_us = (d.next).blocked_until_us
                         WHERE t.name = b_name[b] AND t.key = b_key[b];
                    ELSIF b_inserted[b] THEN
                        DELETE FROM @extschema@.rl_buckets AS t WHERE t.name = b_name[b] AND t.key = b_key[b];
                    END IF;
                END LOOP;
            EXCEPTION WHEN SQLSTATE 'RLTA0' THEN
                -- Rolled back: the rows inserted to be locked are gone again.
                FOR b IN 1..buckets LOOP
                    IF b_inserted[b] THEN
                        b_exists[b] := false;
                    END IF;
                END LOOP;
            END;
        END IF;
        IF NOT all_allowed THEN
            -- Nothing was taken: every bucket reports what it holds; one that
            -- would have granted alone still says so, with its wait.
            now_us := @extschema@.rl_now();
            FOR b IN 1..buckets LOOP
                IF b_decision[b].allowed THEN
                    wait := b_decision[b].retry_after;
                    d := @extschema@.rl_decide(b_state[b], b_limit[b], ROW(0, false, false, 0, 'Infinity')::@extschema@.rl_request, now_us);
                    d.allowed := true;
                    d.retry_after := wait;
                    b_decision[b] := d;
                END IF;
            END LOOP;
        END IF;
    END IF;

    -- A denied key never seen before still starts earning now; a limit with
    -- a penalty box that denied starts its box.
    IF NOT all_allowed AND buckets > 1 THEN
        FOR b IN 1..buckets LOOP
            IF b_limit[b].penalty_us > 0 AND NOT b_decision[b].allowed AND b_request[b].cost > 0 THEN
                d := @extschema@.rl_apply(b_name[b], b_key[b], b_limit[b], b_request[b], 'penalize', 0::float8, b_initial[b]);
                -- The box stored is the one to wait for.
                IF d.retry_after > b_decision[b].retry_after THEN
                    wait := d.retry_after;
                    d := b_decision[b];
                    d.retry_after := wait;
                    b_decision[b] := d;
                END IF;
            ELSIF NOT b_exists[b] AND b_initial[b] < b_limit[b].burst THEN
                PERFORM @extschema@.rl_apply(b_name[b], b_key[b], b_limit[b], b_request[b], 'record', 0::float8, b_initial[b]);
            END IF;
        END LOOP;
    END IF;

END
$$;

-- Takes costs[i] (1 each when NULL) from (names[i], keys[i]) under policy
-- names[i] for every i, or from none (TakeAllLimits): the limits checked,
-- merged per bucket in canonical order, taken by rl_take_buckets, and the
-- answer with its binding limit.
CREATE FUNCTION rl_take_all(names text[], keys text[], costs float8[], max_wait float8)
RETURNS rate_limit_all_decision
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    count integer;
    key_count integer;
    cost_count integer;
    given_policy @extschema@.rl_policies[];
    given_limit @extschema@.rl_limit[];
    given_request @extschema@.rl_request[];
    order_of integer[];
    -- The distinct buckets, in canonical order.
    b_name text[] := '{}';
    b_key text[] := '{}';
    b_limit @extschema@.rl_limit[] := '{}';
    b_request @extschema@.rl_request[] := '{}';
    b_initial float8[] := '{}';
    b_decision @extschema@.rl_decision[] := '{}';
    bucket_of integer[];
    buckets integer := 0;
    p @extschema@.rl_policies;
    l @extschema@.rl_limit;
    r @extschema@.rl_request;
    d @extschema@.rl_decision;
    cap float8;
    all_allowed boolean := true;
    binding integer := 1;
    better boolean;
    longest float8 := 0;
    remaining float8[] := '{}';
    decisions @extschema@.rate_limit_decision[] := '{}';
    result @extschema@.rate_limit_all_decision;
    c integer;
BEGIN
    count := @extschema@.rl_limit_list_elements('rate_limit_take_all', 'names', names);
    key_count := @extschema@.rl_limit_list_elements('rate_limit_take_all', 'keys', keys);
    cost_count := count;
    IF costs IS NOT NULL THEN
        cost_count := @extschema@.rl_limit_list_elements('rate_limit_take_all', 'costs', costs::text[]);
    END IF;
    IF count = 0 THEN
        PERFORM @extschema@.rl_report_bad_limit_list('No limit was given.');
    END IF;
    IF key_count <> count OR cost_count <> count THEN
        PERFORM @extschema@.rl_report_bad_limit_list(pg_catalog.format(
            'The lengths of names, keys and costs are %s, %s and %s.', count, key_count, cost_count));
    END IF;
    IF count > 64 THEN
        PERFORM @extschema@.rl_report_too_many_limits(count, 64);
    END IF;
    PERFORM @extschema@.rl_require_writable('rate_limit_take_all');
    -- Subscripts from 1, whatever the arrays' lower bounds.
    names := names[pg_catalog.array_lower(names, 1):pg_catalog.array_upper(names, 1)];
    keys := keys[pg_catalog.array_lower(keys, 1):pg_catalog.array_upper(keys, 1)];
    IF costs IS NOT NULL THEN
        costs := costs[pg_catalog.array_lower(costs, 1):pg_catalog.array_upper(costs, 1)];
    END IF;

    FOR i IN 1..count LOOP
        PERFORM @extschema@.rl_check_name_and_key(names[i], keys[i]);
        p := @extschema@.rl_policy(names[i]);
        IF p.shards > 1 THEN
            PERFORM @extschema@.rl_report_sharded_take_all(names[i]);
        END IF;
        l := @extschema@.rl_policy_limit(p, names[i], keys[i]);
        r := @extschema@.rl_policy_request(p, coalesce(costs[i], 1), max_wait);
        PERFORM @extschema@.rl_check_request(l, r, 'policy', l.rate);
        given_policy[i] := p;
        given_limit[i] := l;
        given_request[i] := r;
    END LOOP;

    -- The buckets in canonical order; the costs of a bucket given more than
    -- once add up (MergeRepeats).
    SELECT pg_catalog.array_agg(i ORDER BY names[i] COLLATE pg_catalog."C", keys[i] COLLATE pg_catalog."C", i)
      INTO order_of FROM pg_catalog.generate_series(1, count) AS i;
    bucket_of := pg_catalog.array_fill(0, ARRAY[count]);
    FOREACH c IN ARRAY order_of LOOP
        IF buckets > 0 AND b_name[buckets] = names[c] AND b_key[buckets] = keys[c] THEN
            r := b_request[buckets];
            r.cost := r.cost + given_request[c].cost;
            b_request[buckets] := r;
            cap := @extschema@.rl_debt_cap(b_limit[buckets], r);
            IF r.cost > b_limit[buckets].burst + cap THEN
                PERFORM @extschema@.rl_report_merged_cost_exceeds_burst(names[c], keys[c], b_limit[buckets].burst, cap);
            END IF;
        ELSE
            buckets := buckets + 1;
            b_name[buckets] := names[c];
            b_key[buckets] := keys[c];
            b_limit[buckets] := given_limit[c];
            b_request[buckets] := given_request[c];
            b_initial[buckets] := given_policy[c].initial;
        END IF;
        bucket_of[c] := buckets;
    END LOOP;
    FOR b IN 1..buckets LOOP
        PERFORM @extschema@.rl_check_request(b_limit[b], b_request[b], 'policy', b_limit[b].rate);
    END LOOP;

    SELECT t.all_allowed, t.b_decision INTO all_allowed, b_decision
      FROM @extschema@.rl_take_buckets(b_name, b_key, b_limit, b_request, b_initial) AS t;

    -- The binding limit: denied, the one to wait longest for; granted, the
    -- one left with the smallest share of its burst; ties: the first given.
    FOR i IN 2..count LOOP
        d := b_decision[bucket_of[i]];
        better := CASE WHEN all_allowed
                       THEN d.remaining / b_limit[bucket_of[i]].burst
                            < b_decision[bucket_of[binding]].remaining / b_limit[bucket_of[binding]].burst
                       ELSE NOT d.allowed AND (b_decision[bucket_of[binding]].allowed
                                               OR d.retry_after > b_decision[bucket_of[binding]].retry_after) END;
        IF better THEN
            binding := i;
        END IF;
    END LOOP;
    FOR i IN 1..count LOOP
        d := b_decision[bucket_of[i]];
        remaining := remaining || d.remaining;
        decisions := decisions || @extschema@.rl_policy_answer(d, given_policy[i], names[i]);
        IF d.retry_after > longest THEN
            longest := d.retry_after;
        END IF;
    END LOOP;
    result.allowed := all_allowed;
    result.retry_after := CASE WHEN all_allowed THEN longest
                               ELSE b_decision[bucket_of[binding]].retry_after END;
    result.binding_name := names[binding];
    result.binding_key := keys[binding];
    result.remaining := remaining;
    result.decisions := decisions;
    RETURN result;
END
$$;

CREATE FUNCTION rate_limit_take_all(names text[], keys text[], costs float8[] DEFAULT NULL)
RETURNS rate_limit_all_decision
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.num_nulls($1, $2) > 0 THEN
        PERFORM @extschema@.rl_null_argument('rate_limit_take_all', ARRAY['names', 'keys'],
                                 ARRAY[$1::text, $2::text], 'Every argument of this function needs a value.');
    END IF;
    RETURN @extschema@.rl_take_all($1, $2, $3, 0::float8);
END
$$;
COMMENT ON FUNCTION rate_limit_take_all(text[], text[], float8[]) IS
    'takes costs[i] (default 1) from bucket (names[i], keys[i]) under policy names[i] for every i, or from none; rows are locked in one canonical order';

CREATE FUNCTION rate_limit_take_all(names text[], keys text[], costs float8[], max_wait interval)
RETURNS rate_limit_all_decision
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.num_nulls($1, $2) > 0 THEN
        PERFORM @extschema@.rl_null_argument('rate_limit_take_all', ARRAY['names', 'keys'],
                                 ARRAY[$1::text, $2::text],
                                 'Only costs (meaning 1 each) and max_wait (meaning no reservation) may be NULL.');
    END IF;
    RETURN @extschema@.rl_take_all($1, $2, $3, @extschema@.rl_max_wait($4));
END
$$;
COMMENT ON FUNCTION rate_limit_take_all(text[], text[], float8[], interval) IS
    'takes costs[i] (default 1) from bucket (names[i], keys[i]) under policy names[i] for every i, or from none, each reserving within max_wait where its policy allows; rows are locked in one canonical order';
-- portable/shards.sql
--
-- Keys a policy splits over several rows ("shards"), as src/core/shards.cpp
-- and src/pg/sharding.cpp keep them: shard n of key is the row key, U+001F,
-- n in decimal; each holds and refills a 1/shards share of the limit.
-- Included by ratelimit.sql, after policies.sql.

-- The row key of shard n of key (ShardKey).
CREATE FUNCTION rl_shard_key(p_key text, n integer) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT (p_key OPERATOR(pg_catalog.||) pg_catalog.chr(31)) OPERATOR(pg_catalog.||) n::pg_catalog.text $$;

-- One shard's share of a limit split over shards buckets (ShareOfShard).
CREATE FUNCTION rl_share_of_shard(l rl_limit, shards integer) RETURNS rl_limit
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT ROW(l.rate OPERATOR(pg_catalog./) shards::pg_catalog.float8, l.burst OPERATOR(pg_catalog./) shards::pg_catalog.float8,
                 l.window_us, l.phase_us, l.floor_rate OPERATOR(pg_catalog./) shards::pg_catalog.float8,
                 l.penalty_us)::@extschema@.rl_limit $$;

-- The limit row row_key of name has under policy p as it is defined now,
-- with the key and shard it stands for (PolicyRowLimit): a key's own row
-- (shard NULL), or shard n of a key; no limit for a row the policy does not
-- read (a shard number it no longer has, or a plain key of a split one).
CREATE FUNCTION rl_policy_row(p rl_policies, p_name text, row_key text,
                              OUT row_limit rl_limit, OUT key text, OUT shard integer)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    parts pg_catalog.text[];
BEGIN
    key := row_key;
    shard := NULL;
    IF p.shards OPERATOR(pg_catalog.=) 1 THEN
        row_limit := @extschema@.rl_policy_limit(p, p_name, row_key);
        RETURN;
    END IF;
    -- One or two digits after the last U+001F, no leading zero: what "%d"
    -- writes below 64.
    parts := pg_catalog.regexp_match(row_key, '^(.*)\x1f([1-9]?[0-9])$'::pg_catalog.text);
    IF parts IS NULL OR parts[2]::integer OPERATOR(pg_catalog.>=) p.shards THEN
        row_limit := NULL;
        RETURN;
    END IF;
    key := parts[1];
    shard := parts[2]::integer;
    row_limit := @extschema@.rl_share_of_shard(@extschema@.rl_policy_limit(p, p_name, key), p.shards);
END
$$;

-- Shard n of key as it stands, refilled to now, without waiting for a
-- writer (PeekShard): a check of nothing on its row; a shard never seen
-- starts at its share of initial.
CREATE FUNCTION rl_peek_shard(p_name text, p_key text, n integer, share rl_limit,
                              initial float8) RETURNS rl_bucket
LANGUAGE sql VOLATILE
AS $$ SELECT (@extschema@.rl_apply(p_name, @extschema@.rl_shard_key(p_key, n), share, @extschema@.rl_no_request(), 'check'::pg_catalog.text,
                        '0'::pg_catalog.float8, initial)).next $$;
-- How a cost is spread over balances tokens (Spread): 'one' from the
-- richest, 'several' from the richest ones in turn, or 'deny'; take: what
-- from each; richest: the richest (first of equals), 1-based.
CREATE FUNCTION rl_spread(tokens float8[], share rl_limit, cost float8,
                          OUT kind text, OUT take float8[], OUT richest integer)
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    n integer := pg_catalog.cardinality(tokens);
    ord integer[] := '{}';
    j integer;
    swap integer;
    left_over pg_catalog.float8;
    piece pg_catalog.float8;
    s integer;
BEGIN
    take := pg_catalog.array_fill('0'::pg_catalog.float8, ARRAY[n]);
    FOR i IN 1..n LOOP
        ord[i] := i;
        j := i;
        WHILE j OPERATOR(pg_catalog.>) 1 AND tokens[ord[j]] OPERATOR(pg_catalog.>) tokens[ord[j OPERATOR(pg_catalog.-) 1]] LOOP
            swap := ord[j]; ord[j] := ord[j OPERATOR(pg_catalog.-) 1]; ord[j OPERATOR(pg_catalog.-) 1] := swap;
            j := j OPERATOR(pg_catalog.-) 1;
        END LOOP;
    END LOOP;
    richest := ord[1];
    IF @extschema@.rl_admits(tokens[ord[1]], share, ROW(cost, false, false, 0, 'Infinity')::@extschema@.rl_request) THEN
        take[ord[1]] := cost;
        kind := 'one';
        RETURN;
    END IF;
    left_over := cost;
    FOR i IN 1..n LOOP
        EXIT WHEN NOT (left_over OPERATOR(pg_catalog.>) '0'::pg_catalog.float8);
        s := ord[i];
        piece := CASE WHEN left_over OPERATOR(pg_catalog.<) tokens[s] THEN left_over ELSE tokens[s] END;
        EXIT WHEN NOT (piece OPERATOR(pg_catalog.>) '0'::pg_catalog.float8)
                  OR NOT @extschema@.rl_admits(tokens[s], share, ROW(piece, false, false, 0, 'Infinity')::@extschema@.rl_request);
        take[s] := piece;
        left_over := left_over OPERATOR(pg_catalog.-) piece;
    END LOOP;
    IF left_over OPERATOR(pg_catalog.>) '0'::pg_catalog.float8 THEN
        take := pg_catalog.array_fill('0'::pg_catalog.float8, ARRAY[n]);
        kind := 'deny';
    ELSE
        kind := 'several';
    END IF;
END
$$;

-- The plan for request r on shard states at at_us (PlanAt): a spread of
-- the refilled balances, or failing that, when r may reserve and the
-- richest admits it, the whole cost reserved on the richest ('reserve').
CREATE FUNCTION rl_plan_at(states rl_bucket[], share rl_limit, r rl_request, at_us bigint,
                           OUT kind text, OUT take float8[], OUT richest integer)
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    tokens pg_catalog.float8[] := '{}';
    cur @extschema@.rl_bucket;
BEGIN
    FOR s IN 1..pg_catalog.cardinality(states) LOOP
        tokens[s] := (@extschema@.rl_refill(states[s], share, at_us)).tokens;
    END LOOP;
    SELECT sp.kind, sp.take, sp.richest INTO kind, take, richest FROM @extschema@.rl_spread(tokens, share, r.cost) AS sp;
    IF kind OPERATOR(pg_catalog.<>) 'deny'::pg_catalog.text OR NOT r.reserve THEN
        RETURN;
    END IF;
    -- core::Admitted: the refilled richest admits the request lagging its stamp.
    cur := @extschema@.rl_refill(states[richest], share, at_us);
    IF @extschema@.rl_admits(cur.tokens, share, @extschema@.rl_lagging(r, @extschema@.rl_lag_micros(cur, at_us))) THEN
        take[richest] := r.cost;
        kind := 'reserve';
    END IF;
END
$$;

-- The plan for request r on shard states seen at now_us (PlanShards), with
-- each shard's state once it is carried out and a reservation's wait.
CREATE FUNCTION rl_plan_shards(seen rl_bucket[], share rl_limit, r rl_request, now_us bigint,
                               OUT kind text, OUT take float8[], OUT richest integer,
                               OUT after rl_bucket[], OUT wait float8)
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    d @extschema@.rl_decision;
BEGIN
    SELECT p.kind, p.take, p.richest INTO kind, take, richest FROM @extschema@.rl_plan_at(seen, share, r, now_us) AS p;
    after := '{}';
    wait := 0;
    FOR s IN 1..pg_catalog.cardinality(seen) LOOP
        IF kind = 'reserve' AND s = richest THEN
            d := @extschema@.rl_decide(seen[s], share, r, now_us);
            wait := d.retry_after;
        ELSE
            d := @extschema@.rl_decide(seen[s], share, ROW(take[s], false, false, 0, 'Infinity')::@extschema@.rl_request, now_us);
        END IF;
        after[s] := d.next;
    END LOOP;
END
$$;

-- Whole microseconds until states hold all they ever will (MicrosToSettle,
-- the largest over them) or catch up with their stamps.
CREATE FUNCTION rl_settle_micros(states rl_bucket[], share rl_limit, now_us bigint) RETURNS float8
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    settle float8 := 0;
    settled float8;
    micros float8;
    lag float8;
BEGIN
    FOR s IN 1..pg_catalog.cardinality(states) LOOP
        settled := (@extschema@.rl_refill(states[s], share, 9223372036854775807)).tokens;
        micros := CASE WHEN settled > (@extschema@.rl_refill(states[s], share, now_us)).tokens
                       THEN (@extschema@.rl_decide(states[s], share, ROW(settled, false, false, 0, 'Infinity')::@extschema@.rl_request,
                                       now_us)).retry_after * '1000000'::float8
                       ELSE 0 END;
        lag := states[s].stamp_us::float8 - now_us::float8;
        IF micros > settle THEN settle := micros; END IF;
        IF lag > settle THEN settle := lag; END IF;
    END LOOP;
    RETURN pg_catalog.ceil(settle);
END
$$;

-- Whether condition what holds of states at at_us: 'grants' (a plan for
-- r serves it) or 'holds' (together they hold at least target).
CREATE FUNCTION rl_shards_hold(what text, states rl_bucket[], share rl_limit, r rl_request,
                               target float8, at_us bigint) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    held pg_catalog.float8 := 0;
BEGIN
    IF what OPERATOR(pg_catalog.=) 'grants'::pg_catalog.text THEN
        RETURN (SELECT p.kind OPERATOR(pg_catalog.<>) 'deny'::pg_catalog.text FROM @extschema@.rl_plan_at(states, share, r, at_us) AS p);
    END IF;
    FOR s IN 1..pg_catalog.cardinality(states) LOOP
        held := held OPERATOR(pg_catalog.+) (@extschema@.rl_refill(states[s], share, at_us)).tokens;
    END LOOP;
    RETURN held OPERATOR(pg_catalog.>=) target;
END
$$;

-- The smallest whole-µs wait after which the condition holds (FirstMicros):
-- -1 if it never does, -2 if only beyond the last int64 microsecond.
CREATE FUNCTION rl_first_micros(what text, states rl_bucket[], share rl_limit, r rl_request,
                                target float8, now_us bigint) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    room bigint := 9223372036854775807 - greatest(now_us, 0);
    settle float8;
    beyond boolean;
    lo bigint := 0;
    hi bigint;
    mid bigint;
BEGIN
    IF @extschema@.rl_shards_hold(what, states, share, r, target, now_us) THEN
        RETURN 0;
    END IF;
    settle := @extschema@.rl_settle_micros(states, share, now_us);
    beyond := NOT (settle < room::float8);
    hi := CASE WHEN beyond THEN room ELSE settle::bigint END;
    IF hi < 1 THEN hi := 1; END IF;
    IF NOT @extschema@.rl_shards_hold(what, states, share, r, target, now_us + hi) THEN
        RETURN CASE WHEN beyond THEN -2 ELSE -1 END;
    END IF;
    WHILE hi - lo > 1 LOOP
        mid := lo + (hi - lo) / 2;
        IF @extschema@.rl_shards_hold(what, states, share, r, target, now_us + mid) THEN
            hi := mid;
        ELSE
            lo := mid;
        END IF;
    END LOOP;
    RETURN hi;
END
$$;

-- The answer to a sharded call of r that looked at states, standing there
-- once it is done (ShardOutcome).
CREATE FUNCTION rl_shard_outcome(allowed boolean, states rl_bucket[], share rl_limit,
                                 r rl_request, now_us bigint) RETURNS rl_decision
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    result @extschema@.rl_decision;
    look @extschema@.rl_decision;
    n integer := pg_catalog.cardinality(states);
    full_burst float8 := 0;
    target float8;
    wait bigint;
BEGIN
    result.allowed := allowed;
    result.remaining := 0;
    result.reset_after := 0;
    result.retry_after := 0;
    result.refill_after := 0;
    FOR s IN 1..n LOOP
        look := @extschema@.rl_decide(states[s], share, @extschema@.rl_no_request(), now_us);
        result.remaining := result.remaining + look.remaining;
        IF look.reset_after > result.reset_after THEN
            result.reset_after := look.reset_after;
        END IF;
        full_burst := full_burst + share.burst;
    END LOOP;
    IF NOT allowed THEN
        wait := @extschema@.rl_first_micros('grants', states, share, r, 0::float8, now_us);
        result.retry_after := CASE
            WHEN wait >= 0 THEN wait::float8 / '1000000'::float8
            WHEN wait = -2 AND share.rate > 0 AND (r.cost <= n * share.burst OR r.reserve)
                THEN '1.7976931348623157e308'::float8 / '1000000'::float8
            ELSE 'Infinity'::float8 END;
    END IF;
    target := @extschema@.rl_next_whole_token(result.remaining, full_burst);
    IF result.remaining < target THEN
        wait := @extschema@.rl_first_micros('holds', states, share, r, target, now_us);
        result.refill_after := CASE WHEN wait >= 0 THEN wait::float8 / '1000000'::float8
                                    WHEN wait = -2 THEN '1.7976931348623157e308'::float8 / '1000000'::float8
                                    ELSE 'Infinity'::float8 END;
    END IF;
    RETURN result;
END
$$;

-- Take (op 'take') or check ('check') request r on key, which policy p
-- splits over its shards, or refund amount to it ('refund')
-- (ShardedDecision, ShardedRefund): the richer of two shards picked at
-- random serves the call alone if it can; otherwise the whole key decides,
-- from its richest shards, all or nothing.
CREATE FUNCTION rl_sharded_call(p_name text, p_key text, p rl_policies, l rl_limit,
                                r rl_request, op text, amount float8) RETURNS rl_decision
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    shards integer := p.shards;
    share @extschema@.rl_limit := @extschema@.rl_share_of_shard(l, p.shards);
    initial float8 := p.initial / p.shards;
    shard_request @extschema@.rl_request;
    cost float8;
    numbers integer[];
    pair @extschema@.rl_bucket[];
    plan record;
    d @extschema@.rl_decision;
    answer @extschema@.rl_decision;
    every_shard @extschema@.rl_bucket[];
    canonical integer[];
    allowed boolean := false;
    wait float8 := 0;
    left_over float8;
    result @extschema@.rl_decision;
    t_keys text[];
    t_names text[];
    t_limits @extschema@.rl_limit[];
    t_requests @extschema@.rl_request[];
    t_initials float8[];
    t_numbers integer[];
    taken record;
    n integer;
BEGIN
    -- Shard numbers in canonical order: bytewise by their decimal forms.
    SELECT pg_catalog.array_agg(g.number ORDER BY g.number::text COLLATE pg_catalog."C") INTO canonical
      FROM pg_catalog.generate_series(0, shards - 1) AS g(number);
    IF op = 'refund' THEN
        result.allowed := true;
        result.remaining := 0;
        result.reset_after := 0;
        result.retry_after := 0;
        result.refill_after := 0;
        left_over := amount;
        FOREACH n IN ARRAY canonical LOOP
            IF left_over > 0 THEN
                d := @extschema@.rl_apply(p_name, @extschema@.rl_shard_key(p_key, n), share, NULL::@extschema@.rl_request, 'refund', left_over, initial);
                left_over := left_over - d.refunded;
            ELSE
                d := @extschema@.rl_apply(p_name, @extschema@.rl_shard_key(p_key, n), share, @extschema@.rl_no_request(), 'check', 0::float8,
                              initial);
            END IF;
            result.remaining := result.remaining + d.remaining;
            IF d.reset_after > result.reset_after THEN
                result.reset_after := d.reset_after;
            END IF;
        END LOOP;
        RETURN result;
    END IF;

    cost := r.cost;
    shard_request := r;
    shard_request.max_reserved := r.max_reserved / shards;
    IF cost > 2 * share.burst
       AND NOT (r.reserve AND cost <= share.burst + @extschema@.rl_debt_cap(share, shard_request)) THEN
        PERFORM @extschema@.rl_report_sharded_cost(cost, 2 * share.burst, shards, r.reserve);
    END IF;

    -- Two shards at random, as they stand.
    numbers[1] := pg_catalog.floor(pg_catalog.random() * shards)::integer;
    numbers[2] := (numbers[1] + 1 + pg_catalog.floor(pg_catalog.random() * (shards - 1))::integer) % shards;
    FOR i IN 1..2 LOOP
        pair[i] := @extschema@.rl_peek_shard(p_name, p_key, numbers[i], share, initial);
    END LOOP;
    SELECT * INTO plan FROM @extschema@.rl_plan_shards(pair, share, ROW(cost, false, false, 0, 'Infinity')::@extschema@.rl_request, @extschema@.rl_now());
    IF plan.kind = 'one' THEN
        IF op = 'check' THEN
            allowed := true;
            pair[plan.richest] := plan.after[plan.richest];
        ELSE
            -- In a subtransaction: a shard that denies once locked (others
            -- took from it meanwhile) is released before the whole key is
            -- locked in canonical order, or two sharded takes could
            -- deadlock over two shards.
            BEGIN
                d := @extschema@.rl_apply(p_name, @extschema@.rl_shard_key(p_key, numbers[plan.richest]), share,
                              ROW(cost, false, false, 0, 'Infinity')::@extschema@.rl_request, 'take', 0::float8, initial);
                IF NOT d.allowed AND NOT d.write THEN
                    RAISE SQLSTATE 'RLNW0';
                END IF;
            EXCEPTION WHEN SQLSTATE 'RLNW0' THEN
                NULL; -- denied, nothing written: the lock goes with the subtransaction
            END;
            allowed := d.allowed;
            pair[plan.richest] := d.next;
        END IF;
    END IF;

    IF allowed THEN
        -- The two tell enough unless they hold less than the call.
        answer := @extschema@.rl_shard_outcome(true, pair, share, ROW(cost, false, false, 0, 'Infinity')::@extschema@.rl_request, @extschema@.rl_now());
        IF answer.remaining >= cost AND answer.remaining >= 1 THEN
            RETURN answer;
        END IF;
        FOR s IN 0..shards - 1 LOOP
            every_shard[s + 1] := CASE WHEN s = numbers[1] THEN pair[1]
                                       WHEN s = numbers[2] THEN pair[2]
                                       ELSE @extschema@.rl_peek_shard(p_name, p_key, s, share, initial) END;
        END LOOP;
    ELSE
        -- The whole key decides (DecideOverEveryShard), planning again when
        -- others took what it counted on before it could lock the rows.
        FOR attempt IN 1..4 LOOP
            FOR s IN 0..shards - 1 LOOP
                every_shard[s + 1] := @extschema@.rl_peek_shard(p_name, p_key, s, share, initial);
            END LOOP;
            SELECT * INTO plan FROM @extschema@.rl_plan_shards(every_shard, share, shard_request, @extschema@.rl_now());
            EXIT WHEN plan.kind = 'deny';
            IF op = 'check' THEN
                every_shard := plan.after;
                wait := plan.wait;
                allowed := true;
                EXIT;
            END IF;
            -- TakeFromShards: each shard the plan draws on, in canonical order.
            t_names := '{}'; t_keys := '{}'; t_limits := '{}'; t_requests := '{}';
            t_initials := '{}'; t_numbers := '{}';
            FOREACH n IN ARRAY canonical LOOP
                CONTINUE WHEN NOT (plan.take[n + 1] > 0);
                t_names := t_names || p_name;
                t_keys := t_keys || @extschema@.rl_shard_key(p_key, n);
                t_limits := t_limits || share;
                t_requests := t_requests || CASE WHEN plan.kind = 'reserve' THEN shard_request
                                                 ELSE ROW(plan.take[n + 1], false, false, 0, 'Infinity')::@extschema@.rl_request END;
                t_initials := t_initials || initial;
                t_numbers := t_numbers || n;
            END LOOP;
            SELECT * INTO taken FROM @extschema@.rl_take_buckets(t_names, t_keys, t_limits, t_requests, t_initials);
            FOR t IN 1..pg_catalog.cardinality(t_numbers) LOOP
                every_shard[t_numbers[t] + 1] := (taken.b_decision[t]).next;
                IF taken.all_allowed AND plan.kind = 'reserve' THEN
                    wait := (taken.b_decision[t]).retry_after;
                END IF;
            END LOOP;
            IF taken.all_allowed THEN
                allowed := true;
                EXIT;
            END IF;
        END LOOP;
    END IF;

    -- Denied shards never seen before still start earning now, recorded in
    -- canonical order.
    IF NOT allowed AND op = 'take' AND initial < share.burst THEN
        FOREACH n IN ARRAY canonical LOOP
            PERFORM @extschema@.rl_apply(p_name, @extschema@.rl_shard_key(p_key, n), share, @extschema@.rl_no_request(), 'record', 0::float8, initial);
        END LOOP;
    END IF;
    result := @extschema@.rl_shard_outcome(allowed, every_shard, share, shard_request, @extschema@.rl_now());
    IF allowed THEN
        result.retry_after := wait;
    END IF;
    RETURN result;
END
$$;
-- portable/headers.sql
--
-- The values of the RateLimit-Policy, RateLimit and Retry-After HTTP header
-- fields, as the native extension writes them: the same functions, reading
-- the portable limiter's policies.  Included by ratelimit.sql.

-- For a decision under a policy (draft -10), its rate from the policy
-- unless given.
CREATE FUNCTION rate_limit_headers(
    decision rate_limit_decision,
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
    wait float8;
BEGIN
    IF decision IS NULL OR policy IS NULL THEN
        RAISE EXCEPTION 'decision and policy must not be null'
            USING ERRCODE = 'null_value_not_allowed',
                  DETAIL = 'The header values describe one decision under one policy.',
                  HINT = 'Pass the row rate_limit_take() returned and the policy name.';
    END IF;
    -- The limiter's decisions hold a finite positive capacity and waits of
    -- zero or more; NaN compares equal to itself and above every number.
    IF (decision.capacity OPERATOR(pg_catalog.>) '0'::float8
        AND decision.capacity OPERATOR(pg_catalog.<) 'Infinity'::float8
        AND decision.remaining OPERATOR(pg_catalog.<>) 'NaN'::float8
        AND decision.retry_after OPERATOR(pg_catalog.>=) '0'::float8
        AND decision.retry_after OPERATOR(pg_catalog.<>) 'NaN'::float8
        AND decision.reset_after OPERATOR(pg_catalog.>=) '0'::float8
        AND decision.reset_after OPERATOR(pg_catalog.<>) 'NaN'::float8) IS NOT TRUE THEN
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
        per_second := (@extschema@.rl_find_policy(policy)).tokens_per_second;
        IF per_second IS NULL THEN
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
    -- sf_max when the quotient would exceed it.
    window_seconds := CASE
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
    wait := CASE WHEN decision.retry_after OPERATOR(pg_catalog.>) '0'::float8
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
COMMENT ON FUNCTION rate_limit_headers(rate_limit_decision, text, float8) IS
    'values of the RateLimit-Policy, RateLimit and Retry-After HTTP headers (draft-ietf-httpapi-ratelimit-headers-10) for a decision under a policy (its rate from rl_policies unless given)';

-- For a decision alone (draft -11).
CREATE FUNCTION rate_limit_headers(
    decision rate_limit_decision,
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
    -- number; NULL makes the whole condition NULL.
    IF (decision.allowed IS NOT NULL
        AND decision.remaining OPERATOR(pg_catalog.>) '-Infinity'::float8
        AND decision.remaining OPERATOR(pg_catalog.<) 'Infinity'::float8
        AND decision.retry_after OPERATOR(pg_catalog.>=) '0'::float8
        AND decision.retry_after OPERATOR(pg_catalog.<>) 'NaN'::float8
        AND decision.reset_after OPERATOR(pg_catalog.>=) '0'::float8
        AND decision.reset_after OPERATOR(pg_catalog.<>) 'NaN'::float8
        AND decision.capacity OPERATOR(pg_catalog.>) '0'::float8
        AND decision.capacity OPERATOR(pg_catalog.<) 'Infinity'::float8
        AND decision.name OPERATOR(pg_catalog.<>) ''
        AND decision.quota OPERATOR(pg_catalog.>=) '0'::float8
        AND decision.quota OPERATOR(pg_catalog.<) 'Infinity'::float8
        AND per_seconds OPERATOR(pg_catalog.>) '0'::float8
        AND per_seconds OPERATOR(pg_catalog.<) 'Infinity'::float8
        AND decision.refill_after OPERATOR(pg_catalog.>=) '0'::float8
        AND decision.refill_after OPERATOR(pg_catalog.<>) 'NaN'::float8) IS NOT TRUE THEN
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
COMMENT ON FUNCTION rate_limit_headers(rate_limit_decision) IS
    'values of the RateLimit-Policy, RateLimit and Retry-After HTTP headers (draft-ietf-httpapi-ratelimit-headers-11) for a decision of rate_limit_take() or rate_limit_check()';

-- For a decision of rate_limit_take_all: one item per limit, in the order
-- given.
CREATE FUNCTION rate_limit_headers(
    decision rate_limit_all_decision,
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
        AND decision.retry_after OPERATOR(pg_catalog.>=) '0'::float8
        AND decision.retry_after OPERATOR(pg_catalog.<>) 'NaN'::float8
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
COMMENT ON FUNCTION rate_limit_headers(rate_limit_all_decision) IS
    'values of the RateLimit-Policy and RateLimit HTTP headers (one item per limit, in the order given) and of Retry-After (draft-ietf-httpapi-ratelimit-headers-11) for a decision of rate_limit_take_all()';
-- portable/maintenance.sql
--
-- Running the portable limiter for years: forgetting buckets whose deletion
-- changes no answer (rate_limit_purge), resetting a whole limit
-- (rate_limit_reset_limit), listing a limit's buckets (rate_limit_buckets)
-- and choosing whether bucket state is WAL-logged (rate_limit_set_logged).
-- Included by ratelimit.sql, after policies.sql.
--
-- Locking: purge commits after each batch, so that no row lock is held for
-- long.  A procedure that commits can neither be SECURITY DEFINER nor carry
-- a SET clause, so each batch is a SECURITY DEFINER function (the first
-- one also checks the call) and the procedure, running with the caller's
-- rights, only loops and commits, qualifying all it names.  Purge locks
-- rows with SKIP LOCKED, so a take in flight keeps its row and purge never
-- waits.  reset_limit deletes in one transaction,
-- locking the limit's rows in key order.

-- A stored time in whole microseconds as a timestamptz (±2^63-1 and
-- -2^63: ±infinity).
CREATE FUNCTION rl_timestamp(us bigint) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN us OPERATOR(pg_catalog.>=) '9223372036854775807'::bigint THEN 'infinity'::pg_catalog.timestamptz
                  WHEN us OPERATOR(pg_catalog.<=) '-9223372036854775807'::bigint THEN '-infinity'::pg_catalog.timestamptz
                  ELSE ('2000-01-01 00:00:00+00'::pg_catalog.timestamptz
                        OPERATOR(pg_catalog.+) ((us OPERATOR(pg_catalog./) '1000000'::bigint) OPERATOR(pg_catalog.*) '1 second'::interval))
                       OPERATOR(pg_catalog.+) ((us OPERATOR(pg_catalog.%) '1000000'::bigint) OPERATOR(pg_catalog.*) '1 microsecond'::interval) END $$;

-- Whether row (tokens, stamp, full_at, box) of (name, row_key) can be
-- forgotten at now_us (Forgettable): by its policy as defined now, if it
-- has one (never when the policy remembers first sightings); otherwise by
-- the full_at its last write stored.
CREATE FUNCTION rl_forgettable(p rl_policies, p_name text, row_key text, b rl_bucket,
                               full_at_us bigint, now_us bigint) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    l @extschema@.rl_limit;
BEGIN
    IF b.stamp_us OPERATOR(pg_catalog.>) now_us THEN
        RETURN false;
    END IF;
    IF p.name IS NULL THEN
        RETURN full_at_us OPERATOR(pg_catalog.<=) now_us;
    END IF;
    IF p.initial OPERATOR(pg_catalog.<) p.burst THEN
        RETURN false;
    END IF;
    l := (@extschema@.rl_policy_row(p, p_name, row_key)).row_limit;
    IF l IS NULL THEN
        RETURN full_at_us OPERATOR(pg_catalog.<=) now_us;
    END IF;
    RETURN @extschema@.rl_is_full(b, l, now_us);
END
$$;

-- One batch of rate_limit_purge: of the buckets (of name, or of every name
-- when NULL) after (after_name, after_key) in key order, the next
-- batch_size (at most 1000) are judged and the forgettable ones not locked by anyone are
-- deleted.  Returns how many, and the last bucket judged (NULL: none left).
-- The first batch (after_name NULL) checks the call first, as the native
-- procedure does before its first batch.
CREATE FUNCTION rl_purge_batch(p_name text, after_name text, after_key text, batch_size integer,
                               OUT deleted bigint, OUT last_name text, OUT last_key text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    now_us bigint := @extschema@.rl_now();
BEGIN
    IF after_name IS NULL THEN
        IF p_name = '' THEN
            PERFORM @extschema@.rl_report_empty_name();
        END IF;
        IF pg_catalog.octet_length(p_name) > 256 THEN
            PERFORM @extschema@.rl_report_too_long('name', pg_catalog.octet_length(p_name), 256);
        END IF;
        PERFORM @extschema@.rl_begin_batches('rate_limit_purge');
    END IF;
    IF pg_catalog.current_setting('transaction_read_only') = 'on' THEN
        PERFORM @extschema@.rl_report_read_only_delete('rate_limit_purge');
    END IF;
    SELECT c.name, c.key INTO last_name, last_key
      FROM (SELECT t.name, t.key FROM @extschema@.rl_buckets AS t
             WHERE (p_name IS NULL OR t.name = p_name)
               AND (after_name IS NULL OR (t.name, t.key) > (after_name, after_key))
             ORDER BY t.name, t.key LIMIT least(batch_size, 1000)) AS c
     ORDER BY c.name DESC, c.key DESC LIMIT 1;
    IF last_name IS NULL THEN
        deleted := 0;
        RETURN;
    END IF;
    -- Judged on the latest version once it is locked (READ COMMITTED
    -- rechecks the condition on a row replaced meanwhile); a row someone
    -- holds is skipped.  So is a row whose policy the snapshot sees in a
    -- version that a committed transaction has replaced or deleted since
    -- (see rl_find_policy): full by that definition, it may not be by the
    -- latest one.  And when any policy was defined, redefined or dropped
    -- since the snapshot was taken (rl_policies_changed, read once, in the
    -- same snapshot), so is every row whose name has no policy in it: a
    -- policy defined since may govern the name, and a row full by the
    -- limit it was written with may not be by that policy.  Left, a row is
    -- judged again by the next purge: leaving one changes no answer.
    WITH judged AS (
        SELECT t.ctid AS row_id
          FROM @extschema@.rl_buckets AS t LEFT JOIN @extschema@.rl_policies AS p ON p.name = t.name
         WHERE (p_name IS NULL OR t.name = p_name)
           AND (after_name IS NULL OR (t.name, t.key) > (after_name, after_key))
           AND (t.name, t.key) <= (last_name, last_key)
           AND (p.name IS NULL OR p.xmax = '0'::xid OR p.xmax = p.xmin OR NOT @extschema@.rl_committed(p.xmax))
           AND (p.name IS NOT NULL OR NOT (SELECT @extschema@.rl_policies_changed()))
           AND @extschema@.rl_forgettable(p, t.name, t.key, ROW(t.tokens, t.stamp_us, t.blocked_until_us)::@extschema@.rl_bucket,
                              t.full_at_us, now_us)
           FOR UPDATE OF t SKIP LOCKED)
    DELETE FROM @extschema@.rl_buckets AS t USING judged WHERE t.ctid = judged.row_id;
    GET DIAGNOSTICS deleted = ROW_COUNT;
END
$$;
-- Executable by anyone: a batch deletes only buckets whose deletion changes
-- no answer, so calling it directly gains nothing; the procedure, which
-- runs with its caller's rights, needs it (and nothing else of the
-- limiter's).
GRANT EXECUTE ON FUNCTION rl_purge_batch(text, text, text, integer) TO PUBLIC;


-- Before purge's first batch (BeginBatches): refused on a standby,
-- and inside a transaction block, where it could not commit: there the
-- CALL is not the statement that began the transaction.  (From a function
-- it is, and the procedure's first COMMIT refuses it, with 2D000.)
CREATE FUNCTION rl_begin_batches(function_name text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.pg_is_in_recovery() THEN
        PERFORM @extschema@.rl_report_recovery(function_name, @extschema@.rl_state_logged());
    END IF;
    IF pg_catalog.statement_timestamp() <> pg_catalog.transaction_timestamp() THEN
        PERFORM @extschema@.rl_report_atomic_call(function_name, '1000 keys');
    END IF;
END
$$;

-- The purge procedure: the batches, each committed.
CREATE PROCEDURE rate_limit_purge(name text DEFAULT NULL, INOUT purged bigint DEFAULT NULL)
LANGUAGE plpgsql
AS $$
DECLARE
    batch record;
    after_name pg_catalog.text;
    after_key pg_catalog.text;
BEGIN
    purged := 0;
    LOOP
        batch := @extschema@.rl_purge_batch(name, after_name, after_key, 1000);
        purged := purged OPERATOR(pg_catalog.+) batch.deleted;
        COMMIT;
        EXIT WHEN batch.last_name IS NULL;
        after_name := batch.last_name;
        after_key := batch.last_key;
    END LOOP;
END
$$;
COMMENT ON PROCEDURE rate_limit_purge(text, bigint) IS
    'forgets the buckets of name (NULL: of every name) whose deletion changes no answer: full again, with no debt and nothing else to remember; commits after each batch; purged: how many';
REVOKE ALL ON PROCEDURE rate_limit_purge(text, bigint) FROM PUBLIC;
-- As an extension the procedure stays the superuser's (it runs with its
-- caller's rights); the role that installed the extension may run it and
-- grant it to the role that runs maintenance.
GRANT EXECUTE ON PROCEDURE rate_limit_purge(text, bigint) TO @extowner@ WITH GRANT OPTION;
-- Resetting a whole limit hands out full buckets, so it is withheld from
-- PUBLIC, and runs with the rights of the limiter's owner: a procedure
-- that does cannot commit, so it deletes in one transaction, locking the
-- buckets in key order (canonical order, as every take locks them).
CREATE PROCEDURE rate_limit_reset_limit(name text, INOUT reset bigint DEFAULT NULL)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF $1 IS NULL THEN
        PERFORM @extschema@.rl_report_null_argument('rate_limit_reset_limit', 'name',
                                        'Pass the name of the limit whose buckets to reset.');
    END IF;
    IF $1 = '' THEN
        PERFORM @extschema@.rl_report_empty_name();
    END IF;
    IF pg_catalog.octet_length($1) > 256 THEN
        PERFORM @extschema@.rl_report_too_long('name', pg_catalog.octet_length($1), 256);
    END IF;
    IF pg_catalog.pg_is_in_recovery() THEN
        PERFORM @extschema@.rl_report_recovery('rate_limit_reset_limit', @extschema@.rl_state_logged());
    END IF;
    IF pg_catalog.current_setting('transaction_read_only') = 'on' THEN
        PERFORM @extschema@.rl_report_read_only_delete('rate_limit_reset_limit');
    END IF;
    -- Locked in key order first; the DELETE, a statement of its own, then
    -- sees the latest version of every row (READ COMMITTED).
    PERFORM FROM @extschema@.rl_buckets AS t WHERE t.name = $1 ORDER BY t.key FOR UPDATE;
    DELETE FROM @extschema@.rl_buckets AS t WHERE t.name = $1;
    GET DIAGNOSTICS reset = ROW_COUNT;
END
$$;
COMMENT ON PROCEDURE rate_limit_reset_limit(text, bigint) IS
    'forgets every bucket of limit name, so that each key starts afresh, in the caller''s transaction; reset: how many buckets';
REVOKE ALL ON PROCEDURE rate_limit_reset_limit(text, bigint) FROM PUBLIC;

-- The buckets of a limit in key order, as ListBucket shows them.
CREATE FUNCTION rate_limit_buckets(
    name            text,
    OUT key         text,
    OUT shard       integer,
    OUT balance     float8,
    OUT full_at     timestamptz,
    OUT tokens      float8,
    OUT last_refill timestamptz,
    OUT blocked_until timestamptz)
RETURNS SETOF record
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    p @extschema@.rl_policies;
    now_us bigint;
    b @extschema@.rl_bucket;
    row_of record;
    row_limit @extschema@.rl_limit;
    row_key text;
    row_shard integer;
    d @extschema@.rl_decision;
    stored record;
BEGIN
    IF $1 IS NULL THEN
        PERFORM @extschema@.rl_report_null_argument('rate_limit_buckets', 'name',
                                        'Pass the name of the limit whose buckets to list.');
    END IF;
    IF $1 = '' THEN
        PERFORM @extschema@.rl_report_empty_name();
    END IF;
    IF pg_catalog.octet_length($1) > 256 THEN
        PERFORM @extschema@.rl_report_too_long('name', pg_catalog.octet_length($1), 256);
    END IF;
    PERFORM @extschema@.rl_require_readable('rate_limit_buckets');
    p := @extschema@.rl_find_policy($1);
    now_us := @extschema@.rl_now();
    FOR stored IN SELECT t.key, t.tokens, t.stamp_us, t.full_at_us, t.blocked_until_us
                    FROM @extschema@.rl_buckets AS t WHERE t.name = $1 ORDER BY t.key LOOP
        b := ROW(stored.tokens, stored.stamp_us, stored.blocked_until_us)::@extschema@.rl_bucket;
        key := stored.key;
        shard := NULL;
        tokens := stored.tokens;
        last_refill := @extschema@.rl_timestamp(stored.stamp_us);
        blocked_until := CASE WHEN stored.blocked_until_us > now_us
                              THEN @extschema@.rl_timestamp(stored.blocked_until_us) END;
        row_limit := NULL;
        IF p.name IS NOT NULL THEN
            SELECT * INTO row_of FROM @extschema@.rl_policy_row(p, $1, stored.key);
            row_limit := row_of.row_limit;
            row_key := row_of.key;
            row_shard := row_of.shard;
        END IF;
        IF row_limit IS NOT NULL THEN
            key := row_key;
            shard := row_shard;
            d := @extschema@.rl_decide(b, row_limit, @extschema@.rl_no_request(), now_us);
            balance := d.remaining;
            full_at := @extschema@.rl_timestamp(@extschema@.rl_full_at(d, now_us));
        ELSE
            balance := NULL;
            full_at := @extschema@.rl_timestamp(stored.full_at_us);
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;
COMMENT ON FUNCTION rate_limit_buckets(text) IS
    'the buckets of limit name in key order: key, shard (of a policy that splits keys), balance now and when it is full (by the policy; without one, no balance and full_at as last stored), the stored tokens and last_refill, and until when a penalty box denies the key';
REVOKE ALL ON FUNCTION rate_limit_buckets(text) FROM PUBLIC;

-- Durability, when wanted: a logged table keeps bucket state across crashes
-- and on standbys, at the cost of WAL for every write.
CREATE FUNCTION rate_limit_set_logged(logged boolean)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    was_logged boolean;
BEGIN
    IF logged IS NULL THEN
        RAISE EXCEPTION 'logged must not be null'
            USING ERRCODE = 'null_value_not_allowed',
                  DETAIL = 'true keeps bucket state in a logged table, false in an unlogged one.',
                  HINT = 'Pass true or false.';
    END IF;
    SELECT c.relpersistence = 'p'::"char" INTO was_logged
      FROM pg_catalog.pg_class c WHERE c.oid = '@extschema@.rl_buckets'::pg_catalog.regclass;
    IF was_logged = logged THEN
        RETURN false;
    END IF;
    IF logged THEN
        ALTER TABLE @extschema@.rl_buckets SET LOGGED;
    ELSE
        ALTER TABLE @extschema@.rl_buckets SET UNLOGGED;
    END IF;
    RETURN true;
END
$$;
COMMENT ON FUNCTION rate_limit_set_logged(boolean) IS
    'keeps bucket state in a logged table (true: kept across crashes and on standbys, every write goes to WAL) or an unlogged one (false, the default: emptied by a crash, absent on standbys); rewrites the table; true if it changed';
REVOKE ALL ON FUNCTION rate_limit_set_logged(boolean) FROM PUBLIC;

-- Least rights: of the helpers, PUBLIC executes only rl_purge_batch.
DO $rights$
DECLARE
    routine pg_catalog.regprocedure;
BEGIN
    FOR routine IN
        SELECT p.oid FROM pg_catalog.pg_proc AS p
         WHERE p.pronamespace OPERATOR(pg_catalog.=) (SELECT n.oid FROM pg_catalog.pg_namespace AS n
                                                       WHERE n.nspname OPERATOR(pg_catalog.=) pg_catalog.current_schema())
           AND p.proname OPERATOR(pg_catalog.~) '^rl_'::pg_catalog.text
           AND p.proname OPERATOR(pg_catalog.<>) 'rl_purge_batch'::pg_catalog.name
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON ROUTINE %s FROM PUBLIC', routine);
    END LOOP;
END
$rights$;

-- In every routine, the schema's name in place of @extschema@, as the
-- extension's install puts it (which leaves this file out).

-- As an extension, a trusted one: its script runs as the bootstrap
-- superuser, who would own every object, and the SECURITY DEFINER functions
-- would run as a superuser for whoever installed them.  So the tables, the
-- view and the SECURITY DEFINER routines are handed to the role that
-- installed it (@extowner@): the functions run with that role's rights,
-- over tables it owns, as they do when that role runs this file with psql.
-- The routines that run with their caller's rights stay the superuser's,
-- so that the installing role cannot change what they do for others; that
-- role may execute them (its functions call them).
-- (Every operator is qualified: the schema may be that role's.)
DO $owner$
DECLARE
    member record;
BEGIN
    FOR member IN
        SELECT d.classid, d.objid
          FROM pg_catalog.pg_depend AS d
          JOIN pg_catalog.pg_extension AS e ON e.oid OPERATOR(pg_catalog.=) d.refobjid
         WHERE d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass::pg_catalog.oid
           AND e.extname OPERATOR(pg_catalog.=) 'ratelimit_portable'::pg_catalog.name
           AND d.deptype OPERATOR(pg_catalog.=) 'e'::pg_catalog."char"
    LOOP
        IF member.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass::pg_catalog.oid THEN
            IF (SELECT p.prosecdef FROM pg_catalog.pg_proc AS p WHERE p.oid OPERATOR(pg_catalog.=) member.objid) THEN
                EXECUTE pg_catalog.format('ALTER ROUTINE %s OWNER TO %s',
                                          member.objid::pg_catalog.regprocedure, $ext$@extowner@$ext$);
            ELSE
                EXECUTE pg_catalog.format('GRANT EXECUTE ON ROUTINE %s TO %s',
                                          member.objid::pg_catalog.regprocedure, $ext$@extowner@$ext$);
            END IF;
        ELSIF member.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass::pg_catalog.oid THEN
            EXECUTE pg_catalog.format('ALTER TABLE %s OWNER TO %s',
                                      member.objid::pg_catalog.regclass, $ext$@extowner@$ext$);
        END IF;
    END LOOP;
END
$owner$;


-- portable/core.sql
--
-- The token-bucket algebra of src/core/token_bucket.cpp in PL/pgSQL, for
-- servers that cannot load the C module.  The same formulas in the same
-- order, so that both give the same float8 numbers: test/portable/core_diff.sql
-- compares them call by call.  Times are whole microseconds since
-- 2000-01-01 (bigint); window arithmetic that may leave bigint is done in
-- numeric.  Runs in the schema it is installed into; every name it uses is
-- qualified or its own.

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
    RETURN a * b;
EXCEPTION WHEN numeric_value_out_of_range THEN
    -- Both factors are finite and not zero (else there is no error):
    -- beyond float8 when their magnitudes multiply to more than 1.
    IF pg_catalog.ln(pg_catalog.abs(a)) + pg_catalog.ln(pg_catalog.abs(b)) > 0 THEN
        RETURN CASE WHEN (a < 0) = (b < 0) THEN 'Infinity'::float8 ELSE '-Infinity'::float8 END;
    END IF;
    RETURN CASE WHEN (a < 0) = (b < 0) THEN '0'::float8 ELSE '-0'::float8 END;
END
$$;

-- a * b as C computes it: a rate times a time may leave float8's range
-- only when a factor is at one of its ends.
CREATE FUNCTION rl_product(a float8, b float8) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN pg_catalog.abs(a) < '1e150'::float8 AND (pg_catalog.abs(a) > '1e-150'::float8 OR a = 0)
                   AND pg_catalog.abs(b) < '1e150'::float8 AND (pg_catalog.abs(b) > '1e-150'::float8 OR b = 0)
                  THEN a * b ELSE rl_far_product(a, b) END $$;

-- Tokens credited for elapsed_us: the one refill formula.
CREATE FUNCTION rl_credit(rate float8, elapsed_us float8) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT rl_product(rate, elapsed_us / '1000000'::float8) $$;

-- ceil((target - tokens) / rate * 1e6) as C computes it, where a step
-- beyond float8 gives Infinity (or 0) instead of an error: only for a gap
-- or a rate at the ends of the range.
CREATE FUNCTION rl_far_micros(tokens float8, target float8, rate float8) RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    gap float8;
    seconds float8;
BEGIN
    BEGIN
        gap := target - tokens;
    EXCEPTION WHEN numeric_value_out_of_range THEN
        RETURN 'Infinity';
    END;
    BEGIN
        seconds := gap / rate;
    EXCEPTION WHEN numeric_value_out_of_range THEN
        seconds := CASE WHEN gap > rate THEN 'Infinity'::float8 ELSE 0 END;
    END;
    BEGIN
        RETURN pg_catalog.ceil(seconds * '1000000'::float8);
    EXCEPTION WHEN numeric_value_out_of_range THEN
        RETURN 'Infinity';
    END;
END
$$;

-- Whole microseconds until tokens reach target at rate ('Infinity': never).
CREATE FUNCTION rl_micros_until(tokens float8, target float8, rate float8) RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    us float8;
BEGIN
    IF NOT (tokens < target) THEN RETURN 0; END IF;
    IF NOT (rate > 0) THEN RETURN 'Infinity'; END IF;
    IF tokens > '-1e150'::float8 AND target < '1e150'::float8 AND rate > '1e-150'::float8 THEN
        us := pg_catalog.ceil((target - tokens) / rate * '1000000'::float8);
    ELSE
        us := rl_far_micros(tokens, target, rate);
    END IF;
    IF NOT (us < '9007199254740992'::float8) THEN
        -- Far future: finite (a positive rate gets there), at most the
        -- largest float8.
        RETURN CASE WHEN us < 'Infinity'::float8 THEN us ELSE '1.7976931348623157e308'::float8 END;
    END IF;
    FOR i IN 1..8 LOOP
        EXIT WHEN NOT (tokens + rl_credit(rate, us) < target);
        us := us + 1;
    END LOOP;
    RETURN us;
END
$$;

CREATE FUNCTION rl_add_waits(a float8, b float8) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN a = 'Infinity' OR b = 'Infinity' THEN 'Infinity'::float8
                  WHEN a > '1.7976931348623157e308'::float8 - b THEN '1.7976931348623157e308'::float8
                  ELSE a + b END $$;

-- floor(a / b) for b > 0.
CREATE FUNCTION rl_floor_div(a numeric, b numeric) RETURNS numeric
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN pg_catalog.mod(a, b) <> 0 AND a < 0 THEN pg_catalog.div(a, b) - 1
                  ELSE pg_catalog.div(a, b) END $$;

CREATE FUNCTION rl_next_boundary(l rl_limit, us bigint) RETURNS numeric
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT l.phase_us::numeric + (rl_floor_div(us::numeric - l.phase_us, l.window_us) + 1) * l.window_us $$;

CREATE FUNCTION rl_boundaries_crossed(l rl_limit, from_us bigint, to_us bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT (rl_floor_div(to_us::numeric - l.phase_us, l.window_us)
              - rl_floor_div(from_us::numeric - l.phase_us, l.window_us))::bigint $$;

CREATE FUNCTION rl_per_window(l rl_limit) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT rl_product(l.rate, l.window_us::float8 / '1000000'::float8) $$;

CREATE FUNCTION rl_floor_level(l rl_limit) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN l.floor_rate < l.burst THEN l.floor_rate ELSE l.burst END $$;

CREATE FUNCTION rl_fast_rate(l rl_limit) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN l.floor_rate > l.rate THEN l.floor_rate ELSE l.rate END $$;

CREATE FUNCTION rl_refills(l rl_limit) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN l.window_us > 0 THEN rl_per_window(l) > 0
                  ELSE l.rate > 0 OR l.floor_rate > 0 END $$;

CREATE FUNCTION rl_restart_micros(l rl_limit) RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    hour CONSTANT float8 := '3600000000'::float8;
    rate float8 := rl_fast_rate(l);
    fill float8;
BEGIN
    IF NOT (rate > 0) THEN RETURN 'Infinity'; END IF;
    IF rate > '1e-150'::float8 AND rate < '1e150'::float8
       AND l.burst > '1e-150'::float8 AND l.burst < '1e150'::float8 THEN
        fill := l.burst / rate * '1000000'::float8;
    ELSE
        fill := rl_far_micros(0, l.burst, rate);
    END IF;
    IF l.window_us > 0 THEN
        fill := l.window_us::float8 * (pg_catalog.ceil(fill / l.window_us::float8) + 1);
    END IF;
    RETURN CASE WHEN fill > hour THEN fill ELSE hour END;
END
$$;

CREATE FUNCTION rl_credit_continuous(l rl_limit, tokens float8, elapsed_us float8) RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    level float8 := rl_floor_level(l);
    fast float8;
    to_level_us float8;
    added float8;
BEGIN
    IF l.floor_rate > 0 AND tokens < level THEN
        fast := rl_fast_rate(l);
        to_level_us := (level - tokens) / fast * '1000000'::float8;
        IF elapsed_us <= to_level_us THEN
            RETURN tokens + rl_credit(fast, elapsed_us);
        END IF;
        tokens := level;
        elapsed_us := elapsed_us - to_level_us;
    END IF;
    added := rl_credit(l.rate, elapsed_us);
    RETURN CASE WHEN added >= l.burst - tokens THEN l.burst ELSE tokens + added END;
END
$$;

-- Credits refill up to now_us (core::Refill).
CREATE FUNCTION rl_refill(b rl_bucket, l rl_limit, now_us bigint) RETURNS rl_bucket
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    tokens float8 := CASE WHEN b.tokens < l.burst THEN b.tokens ELSE l.burst END;
    windows bigint;
    added float8;
BEGIN
    IF now_us <= b.stamp_us THEN
        IF b.stamp_us::float8 - now_us::float8 > rl_restart_micros(l) THEN
            RETURN ROW(tokens, now_us, b.blocked_until_us)::rl_bucket;
        END IF;
        RETURN ROW(tokens, b.stamp_us, b.blocked_until_us)::rl_bucket;
    END IF;
    IF l.window_us > 0 THEN
        windows := rl_boundaries_crossed(l, b.stamp_us, now_us);
        IF windows > 0 THEN
            added := rl_product(rl_per_window(l), windows::float8);
            tokens := CASE WHEN added >= l.burst - tokens THEN l.burst ELSE tokens + added END;
        END IF;
        RETURN ROW(tokens, now_us, b.blocked_until_us)::rl_bucket;
    END IF;
    -- An elapsed time beyond bigint: full (as __builtin_sub_overflow).
    IF b.stamp_us < 0 AND now_us > b.stamp_us + 9223372036854775807 THEN
        RETURN ROW(l.burst, now_us, b.blocked_until_us)::rl_bucket;
    END IF;
    tokens := rl_credit_continuous(l, tokens, (now_us - b.stamp_us)::float8);
    IF tokens > l.burst THEN tokens := l.burst; END IF;
    RETURN ROW(tokens, now_us, b.blocked_until_us)::rl_bucket;
END
$$;

CREATE FUNCTION rl_repaid_within(l rl_limit, seconds float8) RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    micros float8;
    win float8;
    windows float8;
    usable float8;
BEGIN
    IF NOT (seconds < 'Infinity'::float8) THEN RETURN 'Infinity'; END IF;
    IF l.window_us > 0 THEN
        micros := pg_catalog.floor(seconds * '1000000'::float8);
        win := l.window_us::float8;
        windows := pg_catalog.floor(micros / win);
        IF windows * win > micros THEN windows := windows - 1; END IF;
        RETURN CASE WHEN windows > 0 THEN rl_product(windows, rl_per_window(l)) ELSE 0 END;
    END IF;
    usable := seconds - '16'::float8 / '1000000'::float8;
    RETURN CASE WHEN usable > 0 THEN rl_product(rl_fast_rate(l), usable) ELSE 0 END;
END
$$;

CREATE FUNCTION rl_lagging(r rl_request, lag_us float8) RETURNS rl_request
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    left_s float8;
BEGIN
    IF lag_us > 0 AND r.max_wait < 'Infinity'::float8 THEN
        left_s := r.max_wait - lag_us / '1000000'::float8;
        r.max_wait := CASE WHEN left_s > 0 THEN left_s ELSE 0 END;
    END IF;
    RETURN r;
END
$$;

CREATE FUNCTION rl_lag_micros(refilled rl_bucket, at_us bigint) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN refilled.stamp_us > at_us THEN refilled.stamp_us::float8 - at_us::float8
                  ELSE 0::float8 END $$;

CREATE FUNCTION rl_debt_cap(l rl_limit, r rl_request) RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    by_time float8;
BEGIN
    IF NOT r.reserve THEN RETURN 0; END IF;
    by_time := rl_repaid_within(l, r.max_wait);
    IF r.debt_capped AND r.max_reserved < by_time THEN RETURN r.max_reserved; END IF;
    RETURN by_time;
END
$$;

-- a - b as C computes it: beyond float8, -Infinity or Infinity instead of
-- an error.
CREATE FUNCTION rl_difference(a float8, b float8) RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN a - b;
EXCEPTION WHEN numeric_value_out_of_range THEN
    RETURN CASE WHEN a > b THEN 'Infinity'::float8 ELSE '-Infinity'::float8 END;
END
$$;

CREATE FUNCTION rl_admits(tokens float8, l rl_limit, r rl_request) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    after float8 := CASE WHEN tokens > '-1e300'::float8 AND r.cost < '1e300'::float8
                         THEN tokens - r.cost ELSE rl_difference(tokens, r.cost) END;
BEGIN
    IF after >= 0 THEN RETURN true; END IF;
    IF after = '-Infinity'::float8 OR after = 'NaN'::float8 THEN RETURN false; END IF;
    IF NOT r.reserve OR NOT rl_refills(l) THEN RETURN false; END IF;
    RETURN -after <= rl_debt_cap(l, r);
END
$$;

CREATE FUNCTION rl_estimate_micros(l rl_limit, stamp_us bigint, now_us bigint, tokens float8,
                                   target float8) RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    lag_us float8 := CASE WHEN now_us < stamp_us THEN stamp_us::float8 - now_us::float8 ELSE 0 END;
    level float8;
    fast float8;
    per_window float8;
    windows float8;
    later float8;
BEGIN
    IF l.window_us <= 0 THEN
        level := rl_floor_level(l);
        IF NOT (l.floor_rate > 0) OR NOT (tokens < level) THEN
            RETURN rl_add_waits(lag_us, rl_micros_until(tokens, target, l.rate));
        END IF;
        fast := rl_fast_rate(l);
        IF target <= level THEN
            RETURN rl_add_waits(lag_us, rl_micros_until(tokens, target, fast));
        END IF;
        RETURN rl_add_waits(lag_us, rl_add_waits(rl_micros_until(tokens, level, fast),
                                                 rl_micros_until(level, target, l.rate)));
    END IF;
    IF NOT (tokens < target) THEN RETURN 0; END IF;
    per_window := rl_per_window(l);
    IF NOT (per_window > 0) THEN RETURN 'Infinity'; END IF;
    windows := pg_catalog.ceil((target - tokens) / per_window);
    later := (windows - 1) * l.window_us::float8;
    RETURN rl_add_waits((rl_next_boundary(l, CASE WHEN stamp_us > now_us THEN stamp_us ELSE now_us END)
                         - now_us)::float8, later);
END
$$;

-- Whether the wait condition holds of refilled bucket b at at_us: the
-- balance reaches level (r NULL), or request r is admitted.
CREATE FUNCTION rl_holds(b rl_bucket, at_us bigint, l rl_limit, level float8, r rl_request)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN r IS NULL THEN b.tokens >= level
                  ELSE rl_admits(b.tokens, l, rl_lagging(r, rl_lag_micros(b, at_us))) END $$;

-- The smallest whole-µs wait after which the condition holds (core::WaitMicros).
CREATE FUNCTION rl_wait_micros(from_b rl_bucket, l rl_limit, now_us bigint, estimate_us float8,
                               level float8, r rl_request) RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    max_us CONSTANT numeric := 9223372036854775807;
    first numeric;
    wait_n numeric;
    wait bigint;
    at bigint;
BEGIN
    IF NOT (estimate_us < '9007199254740992'::float8) THEN RETURN estimate_us; END IF;
    IF l.window_us > 0 THEN
        first := pg_catalog.trunc(estimate_us)::numeric - 2 * l.window_us::numeric;
        FOR k IN 0..5 LOOP
            wait_n := first + k * l.window_us::numeric;
            CONTINUE WHEN wait_n < 1;
            EXIT WHEN now_us::numeric + wait_n > max_us;
            at := (now_us::numeric + wait_n)::bigint;
            IF rl_holds(rl_refill(from_b, l, at), at, l, level, r) THEN
                RETURN wait_n::float8;
            END IF;
        END LOOP;
        RETURN estimate_us;
    END IF;
    wait := CASE WHEN estimate_us < 1 THEN 1 ELSE pg_catalog.trunc(estimate_us)::bigint END;
    IF now_us::numeric + wait > max_us THEN RETURN wait::float8; END IF;
    at := now_us + wait;
    FOR i IN 1..64 LOOP
        EXIT WHEN NOT (wait > 1 AND rl_holds(rl_refill(from_b, l, at - 1), at - 1, l, level, r));
        wait := wait - 1;
        at := at - 1;
    END LOOP;
    FOR i IN 1..64 LOOP
        EXIT WHEN rl_holds(rl_refill(from_b, l, at), at, l, level, r);
        EXIT WHEN at = max_us;
        at := at + 1;
        wait := wait + 1;
    END LOOP;
    RETURN wait::float8;
END
$$;

CREATE FUNCTION rl_seconds_to_level(after_call rl_bucket, l rl_limit, now_us bigint, stamp_us bigint,
                                    tokens float8, level float8) RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF tokens >= level THEN RETURN 0; END IF;
    RETURN rl_wait_micros(after_call, l, now_us,
                          rl_estimate_micros(l, stamp_us, now_us, tokens, level), level, NULL)
           / '1000000'::float8;
END
$$;

CREATE FUNCTION rl_next_whole_token(tokens float8, burst float8) RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    whole float8 := CASE WHEN tokens > 0 THEN pg_catalog.floor(tokens) ELSE 0 END;
    next float8 := whole + 1;
BEGIN
    IF NOT (next > tokens) THEN
        -- Beyond 2^53 a token more is not representable: the next float8.
        next := tokens + tokens * '2.220446049250313e-16'::float8;
    END IF;
    RETURN CASE WHEN next < burst THEN next ELSE burst END;
END
$$;

CREATE FUNCTION rl_box_end(l rl_limit, now_us bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN now_us::numeric + l.penalty_us > 9223372036854775807
                  THEN 9223372036854775807 ELSE now_us + l.penalty_us END $$;

-- Refills stored to now_us and decides the request (core::Decide).
CREATE FUNCTION rl_decide(stored rl_bucket, l rl_limit, r rl_request, now_us bigint)
RETURNS rl_decision
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    cur rl_bucket := rl_refill(stored, l, now_us);
    restarted boolean := cur.stamp_us < stored.stamp_us;
    now_r rl_request := rl_lagging(r, rl_lag_micros(cur, now_us));
    boxed boolean := r.cost > 0 AND now_us < stored.blocked_until_us;
    d rl_decision;
    nb rl_bucket;
    after_call rl_bucket;
    cap float8;
    target float8;
    box float8;
BEGIN
    d.allowed := NOT boxed AND rl_admits(cur.tokens, l, now_r);
    IF d.allowed THEN
        d.remaining := cur.tokens - r.cost;
        d.write := r.cost > 0 OR restarted;
        nb := ROW(d.remaining, cur.stamp_us, cur.blocked_until_us)::rl_bucket;
    ELSE
        d.remaining := cur.tokens;
        nb := cur;
        IF NOT boxed AND l.penalty_us > 0 AND r.cost > 0 THEN
            nb.blocked_until_us := rl_box_end(l, now_us);
            d.write := true;
        ELSE
            d.write := restarted;
        END IF;
    END IF;
    d.next := nb;
    after_call := CASE WHEN d.write OR d.allowed THEN nb ELSE stored END;
    IF d.allowed THEN
        d.retry_after := rl_seconds_to_level(after_call, l, now_us, cur.stamp_us, d.remaining, 0);
    ELSE
        cap := CASE WHEN rl_refills(l) THEN rl_debt_cap(l, now_r) ELSE 0 END;
        target := CASE WHEN cap < 'Infinity'::float8 THEN r.cost - cap ELSE r.cost END;
        d.retry_after := rl_wait_micros(after_call, l, now_us,
                                        rl_estimate_micros(l, cur.stamp_us, now_us, d.remaining, target),
                                        NULL, r) / '1000000'::float8;
        IF nb.blocked_until_us > now_us THEN
            box := (nb.blocked_until_us::float8 - now_us::float8) / '1000000'::float8;
            IF box > d.retry_after THEN d.retry_after := box; END IF;
        END IF;
    END IF;
    d.reset_after := rl_seconds_to_level(after_call, l, now_us, cur.stamp_us, d.remaining, l.burst);
    d.refill_after := rl_seconds_to_level(after_call, l, now_us, cur.stamp_us, d.remaining,
                                          rl_next_whole_token(d.remaining, l.burst));
    RETURN d;
END
$$;

-- Gives amount tokens back after refilling to now_us, capped at burst
-- (core::Refund).
CREATE FUNCTION rl_refund(stored rl_bucket, l rl_limit, amount float8, now_us bigint)
RETURNS rl_decision
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    cur rl_bucket := rl_refill(stored, l, now_us);
    tokens float8 := cur.tokens + amount;
    d rl_decision;
BEGIN
    IF tokens > l.burst THEN
        tokens := l.burst;
        d.refunded := l.burst - cur.tokens;
    ELSE
        d.refunded := amount;
    END IF;
    d.allowed := true;
    d.remaining := tokens;
    d.next := ROW(tokens, cur.stamp_us, cur.blocked_until_us)::rl_bucket;
    d.write := tokens <> stored.tokens OR cur.stamp_us <> stored.stamp_us;
    d.retry_after := rl_seconds_to_level(d.next, l, now_us, cur.stamp_us, tokens, 0);
    d.reset_after := rl_seconds_to_level(d.next, l, now_us, cur.stamp_us, tokens, l.burst);
    d.refill_after := rl_seconds_to_level(d.next, l, now_us, cur.stamp_us, tokens,
                                          rl_next_whole_token(tokens, l.burst));
    RETURN d;
END
$$;

-- When the bucket a decision made at now_us stored is full again and out of
-- any penalty box (core::FullAtMicros); 2^63 - 1: never.
CREATE FUNCTION rl_full_at(d rl_decision, now_us bigint) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    x float8 := CASE WHEN d.reset_after < '1e300'::float8 THEN d.reset_after * '1000000'::float8
                     ELSE 'Infinity'::float8 END;
    -- Halves away from zero, as std::round (round() on float8 goes to even).
    wait_us float8 := CASE WHEN x - pg_catalog.floor(x) >= '0.5'::float8 THEN pg_catalog.ceil(x)
                           ELSE pg_catalog.floor(x) END;
    at numeric;
BEGIN
    IF NOT (wait_us < '9007199254740992'::float8) THEN RETURN 9223372036854775807; END IF;
    at := now_us::numeric + wait_us::numeric;
    IF at > 9223372036854775807 THEN RETURN 9223372036854775807; END IF;
    RETURN greatest(at::bigint, (d.next).blocked_until_us);
END
$$;

-- Whether forgetting stored at now_us changes no later answer (core::IsFull).
CREATE FUNCTION rl_is_full(stored rl_bucket, l rl_limit, now_us bigint) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT stored.stamp_us <= now_us AND stored.blocked_until_us <= now_us
             AND (rl_refill(stored, l, now_us)).tokens >= l.burst $$;

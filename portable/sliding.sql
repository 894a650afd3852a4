-- portable/sliding.sql: sliding windows in the portable limiter.  Included
-- by policies.sql (before rate_limit_define_sliding_window, which calls
-- rl_require_sliding) and by the upgrade script to 0.4.0
-- (update--0.3.0--0.4.0.sql).
--
-- The algebra of src/core/sliding_window.cpp in PL/pgSQL: the same
-- formulas, the same float8 operations in the same order, and the waits
-- found by the same bisection over whole microseconds on the formula that
-- decides, so that both give the same float8 numbers
-- (test/sql/native/portable_sliding.sql compares them call by call).  A
-- window's state is an rl_window: tokens = max_count - current, the stamp
-- it was brought to, previous; its limit an rl_limit whose burst is
-- max_count, window_us the window and phase_us where windows start (the
-- Unix epoch).  A decision is an rl_decision whose next is the state's
-- tokens and stamp (no penalty box); its previous is that of the state
-- brought to the call's clock (rl_sliding_refill), which a call never
-- changes otherwise.  As in core.sql, the functions called on every take
-- have no SET clause, so every name in them is qualified.

-- rate_limit_define_sliding_window's check of what this target keeps: the
-- portable limiter keeps sliding windows (in its table; a storage of
-- 'memory' is refused by rl_require_memory_engine), so this raises nothing.
CREATE FUNCTION rl_require_sliding(storage text) RETURNS void
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT $$;
COMMENT ON FUNCTION rl_require_sliding(text) IS
    'raises an error for a sliding window this version does not keep (none: the portable limiter keeps them in its table)';

-- A sliding window's state (core::Bucket of a sliding window).
CREATE TYPE rl_window AS (
    tokens   float8,
    stamp_us bigint,
    previous float8);

-- The limit of sliding-window policy p: at most p.burst in any window of
-- p.window_us, windows aligned on the Unix epoch (PolicyLimit).
CREATE FUNCTION rl_sliding_limit(p rl_policies) RETURNS rl_limit
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT ROW(p.tokens_per_second, p.burst, p.window_us, '-946684800000000'::bigint,
                 '0'::pg_catalog.float8, '0'::bigint)::@extschema@.rl_limit $$;

-- The start of the window us is in (WindowStart), exact in numeric.
CREATE FUNCTION rl_window_start(l rl_limit, us bigint) RETURNS numeric
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT l.phase_us::numeric
             OPERATOR(pg_catalog.+) (@extschema@.rl_floor_div(us::numeric OPERATOR(pg_catalog.-) l.phase_us::numeric, l.window_us::numeric)
                                     OPERATOR(pg_catalog.*) l.window_us::numeric) $$;

-- previous's weight at us: (s + W - us) / W, in (0, 1] (PreviousWeight).
CREATE FUNCTION rl_previous_weight(l rl_limit, us bigint) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT ((@extschema@.rl_window_start(l, us) OPERATOR(pg_catalog.+) l.window_us::numeric
               OPERATOR(pg_catalog.-) us::numeric)::bigint)::pg_catalog.float8
             OPERATOR(pg_catalog./) l.window_us::pg_catalog.float8 $$;

-- Brings w to the window of now_us (SlidingRefill): current becomes previous
-- one window on, both go to 0 two or more on; a clock that stepped back
-- keeps the stamp, unless it is further ahead than an hour and two windows.
CREATE FUNCTION rl_sliding_refill(w rl_window, l rl_limit, now_us bigint) RETURNS rl_window
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    b @extschema@.rl_window := w;
    restart_us pg_catalog.float8;
    from_us numeric;
    to_us numeric;
    current pg_catalog.float8;
BEGIN
    IF b.tokens OPERATOR(pg_catalog.>) l.burst THEN
        b.tokens := l.burst;
    END IF;
    IF now_us OPERATOR(pg_catalog.<=) w.stamp_us THEN
        -- How far ahead of the clock a stamp may be (RestartMicros).
        restart_us := '2'::pg_catalog.float8 OPERATOR(pg_catalog.*) l.window_us::pg_catalog.float8;
        IF NOT (restart_us OPERATOR(pg_catalog.>) '3600000000'::pg_catalog.float8) THEN
            restart_us := '3600000000'::pg_catalog.float8;
        END IF;
        IF (w.stamp_us::pg_catalog.float8 OPERATOR(pg_catalog.-) now_us::pg_catalog.float8) OPERATOR(pg_catalog.>) restart_us THEN
            b.stamp_us := now_us;
        END IF;
        RETURN b;
    END IF;
    from_us := @extschema@.rl_window_start(l, w.stamp_us);
    to_us := @extschema@.rl_window_start(l, now_us);
    IF to_us OPERATOR(pg_catalog.<>) from_us THEN
        current := l.burst OPERATOR(pg_catalog.-) b.tokens;
        b.previous := CASE WHEN (to_us OPERATOR(pg_catalog.-) from_us) OPERATOR(pg_catalog.=) l.window_us::numeric
                                AND current OPERATOR(pg_catalog.>) '0'::pg_catalog.float8
                           THEN current ELSE '0'::pg_catalog.float8 END;
        b.tokens := l.burst;
    END IF;
    b.stamp_us := now_us;
    RETURN b;
END
$$;

-- The room of refilled (rl_sliding_refill's answer at at_us) at at_us
-- (RoomAt): max_count less the estimate.  A clock behind the stamp (which
-- rl_sliding_refill keeps) weighs previous as it weighs at at_us in the
-- stamp's window, and in full in an earlier one, so the room never shrinks
-- as the clock moves on.
CREATE FUNCTION rl_window_room(refilled rl_window, l rl_limit, at_us bigint) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN NOT (refilled.previous OPERATOR(pg_catalog.>) '0'::pg_catalog.float8) THEN refilled.tokens
                  ELSE refilled.tokens OPERATOR(pg_catalog.-)
                       (refilled.previous OPERATOR(pg_catalog.*)
                        CASE WHEN at_us OPERATOR(pg_catalog.>=) refilled.stamp_us
                             THEN @extschema@.rl_previous_weight(l, refilled.stamp_us)
                             WHEN @extschema@.rl_window_start(l, at_us) OPERATOR(pg_catalog.=) @extschema@.rl_window_start(l, refilled.stamp_us)
                             THEN @extschema@.rl_previous_weight(l, at_us)
                             ELSE '1'::pg_catalog.float8 END) END $$;

-- What a take may cost at at_us (SlidingRoom).
CREATE FUNCTION rl_sliding_room(w rl_window, l rl_limit, at_us bigint) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT @extschema@.rl_window_room(@extschema@.rl_sliding_refill(w, l, at_us), l, at_us) $$;

-- Seconds from now_us until the room of from_w reaches target
-- (SecondsToRoom): 0 if it has, Infinity if it never does; else the first
-- whole microsecond it does, by bisection (the room never shrinks with time
-- alone, and two boundaries after the stamp, or now if later, it is
-- max_count).
CREATE FUNCTION rl_sliding_seconds_to_room(from_w rl_window, l rl_limit, now_us bigint, target float8)
RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    later bigint := CASE WHEN from_w.stamp_us OPERATOR(pg_catalog.>) now_us THEN from_w.stamp_us ELSE now_us END;
    last numeric;
    lo bigint;
    hi bigint;
    mid bigint;
BEGIN
    IF @extschema@.rl_sliding_room(from_w, l, now_us) OPERATOR(pg_catalog.>=) target THEN
        RETURN '0'::pg_catalog.float8;
    END IF;
    IF NOT (target OPERATOR(pg_catalog.<=) l.burst) THEN
        RETURN 'Infinity';
    END IF;
    last := @extschema@.rl_window_start(l, later) OPERATOR(pg_catalog.+) ('2'::numeric OPERATOR(pg_catalog.*) l.window_us::numeric);
    hi := CASE WHEN last OPERATOR(pg_catalog.>) '9223372036854775807'::numeric
               THEN '9223372036854775807'::bigint ELSE last::bigint END;
    IF NOT (@extschema@.rl_sliding_room(from_w, l, hi) OPERATOR(pg_catalog.>=) target) THEN
        RETURN 'Infinity';
    END IF;
    lo := now_us; -- does not hold
    WHILE (hi::numeric OPERATOR(pg_catalog.-) lo::numeric) OPERATOR(pg_catalog.>) '1'::numeric LOOP
        mid := (lo::numeric OPERATOR(pg_catalog.+) pg_catalog.div(hi::numeric OPERATOR(pg_catalog.-) lo::numeric, '2'::numeric))::bigint;
        IF @extschema@.rl_sliding_room(from_w, l, mid) OPERATOR(pg_catalog.>=) target THEN
            hi := mid;
        ELSE
            lo := mid;
        END IF;
    END LOOP;
    RETURN (hi::pg_catalog.float8 OPERATOR(pg_catalog.-) now_us::pg_catalog.float8)
           OPERATOR(pg_catalog./) '1000000'::pg_catalog.float8;
END
$$;

-- The waits of decision d, whose state after the call is after_call
-- (SetWaits).
CREATE FUNCTION rl_sliding_waits(d rl_decision, after_call rl_window, l rl_limit, now_us bigint, cost float8)
RETURNS rl_decision
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    d.retry_after := CASE WHEN d.allowed THEN '0'::pg_catalog.float8
                          ELSE @extschema@.rl_sliding_seconds_to_room(after_call, l, now_us, cost) END;
    d.reset_after := @extschema@.rl_sliding_seconds_to_room(after_call, l, now_us, l.burst);
    d.refill_after := CASE WHEN d.remaining OPERATOR(pg_catalog.>=) l.burst THEN '0'::pg_catalog.float8
                           ELSE @extschema@.rl_sliding_seconds_to_room(after_call, l, now_us,
                                    @extschema@.rl_next_whole_token(d.remaining, l.burst)) END;
    RETURN d;
END
$$;

-- Decides a take of cost from stored at now_us (SlidingDecide): granted
-- when cost fits the room; a denial changes nothing (but a restarted stamp).
CREATE FUNCTION rl_sliding_decide(stored rl_window, l rl_limit, cost float8, now_us bigint)
RETURNS rl_decision
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    cur @extschema@.rl_window := @extschema@.rl_sliding_refill(stored, l, now_us);
    restarted boolean := cur.stamp_us OPERATOR(pg_catalog.<) stored.stamp_us;
    room pg_catalog.float8 := @extschema@.rl_window_room(cur, l, now_us);
    nw @extschema@.rl_window := cur;
    d @extschema@.rl_decision;
BEGIN
    d.allowed := cost OPERATOR(pg_catalog.<=) room;
    IF d.allowed THEN
        nw.tokens := nw.tokens OPERATOR(pg_catalog.-) cost;
        d.write := cost OPERATOR(pg_catalog.>) '0'::pg_catalog.float8 OR restarted;
        d.remaining := @extschema@.rl_window_room(nw, l, now_us);
    ELSE
        d.write := restarted;
        d.remaining := room;
    END IF;
    d.next := ROW(nw.tokens, nw.stamp_us, @extschema@.rl_not_blocked())::@extschema@.rl_bucket;
    RETURN @extschema@.rl_sliding_waits(d, CASE WHEN d.write OR d.allowed THEN nw ELSE stored END, l, now_us, cost);
END
$$;

-- Gives amount back (SlidingRefund): lowers current, not below 0; previous
-- stays.
CREATE FUNCTION rl_sliding_refund(stored rl_window, l rl_limit, amount float8, now_us bigint)
RETURNS rl_decision
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    cur @extschema@.rl_window := @extschema@.rl_sliding_refill(stored, l, now_us);
    capped boolean := (cur.tokens OPERATOR(pg_catalog.+) amount) OPERATOR(pg_catalog.>) l.burst;
    nw @extschema@.rl_window := cur;
    d @extschema@.rl_decision;
BEGIN
    d.allowed := true;
    nw.tokens := CASE WHEN capped THEN l.burst ELSE cur.tokens OPERATOR(pg_catalog.+) amount END;
    d.refunded := CASE WHEN capped THEN l.burst OPERATOR(pg_catalog.-) cur.tokens ELSE amount END;
    d.write := nw.tokens OPERATOR(pg_catalog.<>) stored.tokens OR nw.stamp_us OPERATOR(pg_catalog.<>) stored.stamp_us
               OR nw.previous OPERATOR(pg_catalog.<>) stored.previous;
    d.remaining := @extschema@.rl_window_room(nw, l, now_us);
    d.next := ROW(nw.tokens, nw.stamp_us, @extschema@.rl_not_blocked())::@extschema@.rl_bucket;
    RETURN @extschema@.rl_sliding_waits(d, nw, l, now_us, '0'::pg_catalog.float8);
END
$$;

-- Whether forgetting stored at now_us changes no later answer
-- (SlidingIsFull): its estimate is 0, its stamp not ahead of the clock.
CREATE FUNCTION rl_sliding_is_full(stored rl_window, l rl_limit, now_us bigint) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT stored.stamp_us OPERATOR(pg_catalog.<=) now_us
             AND @extschema@.rl_sliding_room(stored, l, now_us) OPERATOR(pg_catalog.>=) l.burst $$;

-- What operation op decides on window w: 'take' and 'check' of cost,
-- 'refund' of amount.
CREATE FUNCTION rl_sliding_operate(w rl_window, l rl_limit, cost float8, op text, amount float8,
                                   now_us bigint) RETURNS rl_decision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN op OPERATOR(pg_catalog.=) 'refund'::pg_catalog.text THEN @extschema@.rl_sliding_refund(w, l, amount, now_us)
                  ELSE @extschema@.rl_sliding_decide(w, l, cost, now_us) END $$;

-- What operation op decides on bucket s at now_us: a token bucket's
-- (rl_operate), or, when sliding, a sliding window's whose count of the
-- window before is previous (rl_sliding_operate, of r's cost).
CREATE FUNCTION rl_bucket_operate(s rl_bucket, previous float8, sliding boolean, l rl_limit, r rl_request,
                                  op text, amount float8, now_us bigint) RETURNS rl_decision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN sliding
                  THEN @extschema@.rl_sliding_operate(ROW(s.tokens, s.stamp_us, previous)::@extschema@.rl_window, l, r.cost,
                                                      op, amount, now_us)
                  ELSE @extschema@.rl_operate(s, l, r, op, amount, now_us) END $$;

-- Validate() of a sliding window's request (SlidingValidate), in its
-- order: the errors of a token bucket's, and two of its own.
CREATE FUNCTION rl_check_sliding_request(l rl_limit, r rl_request) RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
    IF NOT (r.cost OPERATOR(pg_catalog.>=) '0'::pg_catalog.float8 AND r.cost OPERATOR(pg_catalog.<) 'Infinity'::pg_catalog.float8) THEN
        PERFORM @extschema@.rl_report_invalid_request('cost_invalid'::pg_catalog.text, l, r, 'policy'::pg_catalog.text, l.rate);
    END IF;
    IF NOT (l.burst OPERATOR(pg_catalog.>) '0'::pg_catalog.float8 AND l.burst OPERATOR(pg_catalog.<) 'Infinity'::pg_catalog.float8) THEN
        PERFORM @extschema@.rl_report_invalid_request('burst_invalid'::pg_catalog.text, l, r, 'policy'::pg_catalog.text, l.rate);
    END IF;
    IF NOT (l.window_us OPERATOR(pg_catalog.>) '0'::bigint) THEN
        PERFORM @extschema@.rl_report_invalid_request('rate_invalid'::pg_catalog.text, l, r, 'policy'::pg_catalog.text, l.rate);
    END IF;
    IF NOT (r.max_wait OPERATOR(pg_catalog.>=) '0'::pg_catalog.float8 AND r.max_wait OPERATOR(pg_catalog.<>) 'NaN'::pg_catalog.float8) THEN
        PERFORM @extschema@.rl_report_invalid_request('max_wait_invalid'::pg_catalog.text, l, r, 'policy'::pg_catalog.text, l.rate);
    END IF;
    IF r.reserve THEN
        RAISE EXCEPTION 'a sliding window cannot reserve'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = pg_catalog.format('A max_wait of %s seconds was given; a sliding window counts what was taken and lends nothing ahead of time.', r.max_wait),
                  HINT = 'Pass no max_wait (or 0), or define the policy as a token bucket with max_reserved to reserve.';
    END IF;
    IF r.cost OPERATOR(pg_catalog.>) l.burst THEN
        RAISE EXCEPTION 'cost exceeds max_count'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('A cost of %s can never be taken under a sliding window that admits at most %s in a window.', r.cost, l.burst),
                  HINT = 'Lower cost, or define the policy with a larger max_count.';
    END IF;
END
$$;

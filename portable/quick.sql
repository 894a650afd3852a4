-- portable/quick.sql: included by ratelimit.sql, after core.sql, and by
-- the upgrade script to 0.4.0 (update--0.3.0--0.4.0.sql).
--
-- The common case of core.sql's algebra in expressions that PostgreSQL
-- inlines into the expression that calls them (LANGUAGE sql, one SELECT,
-- no SET clause; the rules of core.sql hold here too), with the same
-- float8 numbers: a plain limit (rate tokens a second up to burst, with no
-- fixed windows, floor rate or penalty box), a bucket stamped no later
-- than the clock reading, and a request that does not reserve.  Each
-- expression costs every transaction that evaluates it, so they hold no
-- branch for the rare cases: each says where it holds, and its caller
-- (rate_limit_take by a policy's name) checks that, or takes the general
-- way.  An argument that a body names more than once is given as a
-- variable, a column or a cheap expression, never a costly one, or the
-- planner would call the function instead of inlining it.  Valid while
-- 1e-150 < rate < 1e150 (then rl_credit(rate, us) is rate * (us / 1e6)),
-- burst < 1e150, tokens > -1e150, every time in microseconds is within
-- 2^62 of 0, and a bucket's stamp within 2^52 before the clock reading.

-- The balance of the next whole token above tokens, at most burst: the
-- level of refill_after, for every balance (rl_decide and rl_refund use it
-- too).
CREATE FUNCTION rl_next_whole_token(tokens float8, burst float8) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN NOT (((CASE WHEN tokens OPERATOR(pg_catalog.>) '0'::pg_catalog.float8 THEN pg_catalog.floor(tokens)
                                   ELSE '0'::pg_catalog.float8 END) OPERATOR(pg_catalog.+) '1'::pg_catalog.float8)
                            OPERATOR(pg_catalog.>) tokens)
                  -- Beyond 2^53 a token more is not representable: the next float8.
                  THEN CASE WHEN (tokens OPERATOR(pg_catalog.+) (tokens OPERATOR(pg_catalog.*) '2.220446049250313e-16'::pg_catalog.float8))
                                 OPERATOR(pg_catalog.<) burst
                            THEN tokens OPERATOR(pg_catalog.+) (tokens OPERATOR(pg_catalog.*) '2.220446049250313e-16'::pg_catalog.float8)
                            ELSE burst END
                  WHEN ((CASE WHEN tokens OPERATOR(pg_catalog.>) '0'::pg_catalog.float8 THEN pg_catalog.floor(tokens)
                              ELSE '0'::pg_catalog.float8 END) OPERATOR(pg_catalog.+) '1'::pg_catalog.float8)
                       OPERATOR(pg_catalog.<) burst
                  THEN (CASE WHEN tokens OPERATOR(pg_catalog.>) '0'::pg_catalog.float8 THEN pg_catalog.floor(tokens)
                             ELSE '0'::pg_catalog.float8 END) OPERATOR(pg_catalog.+) '1'::pg_catalog.float8
                  ELSE burst END $$;
COMMENT ON FUNCTION rl_next_whole_token(float8, float8) IS
    'the balance of the next whole token above a balance, at most the burst';

-- The credit of rate tokens a second over elapsed_us microseconds
-- (rl_credit's, within the bounds above).
CREATE FUNCTION rl_quick_credit(elapsed_us float8, rate float8) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT rate OPERATOR(pg_catalog.*) (elapsed_us OPERATOR(pg_catalog./) '1000000'::pg_catalog.float8) $$;
COMMENT ON FUNCTION rl_quick_credit(float8, float8) IS
    'the credit of a rate over some microseconds, inlined: rl_credit''s';

-- The balance of a bucket holding tokens once credit (rl_quick_credit of
-- the time since its stamp) is added, stamped_now where that time is 0
-- (rl_refill(...).tokens).  least() stands for rl_refill's comparisons (the
-- tokens held at most burst; a sum that rounding carries past burst is
-- burst): the same numbers, in fewer nodes, each of which every transaction
-- builds anew.
CREATE FUNCTION rl_quick_refilled(tokens float8, credit float8, stamped_now boolean, burst float8)
RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN stamped_now THEN least(tokens, burst)
                  WHEN credit OPERATOR(pg_catalog.>=) (burst OPERATOR(pg_catalog.-) least(tokens, burst)) THEN burst
                  ELSE least(least(tokens, burst) OPERATOR(pg_catalog.+) credit, burst) END $$;
COMMENT ON FUNCTION rl_quick_refilled(float8, float8, boolean, float8) IS
    'the balance of a bucket under a plain limit once a credit is added, inlined: rl_refill''s';

-- The balance of bucket (tokens, stamp_us) at now_us, no earlier than
-- stamp_us (rl_refill(...).tokens).
CREATE FUNCTION rl_quick_balance(tokens float8, stamp_us bigint, now_us bigint, rate float8, burst float8)
RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT @extschema@.rl_quick_refilled(tokens,
                                          @extschema@.rl_quick_credit((now_us OPERATOR(pg_catalog.-) stamp_us)::pg_catalog.float8,
                                                                      rate),
                                          now_us OPERATOR(pg_catalog.=) stamp_us, burst) $$;
COMMENT ON FUNCTION rl_quick_balance(float8, bigint, bigint, float8, float8) IS
    'the balance of a bucket under a plain limit at a clock reading, inlined: rl_refill''s';

-- The first estimate of the whole microseconds until tokens reach target
-- (rl_micros_until's, before its loop), for tokens below target.
CREATE FUNCTION rl_quick_estimate(tokens float8, target float8, rate float8) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT pg_catalog.ceil(((target OPERATOR(pg_catalog.-) tokens) OPERATOR(pg_catalog./) rate)
                             OPERATOR(pg_catalog.*) '1000000'::pg_catalog.float8) $$;
COMMENT ON FUNCTION rl_quick_estimate(float8, float8, float8) IS
    'the first estimate of rl_micros_until, inlined';

-- Whether a bucket holding tokens (at most burst, which is tokens + gap)
-- holds level (at most burst) once credit (rl_quick_credit) is added, or,
-- with level the cost of a request that does not reserve, admits it
-- (rl_holds of rl_refill): its balance is then the burst once the credit
-- reaches gap, else tokens plus the credit.
CREATE FUNCTION rl_quick_holds(credit float8, tokens float8, gap float8, level float8)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT credit OPERATOR(pg_catalog.>=) gap
             OR (tokens OPERATOR(pg_catalog.+) credit) OPERATOR(pg_catalog.>=) level $$;
COMMENT ON FUNCTION rl_quick_holds(float8, float8, float8, float8) IS
    'whether a bucket under a plain limit holds a level once a credit is added, inlined: rl_holds''s';

-- The wait in whole microseconds until a bucket holding tokens (as
-- rl_quick_holds), stamped elapsed_us before the clock reading, holds level,
-- given estimate (rl_quick_estimate of its balance at the clock reading) and
-- the credits at_credit and before_credit of elapsed_us + estimate and
-- elapsed_us + (estimate - 1) (rl_quick_credit; the caller computes each
-- once, for each is used twice; whatever the estimate, under the bounds above
-- each is a finite number): what rl_wait_micros finds from rl_micros_until's
-- estimate where the estimate itself is that wait, else NULL.  Both loops end
-- at the least wait that holds (the balance only grows with time): the
-- estimate, where it holds and the one before it does not.  The bucket does
-- not hold level at the clock reading (its balance there is below level, as
-- rl_quick_estimate's tokens are below its target): so the estimate is at
-- least 1 (the ceiling of a positive number), and where it is 1, the
-- microsecond before it, the clock reading, does not hold.  elapsed_us + a
-- wait counts whole microseconds below 2^53: exactly (and elapsed_us 0 adds
-- nothing).  Where the estimate is a microsecond off (rounding) the caller
-- asks rl_quick_wait_near: so this expression, which every take builds
-- anew, is small.
CREATE FUNCTION rl_quick_wait(estimate float8, at_credit float8, before_credit float8, tokens float8, gap float8,
                              level float8) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN estimate OPERATOR(pg_catalog.<) '1125899906842624'::pg_catalog.float8
                       AND @extschema@.rl_quick_holds(at_credit, tokens, gap, level)
                       AND NOT @extschema@.rl_quick_holds(before_credit, tokens, gap, level)
                  THEN estimate END $$;
COMMENT ON FUNCTION rl_quick_wait(float8, float8, float8, float8, float8, float8) IS
    'the wait of rl_wait_micros under a plain limit, inlined where it is its estimate';

-- The wait of rl_quick_wait where that is NULL below its bound, the
-- estimate a microsecond off: the estimate does not hold, or the microsecond
-- before it does.  Then the wait is the estimate + 1 where that holds, or the
-- estimate - 1 where the microsecond before that does not (the balance only
-- grows with time, so that is the least wait that holds, where both of
-- rl_wait_micros's loops end), else NULL.  For the bucket of rl_quick_wait
-- (tokens, gap and level as rl_quick_holds's), stamped elapsed_us before the
-- clock reading, at which it does not hold level: so estimate - 2 is never
-- before the clock reading where estimate - 1 holds.  Only evaluated where
-- rl_quick_wait is NULL: PL/pgSQL builds an expression in the first
-- transaction that evaluates it, so its size costs only those.
CREATE FUNCTION rl_quick_wait_near(estimate float8, elapsed_us float8, rate float8, tokens float8, gap float8,
                                   level float8) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN NOT (estimate OPERATOR(pg_catalog.<) '1125899906842624'::pg_catalog.float8) THEN NULL
                  WHEN NOT @extschema@.rl_quick_holds(@extschema@.rl_quick_credit(elapsed_us OPERATOR(pg_catalog.+) estimate, rate),
                                                      tokens, gap, level)
                  THEN CASE WHEN @extschema@.rl_quick_holds(@extschema@.rl_quick_credit(
                                     elapsed_us OPERATOR(pg_catalog.+) (estimate OPERATOR(pg_catalog.+) '1'::pg_catalog.float8), rate),
                                     tokens, gap, level)
                            THEN estimate OPERATOR(pg_catalog.+) '1'::pg_catalog.float8 END
                  WHEN NOT @extschema@.rl_quick_holds(@extschema@.rl_quick_credit(
                               elapsed_us OPERATOR(pg_catalog.+) (estimate OPERATOR(pg_catalog.-) '2'::pg_catalog.float8), rate),
                               tokens, gap, level)
                  THEN estimate OPERATOR(pg_catalog.-) '1'::pg_catalog.float8 END $$;
COMMENT ON FUNCTION rl_quick_wait_near(float8, float8, float8, float8, float8, float8) IS
    'the wait of rl_wait_micros under a plain limit, inlined where it is a microsecond from its estimate';

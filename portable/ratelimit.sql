-- portable/ratelimit.sql
--
-- The limiter in SQL and PL/pgSQL only, for servers that cannot load its C
-- module: run it with psql into the schema of your choice (the first of
-- search_path), as any role that may create objects there.
--
--   psql -v ON_ERROR_STOP=1 -c 'SET search_path = app' -f portable/ratelimit.sql
--
-- Bucket state is a plain table in that schema; every call reads and writes
-- it with ordinary SQL, so a concurrent update of the same bucket under
-- REPEATABLE READ or SERIALIZABLE fails with 40001 (retry the transaction),
-- where the native extension never fails.  The refill algebra is the
-- native one's, number for number (core.sql).
--
-- This file so far carries the calls with explicit parameters: take, check
-- and refund, per second (0.1.0) and per period, and reset.

\ir core.sql

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

-- One row per bucket; times in whole microseconds since 2000-01-01 UTC, as
-- the algebra counts them.  The low fillfactor keeps updates HOT.
CREATE TABLE rate_limit_buckets (
    name          text COLLATE "C" NOT NULL,
    key           text COLLATE "C" NOT NULL,
    tokens        float8 NOT NULL,
    stamp_us      bigint NOT NULL,
    full_at_us    bigint NOT NULL,
    blocked_until_us bigint NOT NULL,
    CONSTRAINT rate_limit_buckets_pkey PRIMARY KEY (name, key)
) WITH (fillfactor = 30);
COMMENT ON TABLE rate_limit_buckets IS
    'token buckets of the portable rate limiter: written only by its functions';

-- The clock, in whole microseconds since 2000-01-01 UTC.
CREATE FUNCTION rl_now() RETURNS bigint
LANGUAGE sql VOLATILE PARALLEL SAFE
AS $$ SELECT (pg_catalog.date_part('epoch', pg_catalog.clock_timestamp())::numeric * 1000000
              - 946684800000000)::bigint $$;
COMMENT ON FUNCTION rl_now() IS 'the limiter''s clock: microseconds since 2000-01-01 UTC';

-- Checks the numbers of a call as core::Validate does, with the native
-- extension's SQLSTATEs and messages.
CREATE FUNCTION rl_validate(l rl_limit, r rl_request) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF NOT (r.cost >= 0 AND r.cost < 'Infinity'::float8) THEN
        RAISE EXCEPTION 'cost must be a finite number greater than or equal to zero'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT (l.rate >= 0 AND l.rate < 'Infinity'::float8) THEN
        RAISE EXCEPTION 'rate must be a finite number greater than or equal to zero'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT (l.burst > 0 AND l.burst < 'Infinity'::float8) THEN
        RAISE EXCEPTION 'burst must be a finite number greater than zero'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF r.debt_capped AND NOT (r.max_reserved >= 0 AND r.max_reserved < 'Infinity'::float8) THEN
        RAISE EXCEPTION 'max_reserved must be a finite number greater than or equal to zero'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT (r.max_wait >= 0) THEN
        RAISE EXCEPTION 'max_wait must not be negative'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT r.reserve AND r.cost > l.burst THEN
        RAISE EXCEPTION 'cost exceeds burst'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF r.reserve AND r.cost > l.burst + rl_debt_cap(l, r) THEN
        RAISE EXCEPTION 'cost exceeds burst plus max_reserved'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;

-- 22004 for the first of `arguments` (named by `names`) that is NULL, as the
-- native functions say it.  Called only when one is: num_nulls() is the
-- cheap test on the way of every call.
CREATE FUNCTION rl_null_argument(function_name text, names text[], arguments text[])
RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    FOR i IN 1..pg_catalog.array_length(names, 1) LOOP
        IF arguments[i] IS NULL THEN
            RAISE EXCEPTION '% must not be null', names[i]
                USING ERRCODE = 'null_value_not_allowed',
                      DETAIL = pg_catalog.format('%s() requires a value for %s.', function_name, names[i]);
        END IF;
    END LOOP;
END
$$;

-- The limit of an explicit per-period call: rate tokens per period per
-- (seconds as date_part('epoch', ...) counts them), burst by default the rate.
CREATE FUNCTION rl_per_period_limit(rate float8, per interval, burst float8) RETURNS rl_limit
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    seconds float8 := pg_catalog.date_part('epoch', per);
BEGIN
    IF NOT (seconds < 'Infinity'::float8 AND pg_catalog.round(seconds * '1000000'::float8) >= 1) THEN
        RAISE EXCEPTION 'per must be a positive interval'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Before the division, and so before the checks of rl_validate, as the
    -- native functions check a per-period rate.
    IF NOT (rate >= 0 AND rate < 'Infinity'::float8) THEN
        RAISE EXCEPTION 'rate must be a finite number greater than or equal to zero'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN ROW(rate / seconds, coalesce(burst, rate), 0, 0, 0, 0)::rl_limit;
END
$$;

-- A request of cost that may reserve when the work can start within
-- max_wait (core::Request::Within), capped at max_reserved when given.
CREATE FUNCTION rl_within(cost float8, max_wait interval, max_reserved float8) RETURNS rl_request
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    wait_s float8 := CASE WHEN max_wait IS NULL THEN 0
                          ELSE pg_catalog.date_part('epoch', max_wait) END;
BEGIN
    IF NOT (wait_s >= 0) THEN
        RAISE EXCEPTION 'max_wait must not be negative'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN ROW(cost, wait_s > 0, max_reserved IS NOT NULL, coalesce(max_reserved, 0),
               CASE WHEN wait_s > 0 THEN wait_s ELSE 'Infinity'::float8 END)::rl_request;
END
$$;

-- What call op ('take', 'check' or 'refund' of amount) decides on bucket b.
CREATE FUNCTION rl_operate(b rl_bucket, l rl_limit, r rl_request, op text, amount float8,
                           now_us bigint) RETURNS rl_decision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN op = 'refund' THEN rl_refund(b, l, amount, now_us)
                  ELSE rl_decide(b, l, r, now_us) END $$;

-- Decides (and, for a take or refund, stores) a call on bucket (name, key).  A
-- decision that writes nothing (a denial, a look) is made on the bucket as
-- committed, without a lock; one that writes locks the row and, if the
-- row changed meanwhile, decides again on what it holds then; it writes in
-- the caller's transaction.
CREATE FUNCTION rl_apply(p_name text, p_key text, l rl_limit, r rl_request, op text,
                         amount float8 DEFAULT 0)
RETURNS rl_decision
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    looked rl_bucket;
    b rl_bucket;
    d rl_decision;
    now_us bigint;
    inserted int;
BEGIN
    LOOP
        now_us := rl_now();
        SELECT t.tokens, t.stamp_us, t.blocked_until_us INTO looked
          FROM rate_limit_buckets AS t WHERE t.name = p_name AND t.key = p_key;
        IF NOT FOUND THEN
            looked := NULL;
            d := rl_operate(ROW(l.burst, now_us, rl_not_blocked())::rl_bucket, l, r, op, amount, now_us);
        ELSE
            d := rl_operate(looked, l, r, op, amount, now_us);
        END IF;
        IF op = 'check' OR NOT d.write THEN
            RETURN d;
        END IF;
        SELECT t.tokens, t.stamp_us, t.blocked_until_us INTO b
          FROM rate_limit_buckets AS t WHERE t.name = p_name AND t.key = p_key FOR UPDATE;
        IF NOT FOUND THEN
            IF looked IS NOT NULL THEN
                CONTINUE; -- reset meanwhile: look again
            END IF;
            INSERT INTO rate_limit_buckets AS t
            VALUES (p_name, p_key, (d.next).tokens, (d.next).stamp_us, rl_full_at(d, now_us),
                    (d.next).blocked_until_us)
            ON CONFLICT ON CONSTRAINT rate_limit_buckets_pkey DO NOTHING;
            GET DIAGNOSTICS inserted = ROW_COUNT;
            IF inserted = 1 THEN
                RETURN d;
            END IF;
            CONTINUE; -- inserted meanwhile: decide again on it
        END IF;
        -- What was decided on is what is locked: the decision stands, at the
        -- clock reading it was made at.  Otherwise decide again, now.
        IF looked IS NULL OR b IS DISTINCT FROM looked THEN
            now_us := rl_now();
            d := rl_operate(b, l, r, op, amount, now_us);
        END IF;
        IF d.write THEN
            UPDATE rate_limit_buckets AS t
               SET tokens = (d.next).tokens, stamp_us = (d.next).stamp_us,
                   full_at_us = rl_full_at(d, now_us), blocked_until_us = (d.next).blocked_until_us
             WHERE t.name = p_name AND t.key = p_key;
        END IF;
        RETURN d;
    END LOOP;
END
$$;

-- One call of the API once its arguments have values: checked as the native
-- function checks them, applied to bucket (name, key), answered as a
-- decision row labelled quota per `per`.
CREATE FUNCTION rl_answer(p_name text, p_key text, l rl_limit, r rl_request, op text,
                          amount float8, quota float8, per interval)
RETURNS rate_limit_decision
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    d rl_decision;
BEGIN
    IF op = 'refund' THEN
        PERFORM rl_validate(l, ROW(0, false, false, 0, 'Infinity')::rl_request);
        IF NOT (amount >= 0 AND amount < 'Infinity'::float8) THEN
            RAISE EXCEPTION 'amount must be a finite number greater than or equal to zero'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    ELSE
        PERFORM rl_validate(l, r);
    END IF;
    d := rl_apply(p_name, p_key, l, r, op, amount);
    RETURN ROW(d.allowed, d.remaining, d.retry_after, d.reset_after, l.burst, p_name, quota, per,
               d.refill_after)::rate_limit_decision;
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
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    IF pg_catalog.num_nulls($1, $2, $3, $4, $5, $6) > 0 THEN
        PERFORM rl_null_argument('rate_limit_take', ARRAY['name', 'key', 'cost', 'rate', 'burst', 'reserve'],
                                 ARRAY[$1, $2, $3::text, $4::text, $5::text, $6::text]);
    END IF;
    RETURN rl_answer($1, $2, ROW($4, $5, 0, 0, 0, 0)::rl_limit,
                     ROW($3, $6, $7 IS NOT NULL, coalesce($7, 0), 'Infinity')::rl_request,
                     'take', 0, $4, '1 second');
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
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    IF pg_catalog.num_nulls($1, $2, $3, $4, $5, $6) > 0 THEN
        PERFORM rl_null_argument('rate_limit_check', ARRAY['name', 'key', 'cost', 'rate', 'burst', 'reserve'],
                                 ARRAY[$1, $2, $3::text, $4::text, $5::text, $6::text]);
    END IF;
    RETURN rl_answer($1, $2, ROW($4, $5, 0, 0, 0, 0)::rl_limit,
                     ROW($3, $6, $7 IS NOT NULL, coalesce($7, 0), 'Infinity')::rl_request,
                     'check', 0, $4, '1 second');
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
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    IF pg_catalog.num_nulls($1, $2, $3, $4, $5) > 0 THEN
        PERFORM rl_null_argument('rate_limit_take_explicit', ARRAY['name', 'key', 'cost', 'rate', 'per'],
                                 ARRAY[$1, $2, $3::text, $4::text, $5::text]);
    END IF;
    RETURN rl_answer($1, $2, rl_per_period_limit($4, $5, $6), rl_within($3, $7, $8), 'take', 0,
                     $4, $5);
END
$$;
COMMENT ON FUNCTION rate_limit_take_explicit(text, text, float8, float8, interval, float8, interval, float8) IS
    'takes cost tokens from the bucket (name, key) that refills rate tokens per period per up to burst (default: rate); reserves within max_wait and max_reserved when given';

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
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    IF pg_catalog.num_nulls($1, $2, $3, $4, $5) > 0 THEN
        PERFORM rl_null_argument('rate_limit_check_explicit', ARRAY['name', 'key', 'cost', 'rate', 'per'],
                                 ARRAY[$1, $2, $3::text, $4::text, $5::text]);
    END IF;
    RETURN rl_answer($1, $2, rl_per_period_limit($4, $5, $6), rl_within($3, $7, $8), 'check', 0,
                     $4, $5);
END
$$;
COMMENT ON FUNCTION rate_limit_check_explicit(text, text, float8, float8, interval, float8, interval, float8) IS
    'answers as rate_limit_take_explicit with the same arguments would, without consuming or writing anything';

-- Refunds: amount tokens back, capped at burst, in the caller's transaction.
CREATE FUNCTION rate_limit_refund(name text, key text, amount float8, rate float8, burst float8)
RETURNS rate_limit_decision
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    IF pg_catalog.num_nulls($1, $2, $3, $4, $5) > 0 THEN
        PERFORM rl_null_argument('rate_limit_refund', ARRAY['name', 'key', 'amount', 'rate', 'burst'],
                                 ARRAY[$1, $2, $3::text, $4::text, $5::text]);
    END IF;
    RETURN rl_answer($1, $2, ROW($4, $5, 0, 0, 0, 0)::rl_limit, NULL, 'refund', $3, $4,
                     '1 second');
END
$$;
COMMENT ON FUNCTION rate_limit_refund(text, text, float8, float8, float8) IS
    'gives amount tokens back to the bucket (name, key) that refills at rate tokens per second up to burst; never beyond burst';

CREATE FUNCTION rate_limit_refund_explicit(name text, key text, amount float8, rate float8,
                                           per interval, burst float8 DEFAULT NULL)
RETURNS rate_limit_decision
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    IF pg_catalog.num_nulls($1, $2, $3, $4, $5) > 0 THEN
        PERFORM rl_null_argument('rate_limit_refund_explicit', ARRAY['name', 'key', 'amount', 'rate', 'per'],
                                 ARRAY[$1, $2, $3::text, $4::text, $5::text]);
    END IF;
    RETURN rl_answer($1, $2, rl_per_period_limit($4, $5, $6), NULL, 'refund', $3, $4, $5);
END
$$;
COMMENT ON FUNCTION rate_limit_refund_explicit(text, text, float8, float8, interval, float8) IS
    'gives amount tokens back to the bucket (name, key) that refills rate tokens per period per up to burst (default: rate)';

-- Forgets one bucket, so that it starts full again; true if it existed.
CREATE FUNCTION rate_limit_reset(name text, key text) RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
DECLARE
    deleted int;
BEGIN
    IF pg_catalog.num_nulls($1, $2) > 0 THEN
        PERFORM rl_null_argument('rate_limit_reset', ARRAY['name', 'key'], ARRAY[$1, $2]);
    END IF;
    DELETE FROM rate_limit_buckets AS t WHERE t.name = $1 AND t.key = $2;
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

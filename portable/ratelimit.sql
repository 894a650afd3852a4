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
-- This file so far carries the explicit-parameter take and check of the
-- 0.1.0 API (rate in tokens per second).

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

-- Checks the numbers of an explicit per-second call, as the native
-- extension does, with its SQLSTATEs.
CREATE FUNCTION rl_check_explicit(cost float8, rate float8, burst float8, reserve boolean,
                                  max_reserved float8) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF cost IS NULL OR rate IS NULL OR burst IS NULL OR reserve IS NULL THEN
        RAISE EXCEPTION '% must not be null',
            CASE WHEN cost IS NULL THEN 'cost' WHEN rate IS NULL THEN 'rate'
                 WHEN burst IS NULL THEN 'burst' ELSE 'reserve' END
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF NOT (cost >= 0 AND cost < 'Infinity'::float8) THEN
        RAISE EXCEPTION 'cost must be a finite number greater than or equal to zero'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT (rate >= 0 AND rate < 'Infinity'::float8) THEN
        RAISE EXCEPTION 'rate must be a finite number greater than or equal to zero'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT (burst > 0 AND burst < 'Infinity'::float8) THEN
        RAISE EXCEPTION 'burst must be a finite number greater than zero'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_reserved IS NOT NULL AND NOT (max_reserved >= 0 AND max_reserved < 'Infinity'::float8) THEN
        RAISE EXCEPTION 'max_reserved must be a finite number greater than or equal to zero'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT reserve AND cost > burst THEN
        RAISE EXCEPTION 'cost exceeds burst'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF reserve AND max_reserved IS NOT NULL AND cost > burst + max_reserved THEN
        RAISE EXCEPTION 'cost exceeds burst plus max_reserved'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;

-- Decides (and, for a take, stores) a call on bucket (name, key).  A
-- decision that writes nothing (a denial, a look) is made on the bucket as
-- committed, without a lock; one that writes locks the row and, if the
-- row changed meanwhile, decides again on what it holds then; it writes in
-- the caller's transaction.
CREATE FUNCTION rl_apply(p_name text, p_key text, l rl_limit, r rl_request, takes boolean)
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
            d := rl_decide(ROW(l.burst, now_us, rl_not_blocked())::rl_bucket, l, r, now_us);
        ELSE
            d := rl_decide(looked, l, r, now_us);
        END IF;
        IF NOT takes OR NOT d.write THEN
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
            d := rl_decide(b, l, r, now_us);
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

CREATE FUNCTION rl_decision_row(d rl_decision, burst float8, p_name text, quota float8)
RETURNS rate_limit_decision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT ROW(d.allowed, d.remaining, d.retry_after, d.reset_after, burst, p_name, quota,
                 '1 second'::interval, d.refill_after)::rate_limit_decision $$;

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
    PERFORM rl_check_explicit($3, $4, $5, $6, $7);
    RETURN rl_decision_row(
        rl_apply($1, $2, ROW($4, $5, 0, 0, 0, 0)::rl_limit,
                 ROW($3, $6, $7 IS NOT NULL, coalesce($7, 0), 'Infinity')::rl_request, true),
        $5, $1, $4);
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
    PERFORM rl_check_explicit($3, $4, $5, $6, $7);
    RETURN rl_decision_row(
        rl_apply($1, $2, ROW($4, $5, 0, 0, 0, 0)::rl_limit,
                 ROW($3, $6, $7 IS NOT NULL, coalesce($7, 0), 'Infinity')::rl_request, false),
        $5, $1, $4);
END
$$;
COMMENT ON FUNCTION rate_limit_check(text, text, float8, float8, float8, boolean, float8) IS
    'answers as rate_limit_take would, without consuming or writing anything';

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
-- SECURITY DEFINER functions but the take by a policy's name, and those
-- that run at most a few times a call or only to raise an error), or, for
-- speed, has none and writes every operator as OPERATOR(pg_catalog.x) and
-- every function, type and table schema-qualified (the algebra, the other
-- helpers on every call's way, and rate_limit_take(name, key, cost): a SET
-- clause costs each call of a function a good deal, and keeps a LANGUAGE
-- sql function from being inlined; see policy_take.sql).  Either way the
-- limiter's own objects are named @extschema@.name, which the extension's
-- install replaces by the schema, and which this script replaces once
-- every routine is created (created unchecked, checked then); and the
-- limiter's own functions get arguments of their parameters' own types
-- (or text literals), so that no overload can match better.  PUBLIC may
-- execute the API only, and rl_purge_batch, which rate_limit_purge calls
-- with its caller's rights.

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
-- (the lines "--extension:" are the extension script's: scripts/sql-script
-- makes it from this file)
--extension: \echo Use "CREATE EXTENSION ratelimit_portable" to load this file. \quit

\set ON_ERROR_STOP 1
SELECT pg_catalog.current_schema() AS rl_schema \gset
\if :{?rl_schema}
\else
\echo 'portable/ratelimit.sql: no schema to install into: set search_path first'
\quit
\endif
\ir names.sql

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

BEGIN; -- (psql only)
SET LOCAL check_function_bodies = off; -- (psql only)
\ir platform.sql
\ir core.sql
\ir quick.sql
\ir errors.sql

\ir ../sql/src/decision_types.sql

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
    IF rl_on_yugabytedb() THEN
        EXECUTE 'CREATE TABLE rl_buckets (
            name          text COLLATE "C" NOT NULL,
            key           text COLLATE "C" NOT NULL,
            tokens        float8 NOT NULL,
            stamp_us      bigint NOT NULL,
            full_at_us    bigint NOT NULL,
            blocked_until_us bigint NOT NULL,
            previous      float8 NOT NULL DEFAULT ''0''::pg_catalog.float8,
            CONSTRAINT rl_buckets_pkey PRIMARY KEY ((name, key) HASH))';
    ELSE
        EXECUTE 'CREATE UNLOGGED TABLE rl_buckets (
            name          text COLLATE "C" NOT NULL,
            key           text COLLATE "C" NOT NULL,
            tokens        float8 NOT NULL,
            stamp_us      bigint NOT NULL,
            full_at_us    bigint NOT NULL,
            blocked_until_us bigint NOT NULL,
            previous      float8 NOT NULL DEFAULT ''0''::pg_catalog.float8,
            CONSTRAINT rl_buckets_pkey PRIMARY KEY (name, key)
        ) WITH (fillfactor = 30, autovacuum_vacuum_scale_factor = 0,
                autovacuum_vacuum_threshold = 1000)';
    END IF;
END
$$;
REVOKE ALL ON TABLE rl_buckets FROM PUBLIC;
COMMENT ON TABLE rl_buckets IS
    'token buckets of the portable rate limiter: written only by its functions';

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

\ir apply.sql

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

\ir explicit_take.sql

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

\ir policies.sql
\ir shards.sql
\ir ../sql/src/headers_policy.sql
\ir ../sql/src/headers.sql
\ir ../sql/src/lease_headers.sql
\ir maintenance.sql

\ir rights.sql

-- In every routine, the schema's name in place of @extschema@ and the
-- values of the variables above in place of their @NAME@, as the
-- extension's install puts them (which leaves this file out).
SELECT pg_catalog.json_build_object('rl', :'rl', 'rl_policy_source', :'rl_policy_source', 'rl_max_name_bytes', :'rl_max_name_bytes', 'rl_max_key_bytes', :'rl_max_key_bytes', 'rl_max_held', :'rl_max_held') AS rl_body_values \gset
\ir qualify.sql

\ir owner.sql

COMMIT; -- (psql only)

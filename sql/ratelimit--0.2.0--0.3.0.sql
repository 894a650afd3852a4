/* sql/ratelimit--0.2.0--0.3.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION ratelimit UPDATE TO '0.3.0'" to load this file. \quit

-- One model: every call that takes from a limit may reserve, within the time
-- the caller accepts (max_wait) and the debt the limit allows (max_reserved),
-- and a decision carries everything the HTTP header values need.

-- The most reserved debt a key of a policy may carry.  0: none, so that a
-- role with the default grants can never push a policy's bucket into debt
-- unless the policy says so.
-- The penalty box: once a take is denied, the key stays denied this long.
-- Where a policy's buckets live: the table ratelimit.buckets, or shared
-- memory (the memory engine).
ALTER TABLE ratelimit.policies
    ADD COLUMN max_reserved float8 NOT NULL DEFAULT '0'::float8,
    ADD COLUMN penalty interval,
    ADD COLUMN penalty_us bigint
        GENERATED ALWAYS AS (pg_catalog.round(pg_catalog.date_part('epoch', penalty)
                                              OPERATOR(pg_catalog.*) '1000000'::float8)::bigint) STORED,
    ADD CONSTRAINT policies_max_reserved_check
        CHECK (max_reserved OPERATOR(pg_catalog.>=) '0'::float8
               AND max_reserved OPERATOR(pg_catalog.<) 'Infinity'::float8),
    ADD CONSTRAINT policies_penalty_check
        CHECK (penalty_us OPERATOR(pg_catalog.>=) '0'::bigint
               AND (penalty_us OPERATOR(pg_catalog.=) '0'::bigint
                    OR shards OPERATOR(pg_catalog.=) 1)),
    ADD COLUMN storage text COLLATE pg_catalog."C" NOT NULL DEFAULT 'table'::text,
    ADD CONSTRAINT policies_storage_check
        CHECK (storage OPERATOR(pg_catalog.=) ANY ('{table,memory}'::text[])
               AND (storage OPERATOR(pg_catalog.=) 'table'::text
                    OR shards OPERATOR(pg_catalog.=) 1));

-- When each bucket is full again under the limit it was last written with,
-- so that rate_limit_purge() can tell which rows it may forget, for explicit
-- limits too.  Rows written before 0.3.0 do not say: 'infinity' until their
-- next write (the rows of a policy are judged by the policy).  Not indexed,
-- so that every write stays a HOT update.
ALTER TABLE ratelimit.buckets
    ADD COLUMN full_at timestamptz NOT NULL DEFAULT 'infinity'::timestamptz;
ALTER TABLE ratelimit.buckets ALTER COLUMN full_at DROP DEFAULT;
COMMENT ON COLUMN ratelimit.buckets.full_at IS
    'when the bucket is full again under the limit it was last written with (infinity: never, or not known); rate_limit_purge() forgets it from then on';
-- Until when a penalty box denies every take of the key.
ALTER TABLE ratelimit.buckets
    ADD COLUMN blocked_until timestamptz NOT NULL DEFAULT '-infinity'::timestamptz;
ALTER TABLE ratelimit.buckets ALTER COLUMN blocked_until DROP DEFAULT;
COMMENT ON COLUMN ratelimit.buckets.blocked_until IS
    'until when a penalty box denies every take of the key (-infinity: never boxed)';

-- What the headers need: the limit's name, its quota per period, and when
-- more quota arrives.
ALTER TYPE @extschema@.rate_limit_decision
    ADD ATTRIBUTE name text,
    ADD ATTRIBUTE quota float8,
    ADD ATTRIBUTE per interval,
    ADD ATTRIBUTE refill_after float8;
COMMENT ON TYPE @extschema@.rate_limit_decision IS
    'answer of a rate limit call: allowed, tokens remaining (negative = reserved debt), seconds until a retry succeeds or reserved work may start, seconds until full, the burst, the limit''s name, its quota per period, and seconds until more quota arrives';

ALTER TYPE @extschema@.rate_limit_all_decision
    ADD ATTRIBUTE decisions @extschema@.rate_limit_decision[];
COMMENT ON TYPE @extschema@.rate_limit_all_decision IS
    'answer of rate_limit_take_all: allowed, seconds until every limit would grant, the binding limit, the tokens remaining per limit given, and each limit''s own decision';

-- Reservation by policy: max_wait is how long the caller accepts to wait
-- for reserved work to start.  No default, so that the three-argument forms
-- stay as they are.
CREATE FUNCTION @extschema@.rate_limit_take(name text, key text, cost float8, max_wait interval)
RETURNS @extschema@.rate_limit_decision
AS 'MODULE_PATHNAME', 'rate_limit_take_policy_wait'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.rate_limit_take(text, text, float8, interval) IS
    'takes cost tokens from the bucket (name, key) of policy name; when it holds too few, reserves them if the work may start within max_wait and the policy''s max_reserved allows the debt';

CREATE FUNCTION @extschema@.rate_limit_check(name text, key text, cost float8, max_wait interval)
RETURNS @extschema@.rate_limit_decision
AS 'MODULE_PATHNAME', 'rate_limit_check_policy_wait'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rate_limit_check(text, text, float8, interval) IS
    'answers as rate_limit_take(name, key, cost, max_wait) would, without consuming or writing anything';

CREATE FUNCTION @extschema@.rate_limit_take_all(
    names text[], keys text[], costs float8[], max_wait interval)
RETURNS @extschema@.rate_limit_all_decision
AS 'MODULE_PATHNAME', 'rate_limit_take_all_wait'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.rate_limit_take_all(text[], text[], float8[], interval) IS
    'takes costs[i] (default 1) from bucket (names[i], keys[i]) under policy names[i] for every i, or from none, each reserving within max_wait where its policy allows; rows are locked in one canonical order';

-- Explicit parameters in the units of rate_limit_define: rate tokens per
-- period per, burst by default the rate.  For trusted callers: refused on a
-- name a policy governs.  Names of their own: as overloads of rate_limit_take,
-- an untyped fifth argument (a parameter as node-postgres sends it) would
-- match both them and the 0.1.0 forms, and 0.1.0 calls would fail as
-- ambiguous.
CREATE FUNCTION @extschema@.rate_limit_take_explicit(
    name         text,
    key          text,
    cost         float8,
    rate         float8,
    per          interval,
    burst        float8   DEFAULT NULL,
    max_wait     interval DEFAULT NULL,
    max_reserved float8   DEFAULT NULL)
RETURNS @extschema@.rate_limit_decision
AS 'MODULE_PATHNAME', 'rate_limit_take_explicit'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.rate_limit_take_explicit(text, text, float8, float8, interval, float8, interval, float8) IS
    'takes cost tokens from the bucket (name, key) that refills rate tokens per period per up to burst (default: rate); reserves within max_wait and max_reserved when given; refused on a name a policy governs';

CREATE FUNCTION @extschema@.rate_limit_check_explicit(
    name         text,
    key          text,
    cost         float8,
    rate         float8,
    per          interval,
    burst        float8   DEFAULT NULL,
    max_wait     interval DEFAULT NULL,
    max_reserved float8   DEFAULT NULL)
RETURNS @extschema@.rate_limit_decision
AS 'MODULE_PATHNAME', 'rate_limit_check_explicit'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rate_limit_check_explicit(text, text, float8, float8, interval, float8, interval, float8) IS
    'answers as rate_limit_take_explicit with the same arguments would, without consuming or writing anything';

CREATE FUNCTION @extschema@.rate_limit_refund_explicit(
    name   text,
    key    text,
    amount float8,
    rate   float8,
    per    interval,
    burst  float8 DEFAULT NULL)
RETURNS @extschema@.rate_limit_decision
AS 'MODULE_PATHNAME', 'rate_limit_refund_explicit'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.rate_limit_refund_explicit(text, text, float8, float8, interval, float8) IS
    'gives amount tokens back to the bucket (name, key) that refills rate tokens per period per up to burst (default: rate); refused on a name a policy governs';
REVOKE ALL ON FUNCTION @extschema@.rate_limit_refund_explicit(text, text, float8, float8, interval, float8) FROM PUBLIC;

-- Raises 55000 where the memory engine has no shared memory (before
-- PostgreSQL 17, without the library preloaded); rate_limit_define calls it
-- for a memory policy.
CREATE FUNCTION ratelimit.require_memory_engine() RETURNS void
AS 'MODULE_PATHNAME', 'rate_limit_require_memory_engine'
LANGUAGE C;
COMMENT ON FUNCTION ratelimit.require_memory_engine() IS
    'raises an error unless the memory engine has shared memory for its buckets (before PostgreSQL 17: ratelimit in shared_preload_libraries)';
REVOKE ALL ON FUNCTION ratelimit.require_memory_engine() FROM PUBLIC;

-- rate_limit_define returns the stored policy and takes max_reserved: a new
-- signature and result type, so the function is replaced.  Whoever could
-- execute it still can: the grants of the old function are given again.
CREATE TEMPORARY TABLE define_grants AS
    SELECT a.grantee, a.is_grantable
      FROM pg_catalog.pg_proc AS p,
           LATERAL pg_catalog.aclexplode(p.proacl) AS a
     WHERE p.oid OPERATOR(pg_catalog.=) '@extschema@.rate_limit_define(text, float8, interval, float8, float8, float8, boolean, interval, float8, integer)'::pg_catalog.regprocedure
       AND a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
       AND a.grantee OPERATOR(pg_catalog.<>) p.proowner;
DROP FUNCTION @extschema@.rate_limit_define(text, float8, interval, float8, float8, float8, boolean, interval, float8, integer);
CREATE FUNCTION @extschema@.rate_limit_define(
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
RETURNS ratelimit.policies
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    -- Periods in seconds and whole microseconds, as ratelimit.policies
    -- derives them (see its generated columns).
    seconds       float8 := pg_catalog.date_part('epoch', $3);
    micros        float8 := pg_catalog.round(seconds OPERATOR(pg_catalog.*) '1000000'::float8);
    start_seconds float8 := pg_catalog.date_part('epoch', $8);
    start_micros  float8 := pg_catalog.round(start_seconds OPERATOR(pg_catalog.*) '1000000'::float8);
    -- The largest bigint, rounded up to a float8: 2^63.
    micros_limit  CONSTANT float8 := '9223372036854775807'::float8;
    dividend      text;
    quotient      float8;
    stored        ratelimit.policies;
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
    -- The name is what rate_limit_headers() writes into the RateLimit
    -- fields, as a structured-field string: printable ASCII only.
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
    -- Before PostgreSQL 17 the memory engine has shared memory only with the
    -- library preloaded: a memory policy is refused here, when it is
    -- defined, rather than at every call.  A row written otherwise (as
    -- pg_restore writes the rows of a dump) is kept.
    IF $13 OPERATOR(pg_catalog.=) 'memory' THEN
        PERFORM ratelimit.require_memory_engine();
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
    INSERT INTO ratelimit.policies AS p
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
COMMENT ON FUNCTION @extschema@.rate_limit_define(text, float8, interval, float8, float8, float8, boolean, interval, float8, integer, float8, interval, text) IS
    'defines (or replaces) the policy name: rate tokens per period per, holding at most burst (default: rate); new keys start with initial tokens (default: burst); retry_after gets a per-key jitter of up to the fraction jitter; fixed_window adds the rate at once at each window of length per, starting at window_start (default: spread by key); floor_rate tokens per period are still granted once the burst is spent; shards splits each key over that many rows for hot keys; a key may owe up to max_reserved tokens after a reservation; once a take is denied, penalty keeps the key denied that long; storage ''memory'' keeps the keys in shared memory instead of a table; returns the stored policy';
REVOKE ALL ON FUNCTION @extschema@.rate_limit_define(text, float8, interval, float8, float8, float8, boolean, interval, float8, integer, float8, interval, text) FROM PUBLIC;
DO $$
DECLARE
    g record;
BEGIN
    FOR g IN SELECT grantee, is_grantable FROM pg_temp.define_grants LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s%s',
            '@extschema@.rate_limit_define(text, float8, interval, float8, float8, float8, boolean, interval, float8, integer, float8, interval, text)'::pg_catalog.regprocedure,
            CASE WHEN g.grantee OPERATOR(pg_catalog.=) '0'::pg_catalog.oid THEN 'PUBLIC'
                 ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(g.grantee)) END,
            CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
END
$$;
DROP TABLE pg_temp.define_grants;

-- The policies, for whoever manages limits: rows show to the roles that may
-- execute rate_limit_define (and to superusers), no rows to anyone else.
-- security_barrier: no function in a caller's WHERE clause runs before the
-- privilege check and sees rows it should not.
CREATE VIEW @extschema@.rate_limit_policies WITH (security_barrier) AS
SELECT p.name, p.rate, p.per, p.burst, p.initial, p.jitter, p.fixed_window, p.window_start,
       p.floor_rate, p.shards, p.max_reserved, p.penalty, p.tokens_per_second, p.storage
  FROM ratelimit.policies AS p
 WHERE pg_catalog.has_function_privilege(
           '@extschema@.rate_limit_define(text, float8, interval, float8, float8, float8, boolean, interval, float8, integer, float8, interval, text)'::pg_catalog.regprocedure,
           'EXECUTE');
COMMENT ON VIEW @extschema@.rate_limit_policies IS
    'the stored policies, shown to roles that may execute rate_limit_define';
GRANT SELECT ON @extschema@.rate_limit_policies TO PUBLIC;

-- HTTP header values (draft-ietf-httpapi-ratelimit-headers-11) from a
-- decision alone: the policy as a whole quota q per window w in seconds, the
-- state as whole units remaining r and seconds t until more quota arrives,
-- and Retry-After when the call was denied.  Every value is capped at 15
-- digits, as structured-field integers are.  It reads nothing but its
-- argument, so it runs with the caller's rights.
CREATE FUNCTION @extschema@.rate_limit_headers(
    decision @extschema@.rate_limit_decision,
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
COMMENT ON FUNCTION @extschema@.rate_limit_headers(@extschema@.rate_limit_decision) IS
    'values of the RateLimit-Policy, RateLimit and Retry-After HTTP headers (draft-ietf-httpapi-ratelimit-headers-11) for a decision of rate_limit_take() or rate_limit_check()';

-- Several limits at once: one item per limit, in the order given, and
-- Retry-After when the whole call was denied.
CREATE FUNCTION @extschema@.rate_limit_headers(
    decision @extschema@.rate_limit_all_decision,
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
COMMENT ON FUNCTION @extschema@.rate_limit_headers(@extschema@.rate_limit_all_decision) IS
    'values of the RateLimit-Policy and RateLimit HTTP headers (one item per limit, in the order given) and of Retry-After (draft-ietf-httpapi-ratelimit-headers-11) for a decision of rate_limit_take_all()';

-- Cleanup: forgets the buckets whose deletion changes no answer (refilled
-- to full, with no debt, and no first sighting a policy's initial balance
-- must remember), in batches of table pages that each commit, so that it
-- never holds a row lock for long and a take of the same key wins.  A
-- procedure, so that it can commit; withheld from PUBLIC: grant it to the
-- role that runs maintenance.
CREATE PROCEDURE @extschema@.rate_limit_purge(
    name   text   DEFAULT NULL,
    INOUT purged bigint DEFAULT NULL)
AS 'MODULE_PATHNAME', 'rate_limit_purge'
LANGUAGE C;
COMMENT ON PROCEDURE @extschema@.rate_limit_purge(text, bigint) IS
    'forgets the buckets of name (NULL: of every name) whose deletion changes no answer: full again, with no debt and nothing else to remember; commits after each batch; purged: how many';
REVOKE ALL ON PROCEDURE @extschema@.rate_limit_purge(text, bigint) FROM PUBLIC;

-- Resetting a whole limit: every bucket of a name starts afresh.  In
-- batches that each commit, waiting for a bucket's writer only in a
-- transaction that holds no other bucket, so that it cannot deadlock with
-- callers that hold several.  Withheld from PUBLIC, like rate_limit_reset.
CREATE PROCEDURE @extschema@.rate_limit_reset_limit(
    name  text,
    INOUT reset bigint DEFAULT NULL)
AS 'MODULE_PATHNAME', 'rate_limit_reset_limit'
LANGUAGE C;
COMMENT ON PROCEDURE @extschema@.rate_limit_reset_limit(text, bigint) IS
    'forgets every bucket of limit name, so that each key starts afresh; commits after each batch; reset: how many buckets';
REVOKE ALL ON PROCEDURE @extschema@.rate_limit_reset_limit(text, bigint) FROM PUBLIC;

-- The buckets of a limit, as takes see them: read without waiting and
-- without SSI predicate locks, so that a SERIALIZABLE reader makes no take
-- fail (reading ratelimit.buckets itself would).  Withheld from PUBLIC: it
-- shows every key of the limit.
CREATE FUNCTION @extschema@.rate_limit_buckets(
    name            text,
    OUT key         text,
    OUT shard       integer,
    OUT balance     float8,
    OUT full_at     timestamptz,
    OUT tokens      float8,
    OUT last_refill timestamptz,
    OUT blocked_until timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'rate_limit_buckets'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rate_limit_buckets(text) IS
    'the buckets of limit name in key order: key, shard (of a policy that splits keys), balance now and when it is full (by the policy; without one, no balance and full_at as last stored), the stored tokens and last_refill, and until when a penalty box denies the key';
REVOKE ALL ON FUNCTION @extschema@.rate_limit_buckets(text) FROM PUBLIC;

-- Durability, when wanted: in a logged table bucket state is kept across
-- crashes, streamed to standbys (where rate_limit_check answers) and carried
-- on after a promotion; every write of it then goes to WAL.  Switching
-- rewrites the table under an ACCESS EXCLUSIVE lock: calls wait meanwhile.
-- Withheld from PUBLIC.
CREATE FUNCTION @extschema@.rate_limit_set_logged(logged boolean)
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
    SELECT c.relpersistence OPERATOR(pg_catalog.=) 'p'::"char" INTO was_logged
      FROM pg_catalog.pg_class c
     WHERE c.oid OPERATOR(pg_catalog.=) 'ratelimit.buckets'::pg_catalog.regclass;
    IF was_logged OPERATOR(pg_catalog.=) logged THEN
        RETURN false;
    END IF;
    IF logged THEN
        ALTER TABLE ratelimit.buckets SET LOGGED;
    ELSE
        ALTER TABLE ratelimit.buckets SET UNLOGGED;
    END IF;
    RETURN true;
END
$$;
COMMENT ON FUNCTION @extschema@.rate_limit_set_logged(boolean) IS
    'keeps bucket state in a logged table (true: kept across crashes and on standbys, every write goes to WAL) or an unlogged one (false, the default: emptied by a crash, absent on standbys); rewrites the table; true if it changed';
REVOKE ALL ON FUNCTION @extschema@.rate_limit_set_logged(boolean) FROM PUBLIC;

-- Counters of takes per limit, in the style of pg_stat_statements: since
-- the server started or the counters were last reset, not transactional (a
-- take rolled back stays counted).  Shared memory: before PostgreSQL 17 only
-- with ratelimit in shared_preload_libraries, otherwise reading them says so.
-- Readable by pg_read_all_stats; resetting is granted deliberately.
CREATE FUNCTION @extschema@.rate_limit_stats(
    OUT name              text,
    OUT grants            bigint,
    OUT denials           bigint,
    OUT tokens_granted    float8,
    OUT reservations      bigint,
    OUT lock_wait_seconds float8)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'rate_limit_stats'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rate_limit_stats() IS
    'per limit, the takes counted since the last reset: grants, denials, tokens granted, reservations (grants into debt) and seconds spent waiting for other transactions'' row locks';

CREATE VIEW @extschema@.rate_limit_stats AS
SELECT s.name, s.grants, s.denials, s.tokens_granted, s.reservations, s.lock_wait_seconds
  FROM @extschema@.rate_limit_stats() AS s;
COMMENT ON VIEW @extschema@.rate_limit_stats IS
    'per limit, the takes counted since the last reset (rate_limit_stats_reset)';

CREATE FUNCTION @extschema@.rate_limit_stats_info(
    OUT dropped     bigint,
    OUT stats_reset timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'rate_limit_stats_info'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rate_limit_stats_info() IS
    'takes not counted because ratelimit.stats_limits limits were counted already, and when the counters were last reset';

CREATE VIEW @extschema@.rate_limit_stats_info AS
SELECT i.dropped, i.stats_reset FROM @extschema@.rate_limit_stats_info() AS i;
COMMENT ON VIEW @extschema@.rate_limit_stats_info IS
    'takes not counted for want of room, and when the counters were last reset';

CREATE FUNCTION @extschema@.rate_limit_stats_reset(name text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'rate_limit_stats_reset'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.rate_limit_stats_reset(text) IS
    'zeroes the take counters of limit name, or of every limit (NULL)';

REVOKE ALL ON FUNCTION @extschema@.rate_limit_stats() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.rate_limit_stats_info() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.rate_limit_stats_reset(text) FROM PUBLIC;
REVOKE ALL ON @extschema@.rate_limit_stats FROM PUBLIC;
REVOKE ALL ON @extschema@.rate_limit_stats_info FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.rate_limit_stats() TO pg_read_all_stats;
GRANT EXECUTE ON FUNCTION @extschema@.rate_limit_stats_info() TO pg_read_all_stats;
GRANT SELECT ON @extschema@.rate_limit_stats TO pg_read_all_stats;
GRANT SELECT ON @extschema@.rate_limit_stats_info TO pg_read_all_stats;

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
--extension: SELECT pg_catalog.pg_extension_config_dump('rl_policies', '');
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

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
-- when NULL) after (after_name, after_key) in key order (on YugabyteDB in
-- the order of rl_hash_code, then of the key), the next
-- batch_size (at most 1000) are judged and the forgettable ones not locked by anyone are
-- deleted.  Returns how many, and the last bucket judged (NULL: none left).
-- The first batch (after_name NULL) checks the call first, as the native
-- procedure does before its first batch, and deletes the expired leases
-- too (counted with the buckets).
CREATE FUNCTION rl_purge_batch(p_name text, after_name text, after_key text, batch_size integer,
                               OUT deleted bigint, OUT last_name text, OUT last_key text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    now_us bigint := @extschema@.rl_now();
    after_code integer;
    last_code integer;
    leases bigint := 0;
BEGIN
    IF after_name IS NULL THEN
        IF p_name = '' THEN
            PERFORM @extschema@.rl_report_empty_name();
        END IF;
        IF pg_catalog.octet_length(p_name) > @rl_max_name_bytes@ THEN
            PERFORM @extschema@.rl_report_too_long('name', pg_catalog.octet_length(p_name), @rl_max_name_bytes@);
        END IF;
        PERFORM @extschema@.rl_begin_batches('rate_limit_purge');
    END IF;
    IF pg_catalog.current_setting('transaction_read_only') = 'on' THEN
        PERFORM @extschema@.rl_report_read_only_delete('rate_limit_purge');
    END IF;
    IF after_name IS NULL THEN
        -- The expired leases, in the first batch.
        leases := @extschema@.rl_purge_leases(p_name);
    END IF;
    IF @extschema@.rl_on_yugabytedb() THEN
        PERFORM @extschema@.rl_require_read_committed();
    END IF;
    IF @extschema@.rl_on_yugabytedb() THEN
        -- No ctid and no xmax there, and READ COMMITTED only.  The rows are
        -- paged in the order the hash-sharded primary key keeps them: by
        -- rl_hash_code(name, key) (yb_hash_code), then by (name, key), so
        -- that a batch reads the tablets from where the last one ended
        -- instead of sorting the whole table by (name, key).  Every
        -- definition or removal of a policy first rewrites the one row of
        -- rl_policy_changes: held shared, it keeps the policies as the
        -- next statement reads them until the batch's transaction ends.
        -- Rows are judged as below, and deleted by their key.
        after_code := @extschema@.rl_hash_code(after_name, after_key);
        SELECT c.name, c.key, c.code INTO last_name, last_key, last_code
          FROM (SELECT t.name, t.key, @extschema@.rl_hash_code(t.name, t.key) AS code
                  FROM @extschema@.rl_buckets AS t
                 WHERE (p_name IS NULL OR t.name = p_name)
                   AND (after_name IS NULL
                        OR (@extschema@.rl_hash_code(t.name, t.key) >= after_code
                            AND (@extschema@.rl_hash_code(t.name, t.key), t.name, t.key)
                                > (after_code, after_name, after_key)))
                 ORDER BY 3, 1, 2 LIMIT least(batch_size, 1000)) AS c
         ORDER BY c.code DESC, c.name DESC, c.key DESC LIMIT 1;
        IF last_name IS NULL THEN
            deleted := leases;
            RETURN;
        END IF;
        PERFORM FROM @extschema@.rl_policy_changes AS c FOR SHARE;
        WITH judged AS (
            SELECT t.name, t.key
              FROM @extschema@.rl_buckets AS t LEFT JOIN @extschema@.rl_policies AS p ON p.name = t.name
             WHERE (p_name IS NULL OR t.name = p_name)
               AND (after_name IS NULL
                    OR (@extschema@.rl_hash_code(t.name, t.key) >= after_code
                        AND (@extschema@.rl_hash_code(t.name, t.key), t.name, t.key)
                            > (after_code, after_name, after_key)))
               AND @extschema@.rl_hash_code(t.name, t.key) <= last_code
               AND (@extschema@.rl_hash_code(t.name, t.key), t.name, t.key) <= (last_code, last_name, last_key)
               AND CASE WHEN p.kind OPERATOR(pg_catalog.=) 'sliding'::pg_catalog.text
                        THEN @extschema@.rl_sliding_is_full(ROW(t.tokens, t.stamp_us, t.previous)::@extschema@.rl_window,
                                                            @extschema@.rl_sliding_limit(p), now_us)
                        ELSE @extschema@.rl_forgettable(p, t.name, t.key, ROW(t.tokens, t.stamp_us, t.blocked_until_us)::@extschema@.rl_bucket,
                                                        t.full_at_us, now_us) END
               FOR UPDATE OF t SKIP LOCKED)
        DELETE FROM @extschema@.rl_buckets AS t USING judged WHERE t.name = judged.name AND t.key = judged.key;
        GET DIAGNOSTICS deleted = ROW_COUNT;
        deleted := deleted + leases;
        RETURN;
    END IF;
    SELECT c.name, c.key INTO last_name, last_key
      FROM (SELECT t.name, t.key FROM @extschema@.rl_buckets AS t
             WHERE (p_name IS NULL OR t.name = p_name)
               AND (after_name IS NULL OR (t.name, t.key) > (after_name, after_key))
             ORDER BY t.name, t.key LIMIT least(batch_size, 1000)) AS c
     ORDER BY c.name DESC, c.key DESC LIMIT 1;
    IF last_name IS NULL THEN
        deleted := leases;
        RETURN;
    END IF;
    -- Judged on the latest version once it is locked (READ COMMITTED
    -- rechecks the condition on a row replaced meanwhile); a row someone
    -- holds is skipped.  So is a row whose policy the snapshot sees in a
    -- version that a committed transaction may have replaced or deleted
    -- since: full by that definition, it may not be by the latest one.  A
    -- version with no xmax has not been; one with an xmax may merely be
    -- locked (by its own writer, by FOR KEY SHARE or FOR SHARE, or by a
    -- multixact, whose id is no transaction's), which the xmax does not
    -- tell, so it stands unless a policy was defined, redefined or dropped
    -- by a transaction committed since the snapshot: the snapshot's
    -- version of rl_policy_changes has been replaced.  And so is every row
    -- whose name has no policy in the snapshot, on the same condition: a
    -- policy defined since may govern the name, and a row full by the
    -- limit it was written with may not be by that policy.  The question
    -- is a subquery that names the row, asked as each row is judged (so
    -- also when it is judged again), never an InitPlan run once when the
    -- statement starts, which a policy defined while the statement runs
    -- would escape.  Left, a row is judged again by the next purge: leaving
    -- one changes no answer.
    WITH judged AS (
        SELECT t.ctid AS row_id
          FROM @extschema@.rl_buckets AS t LEFT JOIN @extschema@.rl_policies AS p ON p.name = t.name
         WHERE (p_name IS NULL OR t.name = p_name)
           AND (after_name IS NULL OR (t.name, t.key) > (after_name, after_key))
           AND (t.name, t.key) <= (last_name, last_key)
           AND ((p.name IS NOT NULL AND p.xmax OPERATOR(pg_catalog.=) '0'::pg_catalog.xid)
                OR NOT EXISTS (SELECT FROM @extschema@.rl_policy_changes AS c
                                WHERE (p.name IS NULL OR p.xmax OPERATOR(pg_catalog.<>) '0'::pg_catalog.xid)
                                  AND c.xmax OPERATOR(pg_catalog.<>) '0'::pg_catalog.xid
                                  AND @extschema@.rl_committed(c.xmax)))
           AND CASE WHEN p.kind OPERATOR(pg_catalog.=) 'sliding'::pg_catalog.text
                    THEN @extschema@.rl_sliding_is_full(ROW(t.tokens, t.stamp_us, t.previous)::@extschema@.rl_window,
                                                        @extschema@.rl_sliding_limit(p), now_us)
                    ELSE @extschema@.rl_forgettable(p, t.name, t.key, ROW(t.tokens, t.stamp_us, t.blocked_until_us)::@extschema@.rl_bucket,
                                                    t.full_at_us, now_us) END
           FOR UPDATE OF t SKIP LOCKED)
    DELETE FROM @extschema@.rl_buckets AS t USING judged WHERE t.ctid = judged.row_id;
    GET DIAGNOSTICS deleted = ROW_COUNT;
    deleted := deleted + leases;
END
$$;
-- Executable by anyone: a batch deletes only buckets whose deletion changes
-- no answer, so calling it directly gains nothing; the procedure, which
-- runs with its caller's rights, needs it (and nothing else of the
-- limiter's).
GRANT EXECUTE ON FUNCTION rl_purge_batch(text, text, text, integer) TO PUBLIC;


-- Before purge's first batch (BeginBatches): refused on a standby,
-- and inside a transaction block, where it could not commit: there the
-- transaction began before the CALL did.  A transaction that a procedure
-- began with its COMMIT (the purge's own, or its caller's) began after the
-- statement that called it, and the purge runs.  (From a function the
-- transaction began with the statement, and the procedure's first COMMIT
-- refuses the call, with 2D000.)
CREATE FUNCTION rl_begin_batches(function_name text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.pg_is_in_recovery() THEN
        PERFORM @extschema@.rl_report_recovery(function_name, @extschema@.rl_state_logged());
    END IF;
    IF pg_catalog.statement_timestamp() OPERATOR(pg_catalog.>) pg_catalog.transaction_timestamp() THEN
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
--extension: GRANT EXECUTE ON PROCEDURE rate_limit_purge(text, bigint) TO @extowner@ WITH GRANT OPTION;
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
    IF pg_catalog.octet_length($1) > @rl_max_name_bytes@ THEN
        PERFORM @extschema@.rl_report_too_long('name', pg_catalog.octet_length($1), @rl_max_name_bytes@);
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
\ir ../sql/src/buckets_columns.sql
CREATE FUNCTION rate_limit_buckets(:rl_buckets_params)
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
    IF pg_catalog.octet_length($1) > @rl_max_name_bytes@ THEN
        PERFORM @extschema@.rl_report_too_long('name', pg_catalog.octet_length($1), @rl_max_name_bytes@);
    END IF;
    PERFORM @extschema@.rl_require_readable('rate_limit_buckets');
    p := @extschema@.rl_find_policy($1);
    now_us := @extschema@.rl_now();
    FOR stored IN SELECT t.key, t.tokens, t.stamp_us, t.full_at_us, t.blocked_until_us, t.previous
                    FROM @extschema@.rl_buckets AS t WHERE t.name = $1 ORDER BY t.key LOOP
        b := ROW(stored.tokens, stored.stamp_us, stored.blocked_until_us)::@extschema@.rl_bucket;
        key := stored.key;
        shard := NULL;
        tokens := stored.tokens;
        previous := stored.previous;
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
        IF p.kind OPERATOR(pg_catalog.=) 'sliding'::pg_catalog.text THEN
            -- A sliding window: its room now, and when its estimate is 0.
            d := @extschema@.rl_sliding_decide(ROW(stored.tokens, stored.stamp_us, stored.previous)::@extschema@.rl_window,
                                               @extschema@.rl_sliding_limit(p), '0'::pg_catalog.float8, now_us);
            balance := d.remaining;
            full_at := @extschema@.rl_timestamp(@extschema@.rl_full_at(d, now_us));
        ELSIF row_limit IS NOT NULL THEN
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
    'the buckets of limit name in key order: key, shard (of a policy that splits keys), balance now and when it is full (by the policy; without one, no balance and full_at as last stored), the stored tokens and last_refill, until when a penalty box denies the key, and a sliding window''s count of the window before (previous)';
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
    IF NOT logged AND @extschema@.rl_on_yugabytedb() THEN
        RAISE EXCEPTION 'bucket state cannot be unlogged on YugabyteDB'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'YugabyteDB replicates every table, and takes UNLOGGED only to ignore it.',
                  HINT = 'Keep bucket state logged: on YugabyteDB it survives crashes and failovers.';
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

-- portable/concurrency.sql: included by policies.sql and by the upgrade
-- script to 0.4.0 (update--0.3.0--0.4.0.sql).
--
-- Concurrency limits held until the transaction ends, as the native table
-- engine keeps them (src/pg/holds.cpp): place `slot` of key (name, key) is
-- the transaction-level advisory lock number
--   (64-bit hash of name and key, its low 16 bits cleared) | slot
-- (max_held is at most 1000 < 2^16), taken by pg_try_advisory_xact_lock,
-- which never waits.  The lock manager gives it back when the transaction
-- ends, when a savepoint before the take is rolled back to, when the
-- statement's subtransaction fails and when the backend ends: no sweeper.
-- The native engine's places are advisory locks too, but with field4 256 +
-- slot where SQL's bigint locks have 1: the two limiters' places never meet.
--
-- Free places are counted in pg_locks, once a call: a slot is held when a
-- granted lock on its number is listed (this transaction's own included,
-- which pg_try_advisory_xact_lock, re-entrant, would "take" again).  A take
-- tries only the slots it saw free, from one that depends on the backend
-- (so that takers spread over them), and never tries a slot only to count
-- it (a lock taken to count would make another taker pass that slot by).
-- A lock cannot be released singly before its transaction ends: a take of
-- more than one place tries them in a subtransaction (an EXCEPTION block),
-- which a denial rolls back with the places it got; a take of one place
-- needs none.  Never waiting, a take raises neither 40001 nor 40P01 and
-- answers the same at every isolation level.

-- rate_limit_define_concurrency's check of the kind of hold: the portable
-- limiter holds places until the transaction ends, on PostgreSQL.
CREATE FUNCTION rl_require_concurrency(storage text, lease interval) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- storage 'memory' is refused by rate_limit_define_concurrency itself
    -- (rl_require_memory_engine), as by rate_limit_define.  Places held
    -- until the transaction ends and leases (rl_leases) are both kept.
    PERFORM @extschema@.rl_require_holds('rate_limit_define_concurrency');
END
$$;
COMMENT ON FUNCTION rl_require_concurrency(text, interval) IS
    'raises an error for a concurrency limit the portable limiter does not keep (any on YugabyteDB)';

-- Where places can be held and counted (RequireHolds, but for the
-- transaction block, which SQL cannot tell: see the README): not on a
-- standby, whose lock table is its own, nor on YugabyteDB, whose pg_locks
-- does not list advisory locks by their numbers.
CREATE FUNCTION rl_require_holds(function_name text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF @extschema@.rl_on_yugabytedb() THEN
        RAISE EXCEPTION 'the portable limiter keeps no concurrency limits on YugabyteDB'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'A place is a transaction-level advisory lock, counted in pg_locks, which on YugabyteDB lists the locks of its distributed storage, not advisory locks by their numbers.',
                  HINT = 'Bound how many run at once in the application, or use rate limits (rate_limit_define).';
    END IF;
    IF pg_catalog.pg_is_in_recovery() THEN
        RAISE EXCEPTION 'cannot execute %() of a concurrency limit during recovery', function_name
            USING ERRCODE = 'read_only_sql_transaction',
                  DETAIL = 'Places are held in the server''s lock table, and a standby server''s lock table is not the primary''s.',
                  HINT = 'Call it on the primary server.';
    END IF;
END
$$;
COMMENT ON FUNCTION rl_require_holds(text) IS
    'raises an error where places cannot be held: on a standby (25006) and on YugabyteDB (0A000)';

-- ReportLeaseRecovery
CREATE FUNCTION rl_report_lease_recovery(function_name text) RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'cannot execute %() of a concurrency limit with a lease during recovery', function_name
        USING ERRCODE = 'read_only_sql_transaction',
              DETAIL = 'Leases are kept in an unlogged table, which standby servers do not have.',
              HINT = 'Call it on the primary server.';
END
$$;
COMMENT ON FUNCTION rl_report_lease_recovery(text) IS
    'raises 25006 for a call of a concurrency limit with a lease, or a release, on a standby';

-- ReportLeaseReadOnly
CREATE FUNCTION rl_report_lease_read_only(function_name text, release boolean) RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'cannot execute %() in a read-only transaction', function_name
        USING ERRCODE = 'read_only_sql_transaction',
              DETAIL = CASE WHEN release
                            THEN pg_catalog.format('%s() deletes the lease''s row from rl_leases, the limiter''s own table.', function_name)
                            ELSE pg_catalog.format('%s() writes a lease row in rl_leases and its key''s row in rl_lease_keys, the limiter''s own tables.', function_name)
                            END,
              HINT = CASE WHEN release THEN 'Call it in a read-write transaction.'
                          ELSE 'Call it in a read-write transaction; rate_limit_check() works in read-only ones.' END;
END
$$;
COMMENT ON FUNCTION rl_report_lease_read_only(text, boolean) IS
    'raises 25006 for a lease taken, or released (release), in a read-only transaction';

-- Where a lease may be written, or deleted (release) (RequireLeaseWrite):
-- not on a standby, nor in a read-only transaction.
CREATE FUNCTION rl_require_lease_write(function_name text, release boolean) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.pg_is_in_recovery() THEN
        PERFORM @extschema@.rl_report_lease_recovery(function_name);
    END IF;
    IF pg_catalog.current_setting('transaction_read_only'::pg_catalog.text) OPERATOR(pg_catalog.=) 'on'::pg_catalog.text THEN
        PERFORM @extschema@.rl_report_lease_read_only(function_name, release);
    END IF;
END
$$;
COMMENT ON FUNCTION rl_require_lease_write(text, boolean) IS
    'raises 25006 where a lease cannot be written or deleted (release): on a standby and in a read-only transaction';

-- ReportBadPlaces
CREATE FUNCTION rl_report_bad_places(name text, cost float8, max_held float8) RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'cost must be a whole number of places from 0 to max_held'
        USING ERRCODE = 'invalid_parameter_value',
              DETAIL = pg_catalog.format('Policy "%s" is a concurrency limit holding at most %s at once; the cost given was %s.',
                                         name, max_held, cost),
              HINT = 'Pass the number of places to hold, such as 1.';
END
$$;
COMMENT ON FUNCTION rl_report_bad_places(text, float8, float8) IS
    'raises 22023 for a cost of a concurrency limit that is not a whole number of places from 0 to max_held';

-- ReportConcurrencyRefund
CREATE FUNCTION rl_report_concurrency_refund(name text, lease boolean) RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF lease THEN
        RAISE EXCEPTION 'a concurrency limit cannot be refunded'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = pg_catalog.format('Policy "%s" leases places, which come back when the lease expires or is released, not tokens.', name),
                  HINT = 'Release the lease with rate_limit_release to give its places back early.';
    END IF;
    RAISE EXCEPTION 'a concurrency limit cannot be refunded'
        USING ERRCODE = 'feature_not_supported',
              DETAIL = pg_catalog.format('Policy "%s" holds places, which come back when the transaction that took them ends, not tokens.', name),
              HINT = 'Roll back to a savepoint taken before the take to give its places back early.';
END
$$;
COMMENT ON FUNCTION rl_report_concurrency_refund(text, boolean) IS
    'raises 0A000 for rate_limit_refund of a concurrency limit (lease: one that leases its places)';

-- The places cost asks of concurrency limit p (CheckPlaces): 22023 unless
-- a whole number from 0 to max_held (its burst).
CREATE FUNCTION rl_places(p rl_policies, p_name text, cost float8) RETURNS integer
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF NOT coalesce(cost OPERATOR(pg_catalog.>=) '0'::pg_catalog.float8 AND cost OPERATOR(pg_catalog.<=) p.burst
                    AND cost OPERATOR(pg_catalog.=) pg_catalog.floor(cost), false) THEN
        PERFORM @extschema@.rl_report_bad_places(p_name, cost, p.burst::pg_catalog.float8);
    END IF;
    RETURN cost::integer;
END
$$;
COMMENT ON FUNCTION rl_places(rl_policies, text, float8) IS
    'the whole number of places cost asks of concurrency limit p; 22023 if it is none from 0 to max_held';

-- Take (take true) or check `places` places of key (name, key) of a limit
-- of max_held (HoldPlaces): a take holds them until the transaction ends,
-- or holds nothing; remaining is the places free after the call (after the
-- take, for a check that would grant), as far as this call saw them.  Denied, nobody knows when a place comes back:
-- retry_after NULL; reset_after and refill_after 0 when no place is held,
-- NULL otherwise.
CREATE FUNCTION rl_hold(p_name text, p_key text, max_held integer, places integer, take boolean)
RETURNS rl_decision
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    -- The number of place 0 (the native BucketHash of name and key, seeded
    -- with "places"), and the halves pg_locks shows it in.
    base bigint := pg_catalog.hashtextextended($2 COLLATE pg_catalog."C",
                       pg_catalog.hashtextextended($1 COLLATE pg_catalog."C", '123610792682867'::bigint))
                   OPERATOR(pg_catalog.&) '-65536'::bigint;
    low bigint := base OPERATOR(pg_catalog.&) '4294967295'::bigint;
    held integer[];
    free integer;
    slot integer;
    tried integer := 0;
    got integer := 0;
    allowed boolean;
BEGIN
    -- The slots some transaction holds, this one's included: one read.
    SELECT pg_catalog.array_agg((l.objid::pg_catalog.int8 OPERATOR(pg_catalog.-) low)::integer)
      INTO held
      FROM pg_catalog.pg_locks AS l
     WHERE l.locktype OPERATOR(pg_catalog.=) 'advisory'::pg_catalog.text
       AND l.database OPERATOR(pg_catalog.=) (SELECT d.oid FROM pg_catalog.pg_database AS d
                                               WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
       AND l.classid OPERATOR(pg_catalog.=)
           ((base OPERATOR(pg_catalog.>>) 32) OPERATOR(pg_catalog.&) '4294967295'::bigint)::pg_catalog.oid
       AND l.objsubid OPERATOR(pg_catalog.=) '1'::pg_catalog.int2
       AND l.granted
       AND l.objid::pg_catalog.int8 OPERATOR(pg_catalog.>=) low
       AND l.objid::pg_catalog.int8 OPERATOR(pg_catalog.<) (low OPERATOR(pg_catalog.+) $3);
    -- (A slot has one holder: its lock is exclusive.)
    free := $3 OPERATOR(pg_catalog.-) coalesce(pg_catalog.cardinality(held), 0);
    IF NOT $5 OR $4 OPERATOR(pg_catalog.=) 0 OR free OPERATOR(pg_catalog.<) $4 THEN
        allowed := free OPERATOR(pg_catalog.>=) $4;
    ELSIF $4 OPERATOR(pg_catalog.=) 1 THEN
        -- One place: the first slot got is the whole take.  The slots seen
        -- free, this backend's first one first.
        FOR i IN 0..$3 OPERATOR(pg_catalog.-) 1 LOOP
            slot := (pg_catalog.pg_backend_pid() OPERATOR(pg_catalog.+) i) OPERATOR(pg_catalog.%) $3;
            CONTINUE WHEN slot OPERATOR(pg_catalog.=) ANY (held);
            tried := tried OPERATOR(pg_catalog.+) 1;
            IF pg_catalog.pg_try_advisory_xact_lock(base OPERATOR(pg_catalog.|) slot::bigint) THEN
                got := 1;
                EXIT;
            END IF;
        END LOOP;
        allowed := got OPERATOR(pg_catalog.=) 1;
    ELSE
        -- Several: all of them, or none (the block's rollback gives back
        -- what it got).
        BEGIN
            FOR i IN 0..$3 OPERATOR(pg_catalog.-) 1 LOOP
                EXIT WHEN free OPERATOR(pg_catalog.-) tried OPERATOR(pg_catalog.+) got OPERATOR(pg_catalog.<) $4;
                slot := (pg_catalog.pg_backend_pid() OPERATOR(pg_catalog.+) i) OPERATOR(pg_catalog.%) $3;
                CONTINUE WHEN slot OPERATOR(pg_catalog.=) ANY (held);
                tried := tried OPERATOR(pg_catalog.+) 1;
                IF pg_catalog.pg_try_advisory_xact_lock(base OPERATOR(pg_catalog.|) slot::bigint) THEN
                    got := got OPERATOR(pg_catalog.+) 1;
                    EXIT WHEN got OPERATOR(pg_catalog.=) $4;
                END IF;
            END LOOP;
            IF got OPERATOR(pg_catalog.<) $4 THEN
                RAISE SQLSTATE 'RLHP0';
            END IF;
        EXCEPTION WHEN SQLSTATE 'RLHP0' THEN
            -- Denied: the places got are free again.
            tried := tried OPERATOR(pg_catalog.-) got;
            got := 0;
        END;
        allowed := got OPERATOR(pg_catalog.=) $4;
    END IF;
    -- Free after the call: those seen free, less those found taken meanwhile
    -- and those this call holds; for a check, those the take would hold.
    free := free OPERATOR(pg_catalog.-) tried;
    IF NOT $5 AND allowed THEN
        free := free OPERATOR(pg_catalog.-) $4;
    END IF;
    RETURN ROW(allowed, false, free::pg_catalog.float8,
               CASE WHEN allowed THEN '0'::pg_catalog.float8 END,
               CASE WHEN free OPERATOR(pg_catalog.=) $3 THEN '0'::pg_catalog.float8 END,
               CASE WHEN free OPERATOR(pg_catalog.=) $3 THEN '0'::pg_catalog.float8 END,
               NULL::@extschema@.rl_bucket, '0'::pg_catalog.float8)::@extschema@.rl_decision;
END
$$;
COMMENT ON FUNCTION rl_hold(text, text, integer, integer, boolean) IS
    'takes (take) or checks places places of key (name, key) of a concurrency limit of max_held, held until the transaction ends';

-- Take or check (op) of concurrency limit p by a policy's name
-- (HoldDecision; a take of a lease policy takes a lease): no reservation, a report-only limit's would-be denial
-- answered as allowed, holding nothing.
CREATE FUNCTION rl_hold_call(function_name text, p rl_policies, p_name text, p_key text, cost float8, op text)
RETURNS rate_limit_decision
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    d @extschema@.rl_decision;
BEGIN
    IF p.lease_us IS NOT NULL AND pg_catalog.pg_is_in_recovery() THEN
        PERFORM @extschema@.rl_report_lease_recovery(function_name);
    END IF;
    IF @extschema@.rl_on_yugabytedb() OR pg_catalog.pg_is_in_recovery() THEN
        PERFORM @extschema@.rl_require_holds(function_name);
    END IF;
    IF op OPERATOR(pg_catalog.=) 'take'::pg_catalog.text AND p.lease_us IS NOT NULL THEN
        PERFORM @extschema@.rl_require_lease_write(function_name, false);
    END IF;
    d := @extschema@.rl_places_decision(p_name, p_key, p.burst::integer, @extschema@.rl_places(p, p_name, cost),
                                        p.lease_us, op OPERATOR(pg_catalog.=) 'take'::pg_catalog.text);
    d.allowed := d.allowed OR NOT p.enforce;
    RETURN @extschema@.rl_policy_answer(d, p, p_name);
END
$$;
COMMENT ON FUNCTION rl_hold_call(text, rl_policies, text, text, float8, text) IS
    'takes or checks (op) the places of concurrency limit p for key, as rate_limit_take and rate_limit_check by a policy''s name do';

-- Leases (as the native src/pg/leases.cpp keeps them): a lease is a row of
-- rl_leases, `places` places of (name, key) until expires_us (the
-- limiter's clock) or until rate_limit_release deletes it; a take writes it
-- in the caller's transaction, so that a rollback gives it back.  An
-- expired lease counts as free at once; rate_limit_purge deletes it later.
-- A take counts and inserts holding the lock of its key's row in
-- rl_lease_keys, which it updates: a taker of the same key waits for the
-- holder's transaction to end and, at READ COMMITTED, then counts in a
-- snapshot that sees that lease; at REPEATABLE READ and SERIALIZABLE, where
-- the snapshot is older, the update fails with 40001 instead (as a take of
-- a bucket does), so a committed lease is never missed.  A release deletes
-- the lease's row (a concurrent release of the same lease: it waits, then
-- finds nothing at READ COMMITTED, and 40001 at the other levels).  State,
-- as rl_buckets is: unlogged (but on YugabyteDB, told by version() as
-- platform.sql tells it, which the upgrade to 0.4.0 runs after this file),
-- and dumped or not as rl_buckets is.
DO $$
BEGIN
    EXECUTE pg_catalog.format('CREATE %s TABLE rl_leases (
        id         uuid NOT NULL,
        name       text COLLATE "C" NOT NULL,
        key        text COLLATE "C" NOT NULL,
        places     integer NOT NULL,
        expires_us bigint NOT NULL,
        CONSTRAINT rl_leases_pkey PRIMARY KEY (id))',
        CASE WHEN pg_catalog.version() OPERATOR(pg_catalog.~) '-YB-' THEN '' ELSE 'UNLOGGED' END);
    EXECUTE pg_catalog.format('CREATE %s TABLE rl_lease_keys (
        name       text COLLATE "C" NOT NULL,
        key        text COLLATE "C" NOT NULL,
        taken      bigint NOT NULL,
        CONSTRAINT rl_lease_keys_pkey PRIMARY KEY (name, key))',
        CASE WHEN pg_catalog.version() OPERATOR(pg_catalog.~) '-YB-' THEN '' ELSE 'UNLOGGED' END);
END
$$;
CREATE INDEX rl_leases_key ON rl_leases (name, key, expires_us);
REVOKE ALL ON TABLE rl_leases, rl_lease_keys FROM PUBLIC;
--upgrade: REVOKE ALL ON TABLE rl_leases, rl_lease_keys FROM PUBLIC;
COMMENT ON TABLE rl_leases IS
    'leases of the concurrency limits of the portable rate limiter, each places places of (name, key) until expires_us or its release: written only by its functions';
COMMENT ON TABLE rl_lease_keys IS
    'one row per key of a concurrency limit with leases, whose lock serialises the takes of its leases';

-- The advisory lock a take of a lease holds shared and a drop of its
-- policy exclusively, until their transactions end: a 64-bit hash of the
-- name alone with its low 16 bits set, which no place of rl_hold (whose
-- low 16 bits are a slot below 1000) can be.
CREATE FUNCTION rl_lease_name_lock(p_name text) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT pg_catalog.hashtextextended(p_name COLLATE pg_catalog."C", '119225777398643'::bigint)
             OPERATOR(pg_catalog.|) '65535'::bigint $$;
COMMENT ON FUNCTION rl_lease_name_lock(text) IS
    'the advisory lock that keeps a drop of lease policy p_name and the takes of its leases apart';

-- Policy p_name (as rl_policy finds it, in place of which a call that may
-- take a lease calls this, at no cost of a call more), for a call that
-- takes by it (take) or only checks: where it takes a lease, looked up
-- again once the call holds the lock of rl_lease_name_lock shared, until
-- its transaction ends, so that a drop of the policy waits for the lease,
-- and everything the call decides and answers goes by the definition that
-- drop left (42704 if none; 40001 where the snapshot cannot move).  Not on
-- YugabyteDB, which refuses leases (rl_require_holds).
CREATE FUNCTION rl_policy_to_take(p_name text, take boolean) RETURNS rl_policies
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    p @extschema@.rl_policies := @extschema@.rl_find_policy(p_name);
BEGIN
    IF take AND p.lease_us IS NOT NULL AND NOT @extschema@.rl_on_yugabytedb() THEN
        PERFORM pg_catalog.pg_advisory_xact_lock_shared(@extschema@.rl_lease_name_lock(p_name));
        p := @extschema@.rl_find_policy(p_name);
    END IF;
    IF p.name IS NULL THEN
        PERFORM @extschema@.rl_report_undefined_policy(p_name, true);
    END IF;
    RETURN p;
END
$$;
COMMENT ON FUNCTION rl_policy_to_take(text, boolean) IS
    'policy p_name for a call that takes by it (take) or checks it, read again once a lease take holds the lock that a drop of the policy waits for';

-- rate_limit_drop deletes the leases of the policy it drops, in its
-- transaction (a policy defined again under the name would count them),
-- and its keys' rows.  It first takes the lock of rl_lease_name_lock
-- exclusively: every take of a lease of the name holds it shared until its
-- transaction ends, so once it is held every lease of the name has
-- committed or never will, and none is taken until this transaction ends
-- (a take that waited finds the policy gone).  At READ COMMITTED the
-- DELETEs, statements of their own, then see every lease.  A snapshot that
-- cannot move would not see a lease committed while the drop waited: at
-- REPEATABLE READ and SERIALIZABLE a drop that finds a lease being taken
-- fails with 40001 instead of waiting, and the DELETE of a key's row that
-- a take wrote since the snapshot fails with it too.  In a read-only
-- transaction or on a standby it takes no lock: its first DELETE says why
-- it cannot write.  Nor on YugabyteDB, which refuses leases (rl_require_holds).
CREATE FUNCTION rl_drop_leases(p_name text) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT @extschema@.rl_on_yugabytedb() AND NOT pg_catalog.pg_is_in_recovery()
       AND pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'off'
       AND NOT pg_catalog.pg_try_advisory_xact_lock(@extschema@.rl_lease_name_lock($1)) THEN
        IF pg_catalog.current_setting('transaction_isolation') OPERATOR(pg_catalog.<>) 'read committed' THEN
            RAISE EXCEPTION 'could not drop policy "%" while a lease of it is being taken', $1
                USING ERRCODE = 'serialization_failure',
                      DETAIL = 'A lease that commits after this transaction''s snapshot would not be seen, nor deleted.',
                      HINT = 'Retry the transaction.';
        END IF;
        PERFORM pg_catalog.pg_advisory_xact_lock(@extschema@.rl_lease_name_lock($1));
    END IF;
    DELETE FROM @extschema@.rl_lease_keys AS k WHERE k.name OPERATOR(pg_catalog.=) $1;
    DELETE FROM @extschema@.rl_leases AS l WHERE l.name OPERATOR(pg_catalog.=) $1;
END
$$;
COMMENT ON FUNCTION rl_drop_leases(text) IS
    'deletes the leases of concurrency limit p_name and its keys'' rows, which rate_limit_drop drops';

\ir ../sql/src/lease_type.sql

-- Takes (take) `places` places of (name, key) of a limit of max_held as
-- one lease of lease_us microseconds, or counts whether it could
-- (LeasePlaces): the decision (retry_after: until enough of the earliest
-- leases expire; reset_after: until the last expires; refill_after: until
-- the earliest does), and the lease written, if any.
CREATE FUNCTION rl_lease_places(p_name text, p_key text, max_held integer, places integer,
                                lease_us bigint, take boolean,
                                OUT d rl_decision, OUT lease uuid, OUT expires_us bigint)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    writes boolean := $6 AND $4 OPERATOR(pg_catalog.>) 0;
    now_us bigint;
    found_at bigint[];
    found_places integer[];
    held bigint;
    free bigint;
    at bigint;
    allowed boolean;
    retry pg_catalog.float8 := '0'::pg_catalog.float8;
    pos integer;
BEGIN
    IF writes THEN
        -- (The lock of rl_lease_name_lock is held: the caller found the
        -- policy with rl_policy_to_take.)
        LOOP
            INSERT INTO @extschema@.rl_lease_keys AS k VALUES ($1, $2, '0'::bigint)
            ON CONFLICT ON CONSTRAINT rl_lease_keys_pkey DO NOTHING;
            UPDATE @extschema@.rl_lease_keys AS k SET (taken) = ROW(k.taken OPERATOR(pg_catalog.+) '1'::bigint)
             WHERE k.name OPERATOR(pg_catalog.=) $1 AND k.key OPERATOR(pg_catalog.=) $2;
            EXIT WHEN FOUND;  -- (deleted meanwhile by a purge: again)
        END LOOP;
    END IF;
    -- Read after any wait.
    now_us := @extschema@.rl_now();
    SELECT pg_catalog.array_agg(l.expires_us ORDER BY l.expires_us),
           pg_catalog.array_agg(l.places ORDER BY l.expires_us),
           coalesce(pg_catalog.sum(l.places), '0'::bigint)
      INTO found_at, found_places, held
      FROM @extschema@.rl_leases AS l
     WHERE l.name OPERATOR(pg_catalog.=) $1 AND l.key OPERATOR(pg_catalog.=) $2
       AND l.expires_us OPERATOR(pg_catalog.>) now_us AND l.places OPERATOR(pg_catalog.>) 0;
    found_at := coalesce(found_at, '{}');
    found_places := coalesce(found_places, '{}');
    free := $3::bigint OPERATOR(pg_catalog.-) held;
    allowed := free OPERATOR(pg_catalog.>=) $4;
    IF allowed AND $4 OPERATOR(pg_catalog.>) 0 THEN
        -- Past the last timestamptz: the last one.
        at := least(now_us::numeric OPERATOR(pg_catalog.+) $5::numeric,
                               '9223371331199999999'::numeric)::bigint;
        IF writes THEN
            lease := pg_catalog.gen_random_uuid();
            expires_us := at;
            INSERT INTO @extschema@.rl_leases AS l VALUES (lease, $1, $2, $4, at);
        END IF;
        -- A check answers as the take would: with its lease, in order of
        -- expiry (after those that expire with it).
        pos := 1;
        WHILE pos OPERATOR(pg_catalog.<=) pg_catalog.cardinality(found_at)
              AND found_at[pos] OPERATOR(pg_catalog.<=) at LOOP
            pos := pos OPERATOR(pg_catalog.+) 1;
        END LOOP;
        found_at := found_at[1:pos OPERATOR(pg_catalog.-) 1] OPERATOR(pg_catalog.||) at
                    OPERATOR(pg_catalog.||) found_at[pos:];
        found_places := found_places[1:pos OPERATOR(pg_catalog.-) 1] OPERATOR(pg_catalog.||) $4
                        OPERATOR(pg_catalog.||) found_places[pos:];
        free := free OPERATOR(pg_catalog.-) $4;
    ELSIF NOT allowed THEN
        -- Until enough of the earliest leases expire.
        FOR i IN 1..pg_catalog.cardinality(found_at) LOOP
            EXIT WHEN free OPERATOR(pg_catalog.>=) $4;
            free := free OPERATOR(pg_catalog.+) found_places[i];
            retry := (found_at[i] OPERATOR(pg_catalog.-) now_us)::pg_catalog.float8 OPERATOR(pg_catalog./) '1000000'::pg_catalog.float8;
        END LOOP;
        free := $3::bigint OPERATOR(pg_catalog.-) held;
    END IF;
    -- max_held lowered below the places leased: none left, not fewer.
    d := ROW(allowed, false, greatest(free, '0'::bigint)::pg_catalog.float8, retry,
             CASE WHEN pg_catalog.cardinality(found_at) OPERATOR(pg_catalog.>) 0
                  THEN (found_at[pg_catalog.cardinality(found_at)] OPERATOR(pg_catalog.-) now_us)::pg_catalog.float8
                       OPERATOR(pg_catalog./) '1000000'::pg_catalog.float8
                  ELSE '0'::pg_catalog.float8 END,
             CASE WHEN pg_catalog.cardinality(found_at) OPERATOR(pg_catalog.>) 0
                  THEN (found_at[1] OPERATOR(pg_catalog.-) now_us)::pg_catalog.float8
                       OPERATOR(pg_catalog./) '1000000'::pg_catalog.float8
                  ELSE '0'::pg_catalog.float8 END,
             NULL::@extschema@.rl_bucket, '0'::pg_catalog.float8)::@extschema@.rl_decision;
END
$$;
COMMENT ON FUNCTION rl_lease_places(text, text, integer, integer, bigint, boolean) IS
    'takes (take) or checks places places of key (name, key) of a concurrency limit of max_held as one lease of lease_us microseconds';

-- The places of a concurrency limit, held until the transaction ends
-- (lease_us NULL) or leased: taken (take) or checked.
CREATE FUNCTION rl_places_decision(p_name text, p_key text, max_held integer, places integer,
                                   lease_us bigint, take boolean)
RETURNS rl_decision
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    IF $5 IS NULL THEN
        RETURN @extschema@.rl_hold($1, $2, $3, $4, $6);
    END IF;
    RETURN (@extschema@.rl_lease_places($1, $2, $3, $4, $5, $6)).d;
END
$$;
COMMENT ON FUNCTION rl_places_decision(text, text, integer, integer, bigint, boolean) IS
    'takes (take) or checks the places of a concurrency limit: held until the transaction ends, or leased for lease_us microseconds';

CREATE FUNCTION rate_limit_lease(name text, key text, cost float8 DEFAULT 1)
RETURNS rate_limit_lease
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p @extschema@.rl_policies;
    result record;
    taken @extschema@.rl_decision;
    lease_id uuid;
    expires_us bigint;
    d @extschema@.rate_limit_decision;
BEGIN
    IF pg_catalog.num_nulls($1, $2, $3) OPERATOR(pg_catalog.>) 0 THEN
        PERFORM @extschema@.rl_null_argument('rate_limit_lease', ARRAY['name', 'key', 'cost'],
                                             ARRAY[$1, $2, $3::pg_catalog.text],
                                             'Every argument of this function needs a value.');
    END IF;
    PERFORM @extschema@.rl_check_name_and_key($1, $2);
    p := @extschema@.rl_policy_to_take($1, true);
    IF p.lease_us IS NULL THEN
        RAISE EXCEPTION 'policy "%" has no lease', $1
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = CASE WHEN p.kind OPERATOR(pg_catalog.=) 'concurrency'::pg_catalog.text
                                THEN pg_catalog.format('Policy "%s" holds places until the transaction that took them ends.', $1)
                                ELSE pg_catalog.format('Policy "%s" is a rate limit, which holds no places.', $1) END,
                  HINT = CASE WHEN p.kind OPERATOR(pg_catalog.=) 'concurrency'::pg_catalog.text
                              THEN pg_catalog.format('Define the concurrency limit with a lease, such as rate_limit_define_concurrency(''%s'', 3, lease => ''30 seconds''), or take it with rate_limit_take.', $1)
                              ELSE 'Take a rate limit with rate_limit_take; rate_limit_lease takes places of a concurrency limit defined with a lease.' END;
    END IF;
    IF pg_catalog.pg_is_in_recovery() THEN
        PERFORM @extschema@.rl_report_lease_recovery('rate_limit_lease');
    END IF;
    IF @extschema@.rl_on_yugabytedb() THEN
        PERFORM @extschema@.rl_require_holds('rate_limit_lease');
    END IF;
    PERFORM @extschema@.rl_require_lease_write('rate_limit_lease', false);
    SELECT l.* INTO result
      FROM @extschema@.rl_lease_places($1, $2, p.burst::integer, @extschema@.rl_places(p, $1, $3),
                                       p.lease_us, true) AS l;
    taken := result.d;
    lease_id := result.lease;
    expires_us := result.expires_us;
    taken.allowed := taken.allowed OR NOT p.enforce;
    d := @extschema@.rl_policy_answer(taken, p, $1);
    RETURN ROW(d.allowed, d.remaining, d.retry_after, d.reset_after, d.capacity, d.name, d.quota,
               d.per, d.refill_after, lease_id,
               CASE WHEN lease_id IS NOT NULL THEN @extschema@.rl_timestamp(expires_us) END
              )::@extschema@.rate_limit_lease;
END
$$;
COMMENT ON FUNCTION rate_limit_lease(text, text, float8) IS
    'takes cost places of key of concurrency limit name (defined with a lease) as one lease, given back by a rollback, else held until it expires or rate_limit_release(lease); the decision, the lease''s id (NULL if denied) and when it expires';

CREATE FUNCTION rate_limit_release(lease uuid)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.pg_is_in_recovery() THEN
        PERFORM @extschema@.rl_report_lease_recovery('rate_limit_release');
    END IF;
    IF $1 IS NULL THEN
        RETURN false;
    END IF;
    PERFORM @extschema@.rl_require_lease_write('rate_limit_release', true);
    DELETE FROM @extschema@.rl_leases AS l
     WHERE l.id OPERATOR(pg_catalog.=) $1 AND l.expires_us OPERATOR(pg_catalog.>) @extschema@.rl_now();
    RETURN FOUND;
END
$$;
COMMENT ON FUNCTION rate_limit_release(uuid) IS
    'gives the places of a lease back now, in the caller''s transaction; false if it is not in force (unknown, expired, released, or NULL)';

-- rate_limit_purge's part: deletes the expired leases (of p_name, or of
-- every name) that no transaction is writing, and the keys left with no
-- lease that no transaction holds; how many leases.  rl_purge_batch calls
-- it in a purge's first batch.
CREATE FUNCTION rl_purge_leases(p_name text) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    now_us bigint := @extschema@.rl_now();
    deleted bigint;
    locked pg_catalog.tid[];
BEGIN
    DELETE FROM @extschema@.rl_leases AS l
     WHERE l.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(
           SELECT e.ctid FROM @extschema@.rl_leases AS e
            WHERE e.expires_us OPERATOR(pg_catalog.<=) now_us
              AND ($1 IS NULL OR e.name OPERATOR(pg_catalog.=) $1)
              FOR UPDATE SKIP LOCKED));
    GET DIAGNOSTICS deleted = ROW_COUNT;
    -- Keys are locked first and judged by a second statement: a taker
    -- updates its key's row before it writes a lease, so once the row is
    -- locked here every lease of that key has committed or never will, and
    -- the second statement's snapshot (newer than the lock) sees it.  In one
    -- statement, a lease committed between its snapshot and the row lock
    -- would be missed (a re-checked row does not re-run NOT EXISTS), and the
    -- key's row deleted under a lease in force.
    locked := ARRAY(SELECT e.ctid FROM @extschema@.rl_lease_keys AS e
                     WHERE ($1 IS NULL OR e.name OPERATOR(pg_catalog.=) $1)
                       AND NOT EXISTS (SELECT FROM @extschema@.rl_leases AS l
                                        WHERE l.name OPERATOR(pg_catalog.=) e.name AND l.key OPERATOR(pg_catalog.=) e.key)
                       FOR UPDATE SKIP LOCKED);
    DELETE FROM @extschema@.rl_lease_keys AS k
     WHERE k.ctid OPERATOR(pg_catalog.=) ANY (locked)
       AND NOT EXISTS (SELECT FROM @extschema@.rl_leases AS l
                        WHERE l.name OPERATOR(pg_catalog.=) k.name AND l.key OPERATOR(pg_catalog.=) k.key);
    RETURN deleted;
END
$$;
COMMENT ON FUNCTION rl_purge_leases(text) IS
    'deletes the expired leases of name (NULL: of every name) and the keys left without one; how many leases';

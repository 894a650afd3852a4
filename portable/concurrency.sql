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
    -- (rl_require_memory_engine), as by rate_limit_define.
    IF $2 IS NOT NULL THEN
        RAISE EXCEPTION 'concurrency limits with a lease are not available'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'In this version a place is held until the transaction that took it ends.',
                  HINT = 'Define the concurrency limit without a lease.';
    END IF;
    PERFORM @extschema@.rl_require_holds('rate_limit_define_concurrency');
END
$$;
COMMENT ON FUNCTION rl_require_concurrency(text, interval) IS
    'raises an error for a concurrency limit the portable limiter does not keep (a lease, or any on YugabyteDB)';

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
CREATE FUNCTION rl_report_concurrency_refund(name text) RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'a concurrency limit cannot be refunded'
        USING ERRCODE = 'feature_not_supported',
              DETAIL = pg_catalog.format('Policy "%s" holds places, which come back when the transaction that took them ends, not tokens.', name),
              HINT = 'Roll back to a savepoint taken before the take to give its places back early.';
END
$$;
COMMENT ON FUNCTION rl_report_concurrency_refund(text) IS
    'raises 0A000 for rate_limit_refund of a concurrency limit';

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
-- (HoldDecision): no reservation, a report-only limit's would-be denial
-- answered as allowed, holding nothing.
CREATE FUNCTION rl_hold_call(function_name text, p rl_policies, p_name text, p_key text, cost float8, op text)
RETURNS rate_limit_decision
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    d @extschema@.rl_decision;
BEGIN
    IF @extschema@.rl_on_yugabytedb() OR pg_catalog.pg_is_in_recovery() THEN
        PERFORM @extschema@.rl_require_holds(function_name);
    END IF;
    d := @extschema@.rl_hold(p_name, p_key, p.burst::integer, @extschema@.rl_places(p, p_name, cost),
                             op OPERATOR(pg_catalog.=) 'take'::pg_catalog.text);
    d.allowed := d.allowed OR NOT p.enforce;
    RETURN @extschema@.rl_policy_answer(d, p, p_name);
END
$$;
COMMENT ON FUNCTION rl_hold_call(text, rl_policies, text, text, float8, text) IS
    'takes or checks (op) the places of concurrency limit p for key, as rate_limit_take and rate_limit_check by a policy''s name do';

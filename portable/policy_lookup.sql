-- portable/policy_lookup.sql: how the portable limiter reads a policy as
-- last committed.  Included by policies.sql and by the upgrade script to
-- 0.4.0 (update--0.3.0--0.4.0.sql).
--
-- On PostgreSQL, by the system columns xmin, xmax and ctid of the version
-- a snapshot sees and the status of the transaction in its xmax.
-- YugabyteDB has neither (its parser refuses the columns): there the
-- limiter runs at READ COMMITTED only, where every statement reads the
-- latest committed rows, and refuses other levels (0A000).  The routines
-- that name them are PL/pgSQL, which YugabyteDB parses only when they run,
-- and never runs them.

-- Whether transaction x has committed.  x is an xmax, 32 bits: its epoch
-- is the one that puts it nearest the next transaction id of the
-- snapshot.
CREATE FUNCTION rl_committed(x xid) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RETURN (SELECT pg_catalog.pg_xact_status(
                       (s.next OPERATOR(pg_catalog.+) ((((x::pg_catalog.text::bigint OPERATOR(pg_catalog.-) (s.next OPERATOR(pg_catalog.%) '4294967296'::bigint))
                                      OPERATOR(pg_catalog.+) '6442450944'::bigint) OPERATOR(pg_catalog.%) '4294967296'::bigint)
                                    OPERATOR(pg_catalog.-) '2147483648'::bigint))::pg_catalog.text::pg_catalog.xid8)
                   OPERATOR(pg_catalog.=) 'committed'::pg_catalog.text
              FROM (SELECT pg_catalog.pg_snapshot_xmax(pg_catalog.pg_current_snapshot())::pg_catalog.text::bigint
                           AS next) AS s);
END
$$;

-- Whether a transaction that committed after the snapshot was taken has
-- defined, redefined or dropped a policy: the snapshot's version of
-- rl_policy_changes has been replaced since.  One single-row read.
CREATE FUNCTION rl_policies_changed() RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RETURN EXISTS (SELECT FROM @extschema@.rl_policy_changes AS c
                    WHERE CASE WHEN c.xmax OPERATOR(pg_catalog.=) '0'::pg_catalog.xid THEN false
                               ELSE @extschema@.rl_committed(c.xmax) END);
END
$$;

-- The policy called name as last committed, or NULL, as the native
-- limiter reads it whatever the caller's snapshot.  Plain SQL reads the
-- version the snapshot sees: one that a transaction which has committed
-- since replaced or deleted (its xmax) is not used.  At READ COMMITTED the
-- row is read again, by a statement with a newer snapshot; a REPEATABLE
-- READ or SERIALIZABLE snapshot cannot move, so there the call fails with
-- 40001.  An xmax may also be a row lock: rate_limit_define's INSERT ... ON
-- CONFLICT DO UPDATE leaves its own transaction's lock on the version it
-- writes (xmax = xmin, which a replaced version visible to another
-- snapshot never has).  Another transaction may lock the row too (FOR KEY
-- SHARE, FOR SHARE) and leave its id, or a multixact's, in the xmax: at
-- READ COMMITTED a version seen twice is taken as merely locked; under
-- REPEATABLE READ or SERIALIZABLE, a version whose xmax reads as committed
-- was replaced only if a policy was defined, redefined or dropped since
-- the snapshot was taken (rl_policies_changed).  No row: a
-- policy defined since a REPEATABLE READ or SERIALIZABLE snapshot was
-- taken would not be in it either, so there the call fails with 40001 if
-- any policy was defined, redefined or dropped since (one more read, off
-- the way of a take by a policy's name).  At READ COMMITTED the snapshot
-- was taken as the statement that found no row began: then no policy of
-- that name had been committed.  On YugabyteDB, READ COMMITTED only, and
-- the row as that statement reads it.
CREATE FUNCTION rl_find_policy(p_name text) RETURNS rl_policies
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    got record;
    seen pg_catalog.tid;
    latest @extschema@.rl_policies;
BEGIN
    IF @extschema@.rl_on_yugabytedb() THEN
        PERFORM @extschema@.rl_require_read_committed();
        SELECT p.* INTO latest FROM @extschema@.rl_policies AS p WHERE p.name OPERATOR(pg_catalog.=) p_name;
        RETURN latest;
    END IF;
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
            IF NOT @extschema@.rl_policies_changed() THEN
                RETURN got.policy;
            END IF;
            PERFORM @extschema@.rl_report_policy_changed(p_name);
        END IF;
        seen := got.at;
    END LOOP;
END
$$;

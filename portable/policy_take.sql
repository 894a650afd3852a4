-- portable/policy_take.sql: the common case of takes and checks
-- (rl_quick_call), and rate_limit_take and rate_limit_check by a policy's
-- name.  Included by policies.sql, after rl_policy_call, and by the upgrade
-- script to 0.4.0 (update--0.3.0--0.4.0.sql).

-- The common case of a take or a check (op), by a policy's name (rate
-- NULL) or with explicit parameters (rate tokens a second up to burst, not
-- reserving), as the general way would decide it, or NULL where it takes the
-- general way.  Its common case takes one read and, for a granted take, one
-- write: a policy without shards, fixed windows, a floor rate or a penalty
-- box, in the version last committed (one that no transaction has replaced,
-- deleted or locked since it was written: see rl_find_policy), or for
-- explicit parameters no policy of that name (at READ COMMITTED, where
-- rl_find_policy reads the row as the statement sees it); a key seen before,
-- out of any box; a take in a transaction that may write, a check anywhere
-- but on a standby.  The policy and the bucket as committed are read in one
-- statement without a lock, the clock after them; the decision is
-- rl_decide's, in the expressions of quick.sql; a granted take is stored if
-- the row still holds what it was decided on, as rl_apply does (found by
-- the ctid it was read at, and its name and key: a version written since
-- is at another ctid).  A row written meanwhile is then locked (READ
-- COMMITTED's UPDATE waits for its writer and locks the new version; the
-- other levels fail with 40001), and
-- the take is decided once more on the row as that writer left it, at a new
-- clock reading: by one more UPDATE where that leaves the same balance, else
-- from the start.  A denial and a check write and lock nothing.  Everything
-- else, and whatever the expressions cannot tell, is NULL.
CREATE FUNCTION rl_quick_call(p_name text, p_key text, cost float8, op text, rate float8, burst float8)
RETURNS rate_limit_decision
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    limit_rate pg_catalog.float8;        -- tokens a second
    limit_burst pg_catalog.float8;
    limit_quota pg_catalog.float8;       -- the policy's rate, per limit_per
    limit_per interval;
    limit_jitter pg_catalog.float8;
    limit_enforce boolean;               -- false: a denial is answered as allowed
    stored_tokens pg_catalog.float8;
    stored_stamp_us bigint;
    stored_blocked_us bigint;
    stored_at pg_catalog.tid;            -- where the row read is
    now_us bigint;
    balance pg_catalog.float8;
    left_over pg_catalog.float8;
    whole pg_catalog.float8;
    elapsed pg_catalog.float8;           -- microseconds since the stamp
    credit pg_catalog.float8;            -- and their credit
    capped pg_catalog.float8;
    estimate pg_catalog.float8;
    gap pg_catalog.float8;               -- burst less the tokens held
    at_credit pg_catalog.float8;         -- the credits at estimate, and at the microsecond before
    before_credit pg_catalog.float8;
    reset_us pg_catalog.float8;
    refill_us pg_catalog.float8;
    retry_us pg_catalog.float8;
BEGIN
    IF coalesce(NOT @extschema@.rl_on_yugabytedb() AND $3 OPERATOR(pg_catalog.>=) '0'::pg_catalog.float8
                AND pg_catalog.octet_length($2) OPERATOR(pg_catalog.<=) @rl_max_key_bytes@
                AND CASE WHEN $4 OPERATOR(pg_catalog.=) 'take'::pg_catalog.text
                         THEN pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'off'
                         ELSE NOT pg_catalog.pg_is_in_recovery() END
                AND ($5 IS NULL
                     OR ($5 OPERATOR(pg_catalog.>) '1e-150'::pg_catalog.float8
                         AND $5 OPERATOR(pg_catalog.<) '1e150'::pg_catalog.float8
                         AND $6 OPERATOR(pg_catalog.>) '0'::pg_catalog.float8
                         AND pg_catalog.octet_length($1) OPERATOR(pg_catalog.>=) 1
                         AND pg_catalog.octet_length($1) OPERATOR(pg_catalog.<=) @rl_max_name_bytes@
                         AND pg_catalog.current_setting('transaction_isolation')
                             OPERATOR(pg_catalog.=) 'read committed')), false) THEN
        FOR attempt IN 1..2 LOOP
            IF $5 IS NULL THEN
                SELECT p.tokens_per_second, p.burst, p.rate, p.per, p.jitter, p.enforce,
                       b.tokens, b.stamp_us, b.blocked_until_us, b.ctid, @extschema@.rl_now()
                  INTO limit_rate, limit_burst, limit_quota, limit_per, limit_jitter, limit_enforce,
                       stored_tokens, stored_stamp_us, stored_blocked_us, stored_at, now_us
                  FROM @extschema@.rl_policies AS p, @extschema@.rl_buckets AS b
                 WHERE p.name OPERATOR(pg_catalog.=) $1 AND b.name OPERATOR(pg_catalog.=) $1
                   AND b.key OPERATOR(pg_catalog.=) $2
                   AND (p.xmax OPERATOR(pg_catalog.=) '0'::pg_catalog.xid OR p.xmax OPERATOR(pg_catalog.=) p.xmin)
                   AND p.shards OPERATOR(pg_catalog.=) 1 AND NOT p.fixed_window
                   AND p.kind OPERATOR(pg_catalog.<>) 'sliding'::pg_catalog.text
                   AND p.floor_per_second OPERATOR(pg_catalog.=) '0'::pg_catalog.float8
                   AND coalesce(p.penalty_us, '0'::bigint) OPERATOR(pg_catalog.=) '0'::bigint;
            ELSE
                -- No policy of that name as committed when this statement
                -- began (READ COMMITTED: as rl_find_policy finds it).
                SELECT $5, $6, $5, '1 second'::interval, '0'::pg_catalog.float8, true,
                       b.tokens, b.stamp_us, b.blocked_until_us, b.ctid, @extschema@.rl_now()
                  INTO limit_rate, limit_burst, limit_quota, limit_per, limit_jitter, limit_enforce,
                       stored_tokens, stored_stamp_us, stored_blocked_us, stored_at, now_us
                  FROM @extschema@.rl_buckets AS b
                 WHERE b.name OPERATOR(pg_catalog.=) $1 AND b.key OPERATOR(pg_catalog.=) $2
                   AND NOT EXISTS (SELECT FROM @extschema@.rl_policies AS p WHERE p.name OPERATOR(pg_catalog.=) $1);
            END IF;
            -- The bounds of quick.sql's expressions, and a bucket out of any
            -- box.  A clock reading is a timestamptz, never 2^61
            -- microseconds below 0: a stamp within 2^52 before it is within
            -- 2^62 of 0.
            EXIT WHEN NOT FOUND
                      OR NOT (greatest(stored_stamp_us, stored_blocked_us) OPERATOR(pg_catalog.<=) now_us
                              AND (now_us OPERATOR(pg_catalog.-) stored_stamp_us)
                                  OPERATOR(pg_catalog.<) '4503599627370496'::bigint
                              AND now_us OPERATOR(pg_catalog.<) '4611686018427387904'::bigint
                              AND limit_rate OPERATOR(pg_catalog.>) '1e-150'::pg_catalog.float8
                              AND greatest(limit_rate, limit_burst) OPERATOR(pg_catalog.<) '1e150'::pg_catalog.float8
                              AND stored_tokens OPERATOR(pg_catalog.>) '-1e150'::pg_catalog.float8
                              AND $3 OPERATOR(pg_catalog.<=) limit_burst);
            elapsed := (now_us OPERATOR(pg_catalog.-) stored_stamp_us)::pg_catalog.float8;
            credit := @extschema@.rl_quick_credit(elapsed, limit_rate);
            balance := @extschema@.rl_quick_refilled(stored_tokens, credit, now_us OPERATOR(pg_catalog.=) stored_stamp_us,
                                                     limit_burst);
            left_over := balance OPERATOR(pg_catalog.-) $3;
            IF left_over OPERATOR(pg_catalog.>=) '0'::pg_catalog.float8 THEN
                -- Granted: the waits of the bucket left, stamped now (elapsed
                -- 0, which adds nothing to a wait).
                IF left_over OPERATOR(pg_catalog.>=) limit_burst THEN
                    reset_us := '0'::pg_catalog.float8;
                ELSE
                    gap := limit_burst OPERATOR(pg_catalog.-) left_over;
                    estimate := @extschema@.rl_quick_estimate(left_over, limit_burst, limit_rate);
                    at_credit := @extschema@.rl_quick_credit(estimate, limit_rate);
                    before_credit := @extschema@.rl_quick_credit(estimate OPERATOR(pg_catalog.-) '1'::pg_catalog.float8,
                                                                 limit_rate);
                    reset_us := @extschema@.rl_quick_wait(estimate, at_credit, before_credit, left_over, gap, limit_burst);
                    IF reset_us IS NULL THEN
                        reset_us := @extschema@.rl_quick_wait_near(estimate, '0'::pg_catalog.float8, limit_rate,
                                                                   left_over, gap, limit_burst);
                        EXIT WHEN reset_us IS NULL;
                    END IF;
                END IF;
                -- The next whole token (rl_next_whole_token's common case).
                -- Where it is burst or more, rl_next_whole_token's level is
                -- burst, also where a token more is not representable (past
                -- 2^53): refill_after is then reset_after.
                whole := greatest(pg_catalog.floor(left_over), '0'::pg_catalog.float8) OPERATOR(pg_catalog.+) '1'::pg_catalog.float8;
                IF whole OPERATOR(pg_catalog.>=) limit_burst THEN
                    refill_us := reset_us;
                ELSE
                    EXIT WHEN NOT (whole OPERATOR(pg_catalog.>) left_over);
                    -- (left_over < whole < burst: gap is set.)
                    estimate := @extschema@.rl_quick_estimate(left_over, whole, limit_rate);
                    at_credit := @extschema@.rl_quick_credit(estimate, limit_rate);
                    before_credit := @extschema@.rl_quick_credit(estimate OPERATOR(pg_catalog.-) '1'::pg_catalog.float8,
                                                                 limit_rate);
                    refill_us := @extschema@.rl_quick_wait(estimate, at_credit, before_credit, left_over, gap, whole);
                    IF refill_us IS NULL THEN
                        refill_us := @extschema@.rl_quick_wait_near(estimate, '0'::pg_catalog.float8, limit_rate,
                                                                    left_over, gap, whole);
                        EXIT WHEN refill_us IS NULL;
                    END IF;
                END IF;
                IF $4 OPERATOR(pg_catalog.=) 'take'::pg_catalog.text AND $3 OPERATOR(pg_catalog.>) '0'::pg_catalog.float8 THEN
                    -- Full at now + reset_after: no earlier than the end of
                    -- the box the bucket is out of (rl_full_at's greatest()).
                    UPDATE @extschema@.rl_buckets AS t
                       SET (tokens, stamp_us, full_at_us, previous)
                           = ROW(left_over, now_us, now_us OPERATOR(pg_catalog.+) reset_us::bigint, '0'::pg_catalog.float8)
                     WHERE t.ctid OPERATOR(pg_catalog.=) stored_at
                       AND t.name OPERATOR(pg_catalog.=) $1 AND t.key OPERATOR(pg_catalog.=) $2
                       AND t.tokens OPERATOR(pg_catalog.=) stored_tokens
                       AND t.stamp_us OPERATOR(pg_catalog.=) stored_stamp_us
                       AND t.blocked_until_us OPERATOR(pg_catalog.=) stored_blocked_us;
                    IF NOT FOUND THEN
                        -- Written meanwhile, and now locked: decided again at a
                        -- clock reading taken now.  Where the row as its
                        -- writer left it leaves the same balance then, the
                        -- waits, which depend on nothing else, are the same.
                        now_us := @extschema@.rl_now();
                        -- The bounds of the first reading, on the row as
                        -- locked; full at now + reset_after, as above.
                        UPDATE @extschema@.rl_buckets AS t
                           SET (tokens, stamp_us, full_at_us, previous)
                               = ROW(left_over, now_us, now_us OPERATOR(pg_catalog.+) reset_us::bigint,
                                     '0'::pg_catalog.float8)
                         WHERE t.name OPERATOR(pg_catalog.=) $1 AND t.key OPERATOR(pg_catalog.=) $2
                           AND now_us OPERATOR(pg_catalog.<) '4611686018427387904'::bigint
                           AND greatest(t.stamp_us, t.blocked_until_us) OPERATOR(pg_catalog.<=) now_us
                           AND (now_us OPERATOR(pg_catalog.-) t.stamp_us) OPERATOR(pg_catalog.<) '4503599627370496'::bigint
                           AND t.tokens OPERATOR(pg_catalog.>) '-1e150'::pg_catalog.float8
                           AND (@extschema@.rl_quick_balance(t.tokens, t.stamp_us, now_us, limit_rate, limit_burst)
                                OPERATOR(pg_catalog.-) $3) OPERATOR(pg_catalog.=) left_over;
                        CONTINUE WHEN NOT FOUND;
                    END IF;
                END IF;
                RETURN ROW(true, left_over, '0'::pg_catalog.float8,
                           reset_us OPERATOR(pg_catalog./) '1000000'::pg_catalog.float8, limit_burst, $1, limit_quota,
                           limit_per, refill_us OPERATOR(pg_catalog./) '1000000'::pg_catalog.float8
                          )::@extschema@.rate_limit_decision;
            END IF;
            -- Denied: the waits of the bucket as stored; nothing written.  A
            -- report-only policy's would-be denial is answered as allowed.
            capped := least(stored_tokens, limit_burst);
            gap := limit_burst OPERATOR(pg_catalog.-) capped;
            estimate := @extschema@.rl_quick_estimate(balance, $3, limit_rate);
            at_credit := @extschema@.rl_quick_credit(elapsed OPERATOR(pg_catalog.+) estimate, limit_rate);
            before_credit := @extschema@.rl_quick_credit(elapsed OPERATOR(pg_catalog.+)
                                                         (estimate OPERATOR(pg_catalog.-) '1'::pg_catalog.float8),
                                                         limit_rate);
            retry_us := @extschema@.rl_quick_wait(estimate, at_credit, before_credit, capped, gap, $3);
            IF retry_us IS NULL THEN
                retry_us := @extschema@.rl_quick_wait_near(estimate, elapsed, limit_rate, capped, gap, $3);
                EXIT WHEN retry_us IS NULL;
            END IF;
            estimate := @extschema@.rl_quick_estimate(balance, limit_burst, limit_rate);
            at_credit := @extschema@.rl_quick_credit(elapsed OPERATOR(pg_catalog.+) estimate, limit_rate);
            before_credit := @extschema@.rl_quick_credit(elapsed OPERATOR(pg_catalog.+)
                                                         (estimate OPERATOR(pg_catalog.-) '1'::pg_catalog.float8),
                                                         limit_rate);
            reset_us := @extschema@.rl_quick_wait(estimate, at_credit, before_credit, capped, gap, limit_burst);
            IF reset_us IS NULL THEN
                reset_us := @extschema@.rl_quick_wait_near(estimate, elapsed, limit_rate, capped, gap, limit_burst);
                EXIT WHEN reset_us IS NULL;
            END IF;
            whole := greatest(pg_catalog.floor(balance), '0'::pg_catalog.float8) OPERATOR(pg_catalog.+) '1'::pg_catalog.float8;
            IF whole OPERATOR(pg_catalog.>=) limit_burst THEN
                refill_us := reset_us;
            ELSE
                EXIT WHEN NOT (whole OPERATOR(pg_catalog.>) balance);
                estimate := @extschema@.rl_quick_estimate(balance, whole, limit_rate);
                at_credit := @extschema@.rl_quick_credit(elapsed OPERATOR(pg_catalog.+) estimate, limit_rate);
                before_credit := @extschema@.rl_quick_credit(elapsed OPERATOR(pg_catalog.+)
                                                             (estimate OPERATOR(pg_catalog.-) '1'::pg_catalog.float8),
                                                             limit_rate);
                refill_us := @extschema@.rl_quick_wait(estimate, at_credit, before_credit, capped, gap, whole);
                IF refill_us IS NULL THEN
                    refill_us := @extschema@.rl_quick_wait_near(estimate, elapsed, limit_rate, capped, gap, whole);
                    EXIT WHEN refill_us IS NULL;
                END IF;
            END IF;
            RETURN ROW(NOT limit_enforce, balance,
                       CASE WHEN limit_jitter OPERATOR(pg_catalog.>) '0'::pg_catalog.float8
                            THEN @extschema@.rl_jittered(retry_us OPERATOR(pg_catalog./) '1000000'::pg_catalog.float8,
                                                         limit_jitter, $1, $2)
                            ELSE retry_us OPERATOR(pg_catalog./) '1000000'::pg_catalog.float8 END,
                       reset_us OPERATOR(pg_catalog./) '1000000'::pg_catalog.float8, limit_burst, $1, limit_quota,
                       limit_per, refill_us OPERATOR(pg_catalog./) '1000000'::pg_catalog.float8
                      )::@extschema@.rate_limit_decision;
        END LOOP;
    END IF;
    RETURN NULL;
END
$$;

-- A take by a policy's name: its common case is rl_quick_call's, the rest
-- rl_policy_call's.
--
-- The only SECURITY DEFINER routine without a SET search_path clause: a
-- SET clause costs each call nearly a tenth of its time (the setting is
-- made and undone, and the namespace search path computed anew, on every
-- call).  It resolves nothing through its caller's search_path instead:
-- every operator is OPERATOR(pg_catalog.x), every function, type and table
-- schema-qualified (bigint and interval are keywords of the grammar, which
-- names pg_catalog's types), as in every routine without the clause
-- (ratelimit.sql); casts, coercions and the comparisons of greatest() are
-- found by type, not by name; its PL/pgSQL variables' types are qualified
-- too, for PL/pgSQL resolves them when it first compiles the function in
-- a session, under that caller's search_path.  What it calls is either
-- pinned or qualified the same way.  test/cluster/portable_install.sh
-- checks the text of every such routine, and calls it under a search_path
-- that plants a trap for each name it could resolve otherwise.
-- Its text is rl_quick_call's, made here for a take by a policy's name
-- (op 'take', rate and burst NULL, which the planner folds away), with the
-- general way in place of its last RETURN NULL: so that the call made on
-- every request calls no second PL/pgSQL function, which measured about a
-- seventh of a take's time.
DO $take$
DECLARE
    body pg_catalog.text;
    tail CONSTANT pg_catalog.text := E'\n    RETURN NULL;\nEND\n';
BEGIN
    SELECT p.prosrc INTO STRICT body FROM pg_catalog.pg_proc AS p
     WHERE p.oid OPERATOR(pg_catalog.=) pg_catalog.to_regprocedure(pg_catalog.format(
               '%I.rl_quick_call(pg_catalog.text, pg_catalog.text, pg_catalog.float8, pg_catalog.text, pg_catalog.float8, pg_catalog.float8)', pg_catalog.current_schema()));
    IF pg_catalog.right(body, pg_catalog.length(tail)) OPERATOR(pg_catalog.<>) tail THEN
        RAISE EXCEPTION 'rl_quick_call does not end as rate_limit_take expects'
            USING ERRCODE = 'internal_error',
                  DETAIL = 'rate_limit_take(name, key, cost) is made from the text of rl_quick_call, which ends in RETURN NULL.';
    END IF;
    body := pg_catalog.left(body, OPERATOR(pg_catalog.-) pg_catalog.length(tail)) OPERATOR(pg_catalog.||) $general$
    IF pg_catalog.num_nulls($1, $2, $3) OPERATOR(pg_catalog.>) 0 THEN
        PERFORM @extschema@.rl_null_argument('rate_limit_take', ARRAY['name', 'key', 'cost'],
                                             ARRAY[$1, $2, $3::pg_catalog.text],
                                             'Every argument of this function needs a value.');
    END IF;
    RETURN @extschema@.rl_policy_call('rate_limit_take', $1, $2, $3, '0'::pg_catalog.float8, 'take');
END
$general$;
    body := pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(body,
                '$4', '''take''::pg_catalog.text'), '$5', 'NULL::pg_catalog.float8'), '$6', 'NULL::pg_catalog.float8');
    EXECUTE pg_catalog.format('CREATE OR REPLACE FUNCTION %1$I.rate_limit_take(name text, key text, cost float8 DEFAULT 1)
                               RETURNS %1$I.rate_limit_decision LANGUAGE plpgsql VOLATILE SECURITY DEFINER AS %2$L',
                              pg_catalog.current_schema(), body);
END
$take$;
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
    RETURN coalesce(@extschema@.rl_quick_call($1, $2, $3, 'check', NULL::float8, NULL::float8),
                    @extschema@.rl_policy_call('rate_limit_check', $1, $2, $3, 0::float8, 'check'));
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
    -- No wait: the take without one, and its common case.
    IF $4 IS NULL OR pg_catalog.date_part('epoch', $4) = '0'::float8 THEN
        RETURN @extschema@.rate_limit_take($1, $2, $3);
    END IF;
    RETURN @extschema@.rl_policy_call('rate_limit_take', $1, $2, $3, @extschema@.rl_max_wait($4), 'take');
END
$$;
COMMENT ON FUNCTION rate_limit_take(text, text, float8, interval) IS
    'takes cost tokens from the bucket (name, key) of policy name; when it holds too few, reserves them if the work may start within max_wait and the policy''s max_reserved allows the debt';

-- portable/policy_take.sql: rate_limit_take by a policy's name.  Included
-- by policies.sql, after rl_policy_call, and by the upgrade script to 0.4.0
-- (update--0.3.0--0.4.0.sql).

-- A take by a policy's name.  Its common case takes one read and, for a
-- grant, one write: a policy without shards, fixed windows, a floor rate
-- or a penalty box, in the version last committed (one that no
-- transaction has replaced, deleted or locked since it was written: see
-- rl_find_policy), a key seen before, out of any box, and a transaction
-- that may write.  The policy and the bucket as committed are read in one
-- statement without a lock, the clock after them; the decision is
-- rl_decide's, in the expressions of quick.sql; a grant is stored if the
-- row still holds what it was decided on, as rl_apply does.  A row written
-- meanwhile is then locked (READ COMMITTED's UPDATE waits for its writer
-- and locks the new version; the other levels fail with 40001), and the
-- take is decided once more on the row as that writer left it, at a new
-- clock reading.  A denial writes and locks nothing.  Everything else
-- (and whatever the expressions cannot tell) is rl_policy_call's.
CREATE FUNCTION rate_limit_take(name text, key text, cost float8 DEFAULT 1)
RETURNS rate_limit_decision
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    q record;
    balance float8;
    left_over float8;
    whole float8;
    elapsed float8;
    capped float8;
    estimate float8;
    reset_us float8;
    refill_us float8;
    retry_us float8;
BEGIN
    IF NOT @extschema@.rl_on_yugabytedb() AND $3 >= '0'::float8
       AND pg_catalog.octet_length($2) <= @rl_max_key_bytes@
       AND pg_catalog.current_setting('transaction_read_only') = 'off' THEN
        FOR attempt IN 1..2 LOOP
            SELECT p.tokens_per_second AS rate, p.burst, p.rate AS quota, p.per, p.jitter,
                   b.tokens, b.stamp_us, b.blocked_until_us, @extschema@.rl_now() AS now_us
              INTO q
              FROM @extschema@.rl_policies AS p, @extschema@.rl_buckets AS b
             WHERE p.name = $1 AND b.name = $1 AND b.key = $2 AND (p.xmax = '0'::xid OR p.xmax = p.xmin)
               AND p.shards = 1 AND NOT p.fixed_window AND p.floor_per_second = '0'::float8
               AND coalesce(p.penalty_us, '0'::bigint) = '0'::bigint;
            EXIT WHEN NOT FOUND
                      OR NOT (q.stamp_us <= q.now_us AND q.blocked_until_us <= q.now_us
                              AND q.now_us - q.stamp_us < '4503599627370496'::bigint
                              AND q.stamp_us > '-4611686018427387904'::bigint
                              AND q.now_us < '4611686018427387904'::bigint
                              AND q.rate > '1e-150'::float8 AND q.rate < '1e150'::float8
                              AND q.burst < '1e150'::float8 AND q.tokens > '-1e150'::float8 AND $3 <= q.burst);
            left_over := @extschema@.rl_quick_balance(q.tokens, q.stamp_us, q.now_us, q.rate, q.burst) - $3;
            IF left_over >= '0'::float8 THEN
                -- Granted: the waits of the bucket left, stamped now.
                IF left_over >= q.burst THEN
                    reset_us := '0'::float8;
                ELSE
                    estimate := @extschema@.rl_quick_estimate(left_over, q.burst, q.rate);
                    reset_us := @extschema@.rl_quick_wait('0'::float8, left_over, q.burst - left_over, estimate,
                                                          q.burst, q.rate);
                    IF reset_us IS NULL THEN
                        reset_us := @extschema@.rl_quick_wait_after('0'::float8, left_over, q.burst - left_over, estimate,
                                                                    q.burst, q.rate);
                        EXIT WHEN reset_us IS NULL;
                    END IF;
                END IF;
                whole := @extschema@.rl_next_whole_token(left_over, q.burst);
                IF whole = q.burst THEN
                    refill_us := reset_us;
                ELSIF left_over >= whole THEN
                    refill_us := '0'::float8;
                ELSE
                    estimate := @extschema@.rl_quick_estimate(left_over, whole, q.rate);
                    refill_us := @extschema@.rl_quick_wait('0'::float8, left_over, q.burst - left_over, estimate,
                                                           whole, q.rate);
                    IF refill_us IS NULL THEN
                        refill_us := @extschema@.rl_quick_wait_after('0'::float8, left_over, q.burst - left_over,
                                                                     estimate, whole, q.rate);
                        EXIT WHEN refill_us IS NULL;
                    END IF;
                END IF;
                IF $3 > '0'::float8 THEN
                    UPDATE @extschema@.rl_buckets AS t
                       SET tokens = left_over, stamp_us = q.now_us,
                           full_at_us = greatest(q.now_us + reset_us::bigint, q.blocked_until_us)
                     WHERE t.name = $1 AND t.key = $2 AND t.tokens = q.tokens AND t.stamp_us = q.stamp_us
                       AND t.blocked_until_us = q.blocked_until_us;
                    CONTINUE WHEN NOT FOUND;
                END IF;
                RETURN ROW(true, left_over, '0'::float8, reset_us / '1000000'::float8, q.burst, $1, q.quota, q.per,
                           refill_us / '1000000'::float8)::@extschema@.rate_limit_decision;
            END IF;
            -- Denied: the waits of the bucket as stored; nothing written.
            balance := @extschema@.rl_quick_balance(q.tokens, q.stamp_us, q.now_us, q.rate, q.burst);
            whole := @extschema@.rl_next_whole_token(balance, q.burst);
            elapsed := (q.now_us - q.stamp_us)::float8;
            capped := CASE WHEN q.tokens < q.burst THEN q.tokens ELSE q.burst END;
            estimate := @extschema@.rl_quick_estimate(balance, $3, q.rate);
            retry_us := coalesce(@extschema@.rl_quick_wait(elapsed, capped, q.burst - capped, estimate, $3, q.rate),
                                 @extschema@.rl_quick_wait_after(elapsed, capped, q.burst - capped, estimate, $3, q.rate));
            estimate := @extschema@.rl_quick_estimate(balance, q.burst, q.rate);
            reset_us := coalesce(@extschema@.rl_quick_wait(elapsed, capped, q.burst - capped, estimate, q.burst, q.rate),
                                 @extschema@.rl_quick_wait_after(elapsed, capped, q.burst - capped, estimate, q.burst,
                                                                 q.rate));
            IF whole = q.burst THEN
                refill_us := reset_us;
            ELSE
                estimate := @extschema@.rl_quick_estimate(balance, whole, q.rate);
                refill_us := coalesce(@extschema@.rl_quick_wait(elapsed, capped, q.burst - capped, estimate, whole, q.rate),
                                      @extschema@.rl_quick_wait_after(elapsed, capped, q.burst - capped, estimate, whole,
                                                                      q.rate));
            END IF;
            EXIT WHEN retry_us IS NULL OR reset_us IS NULL OR refill_us IS NULL;
            RETURN ROW(false, balance,
                       CASE WHEN q.jitter > '0'::float8
                            THEN @extschema@.rl_jittered(retry_us / '1000000'::float8, q.jitter, $1, $2)
                            ELSE retry_us / '1000000'::float8 END,
                       reset_us / '1000000'::float8, q.burst, $1, q.quota, q.per,
                       refill_us / '1000000'::float8)::@extschema@.rate_limit_decision;
        END LOOP;
    END IF;
    IF pg_catalog.num_nulls($1, $2, $3) > 0 THEN
        PERFORM @extschema@.rl_null_argument('rate_limit_take', ARRAY['name', 'key', 'cost'],
                                 ARRAY[$1, $2, $3::text], 'Every argument of this function needs a value.');
    END IF;
    RETURN @extschema@.rl_policy_call('rate_limit_take', $1, $2, $3, 0::float8, 'take');
END
$$;
COMMENT ON FUNCTION rate_limit_take(text, text, float8) IS
    'takes cost tokens from the bucket (name, key) with the rate and burst of policy name';

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

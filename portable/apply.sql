-- portable/apply.sql: rl_apply, a bucket's decision stored, a token
-- bucket's or a sliding window's.  Included by ratelimit.sql and by the
-- upgrade script to 0.4.0 (update--0.3.0--0.4.0.sql), which drops 0.3.0's
-- first (it had no parameter sliding).

-- Decides (and, but for a check, stores) operation op on bucket (name, key),
-- a token bucket's or, when sliding, a sliding window's (rl_bucket_operate,
-- sliding.sql), a new one starting with initial tokens (NULL: full; a
-- window: empty) and no count of the window before, as the native
-- DecideBucket does.  A decision that writes nothing (a denial, a look) is
-- made on the bucket as committed, without a lock; one that writes locks
-- the row and, if the row changed meanwhile, decides again on what it holds
-- then; it writes in the caller's transaction.  A new key below full is
-- stored even when nothing was taken: its first sighting counts.  A write
-- stores previous, a sliding window's count of the window before: a
-- window's brought to the decision's clock (rl_sliding_refill), which a
-- call never changes otherwise; a token bucket's 0 (a name defined again as
-- a window finds none), as the native one does.
CREATE FUNCTION rl_apply(p_name text, p_key text, l rl_limit, r rl_request, op text,
                         amount float8 DEFAULT 0, initial float8 DEFAULT NULL,
                         sliding boolean DEFAULT false)
RETURNS rl_decision
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    writes boolean := op OPERATOR(pg_catalog.<>) 'check'::pg_catalog.text;
    below_full boolean := coalesce(initial OPERATOR(pg_catalog.<) l.burst, false);
    looked @extschema@.rl_bucket;
    looked_previous pg_catalog.float8;
    b @extschema@.rl_bucket;
    b_previous pg_catalog.float8;
    d @extschema@.rl_decision;
    now_us bigint;
    inserted integer;
BEGIN
    LOOP
        now_us := @extschema@.rl_now();
        SELECT t.tokens, t.stamp_us, t.blocked_until_us, t.previous
          INTO looked.tokens, looked.stamp_us, looked.blocked_until_us, looked_previous
          FROM @extschema@.rl_buckets AS t WHERE t.name OPERATOR(pg_catalog.=) p_name AND t.key OPERATOR(pg_catalog.=) p_key;
        IF NOT FOUND THEN
            looked := NULL;
            d := @extschema@.rl_bucket_operate(ROW(coalesce(initial, l.burst), now_us, @extschema@.rl_not_blocked())::@extschema@.rl_bucket,
                                               '0'::pg_catalog.float8, sliding, l, r, op, amount, now_us);
            IF NOT writes OR NOT (d.write OR below_full) THEN
                RETURN d;
            END IF;
        ELSE
            IF op OPERATOR(pg_catalog.=) 'record'::pg_catalog.text THEN
                RETURN d; -- the key is known already
            END IF;
            d := @extschema@.rl_bucket_operate(looked, looked_previous, sliding, l, r, op, amount, now_us);
            IF NOT writes OR NOT d.write THEN
                RETURN d;
            END IF;
        END IF;
        -- (A take that ends up writing nothing, because the row changed
        -- meanwhile and now denies, keeps the row locked until the
        -- caller's transaction ends; a sharded take releases it: see
        -- rl_sharded_call.)
        SELECT t.tokens, t.stamp_us, t.blocked_until_us, t.previous
          INTO b.tokens, b.stamp_us, b.blocked_until_us, b_previous
          FROM @extschema@.rl_buckets AS t WHERE t.name OPERATOR(pg_catalog.=) p_name AND t.key OPERATOR(pg_catalog.=) p_key FOR UPDATE;
        IF NOT FOUND THEN
            IF looked IS NOT NULL THEN
                CONTINUE; -- reset meanwhile: look again
            END IF;
            INSERT INTO @extschema@.rl_buckets AS t
                (name, key, tokens, stamp_us, full_at_us, blocked_until_us, previous)
            VALUES (p_name, p_key, (d.next).tokens, (d.next).stamp_us, @extschema@.rl_full_at(d, now_us),
                    (d.next).blocked_until_us, '0'::pg_catalog.float8)
            ON CONFLICT ON CONSTRAINT rl_buckets_pkey DO NOTHING;
            GET DIAGNOSTICS inserted = ROW_COUNT;
            IF inserted OPERATOR(pg_catalog.=) 1 THEN
                RETURN d;
            END IF;
            CONTINUE; -- inserted meanwhile: decide again on it
        END IF;
        IF op OPERATOR(pg_catalog.=) 'record'::pg_catalog.text THEN
            RETURN d; -- the key is known already
        END IF;
        -- What was decided on is what is locked: the decision stands, at the
        -- clock reading it was made at.  Otherwise decide again, now.
        IF looked IS NULL OR NOT (b OPERATOR(pg_catalog.=) looked AND b_previous OPERATOR(pg_catalog.=) looked_previous) THEN
            now_us := @extschema@.rl_now();
            d := @extschema@.rl_bucket_operate(b, b_previous, sliding, l, r, op, amount, now_us);
        END IF;
        IF d.write THEN
            UPDATE @extschema@.rl_buckets AS t
               SET (tokens, stamp_us, full_at_us, blocked_until_us, previous)
                   = ROW((d.next).tokens, (d.next).stamp_us, @extschema@.rl_full_at(d, now_us), (d.next).blocked_until_us,
                         CASE WHEN sliding
                              THEN (@extschema@.rl_sliding_refill(ROW(b.tokens, b.stamp_us, b_previous)::@extschema@.rl_window,
                                                                  l, now_us)).previous
                              ELSE '0'::pg_catalog.float8 END)
             WHERE t.name OPERATOR(pg_catalog.=) p_name AND t.key OPERATOR(pg_catalog.=) p_key;
        END IF;
        RETURN d;
    END LOOP;
END
$$;

-- portable/take_all.sql: several limits at once, by their policies
-- (rl_take_all, which rate_limit_take_all calls, and rl_take_buckets).
-- Included by policies.sql and by the upgrade script to 0.4.0
-- (update--0.3.0--0.4.0.sql).

-- Takes request[b] from bucket (name[b], key[b]) under limit[b], a new one
-- starting at initial[b] (NULL: full), for every b or for none (storage's
-- TakeAll); the buckets are distinct and in canonical order (bytewise by
-- name, then key).  A denial on the buckets as committed is final with
-- nothing locked; a grant is decided again once every bucket is locked in
-- that order, inside a subtransaction that a denial found then rolls back.
-- Denied, every bucket reports what it holds; a new key below full is
-- recorded and a denied limit with a penalty box starts it.  A bucket with
-- b_sliding[b] is a sliding window's (sliding.sql): its row's previous is
-- read and, when it is written, stored (b_sliding NULL: none is); a token
-- bucket's write stores 0 there, as the native one does.
CREATE FUNCTION rl_take_buckets(b_name text[], b_key text[], b_limit rl_limit[],
                                b_request rl_request[], b_initial float8[], b_sliding boolean[] DEFAULT NULL,
                                OUT all_allowed boolean, OUT b_decision rl_decision[])
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    buckets integer := pg_catalog.cardinality(b_name);
    b_state @extschema@.rl_bucket[] := '{}';
    b_previous float8[] := '{}';
    previous float8;
    b_exists boolean[] := '{}';
    b_inserted boolean[] := pg_catalog.array_fill(false, ARRAY[pg_catalog.cardinality(b_name)]);
    d @extschema@.rl_decision;
    s @extschema@.rl_bucket;
    now_us bigint;
    wait float8;
    inserted integer;
BEGIN
    b_sliding := coalesce(b_sliding, pg_catalog.array_fill(false, ARRAY[buckets]));
    all_allowed := true;
    b_decision := '{}';
    IF buckets = 1 THEN
        d := @extschema@.rl_apply(b_name[1], b_key[1], b_limit[1], b_request[1], 'take', 0::float8, b_initial[1],
                                  b_sliding[1]);
        b_decision[1] := d;
        all_allowed := d.allowed;
    ELSE
        -- Every bucket as committed, nothing locked.
        now_us := @extschema@.rl_now();
        FOR b IN 1..buckets LOOP
            SELECT t.tokens, t.stamp_us, t.blocked_until_us, t.previous INTO s.tokens, s.stamp_us, s.blocked_until_us, previous
              FROM @extschema@.rl_buckets AS t WHERE t.name = b_name[b] AND t.key = b_key[b];
            b_exists[b] := FOUND;
            IF NOT FOUND THEN
                s := ROW(coalesce(b_initial[b], b_limit[b].burst), now_us, @extschema@.rl_not_blocked())::@extschema@.rl_bucket;
                previous := 0;
            END IF;
            b_state[b] := s;
            b_previous[b] := previous;
            b_decision[b] := @extschema@.rl_bucket_operate(s, previous, b_sliding[b], b_limit[b], b_request[b],
                                                           'take', 0::float8, now_us);
            all_allowed := all_allowed AND b_decision[b].allowed;
        END LOOP;
        IF all_allowed THEN
            BEGIN
                FOR b IN 1..buckets LOOP
                    -- The row locked, or a new key's first row, locked by
                    -- being inserted; one inserted (or deleted) meanwhile:
                    -- look again.
                    LOOP
                        SELECT t.tokens, t.stamp_us, t.blocked_until_us, t.previous INTO s.tokens, s.stamp_us, s.blocked_until_us, previous
                          FROM @extschema@.rl_buckets AS t WHERE t.name = b_name[b] AND t.key = b_key[b] FOR UPDATE;
                        EXIT WHEN FOUND;
                        s := ROW(coalesce(b_initial[b], b_limit[b].burst), @extschema@.rl_now(), @extschema@.rl_not_blocked())::@extschema@.rl_bucket;
                        previous := 0;
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
                    b_previous[b] := previous;
                END LOOP;
                -- One clock reading once every wait is over.
                now_us := @extschema@.rl_now();
                FOR b IN 1..buckets LOOP
                    IF b_inserted[b] THEN
                        s := b_state[b];
                        s.stamp_us := now_us;
                        b_state[b] := s;
                    END IF;
                    b_decision[b] := @extschema@.rl_bucket_operate(b_state[b], b_previous[b], b_sliding[b], b_limit[b],
                                                                   b_request[b], 'take', 0::float8, now_us);
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
                               blocked_until_us = (d.next).blocked_until_us,
                               previous = CASE WHEN b_sliding[b]
                                               THEN (@extschema@.rl_sliding_refill(ROW(b_state[b].tokens, b_state[b].stamp_us, b_previous[b])::@extschema@.rl_window,
                                                                                   b_limit[b], now_us)).previous
                                               ELSE '0'::pg_catalog.float8 END
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
                    d := @extschema@.rl_bucket_operate(b_state[b], b_previous[b], b_sliding[b], b_limit[b],
                                                       ROW(0, false, false, 0, 'Infinity')::@extschema@.rl_request,
                                                       'take', 0::float8, now_us);
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

-- The buckets b_* but those left_out, all or none, in rounds
-- (TakeEnforced): the buckets taken in a round are all but the report-only
-- ones left out after their would-be denial.  A bucket left out from the
-- start (a concurrency limit's) has no decision.
CREATE FUNCTION rl_take_rounds(b_name text[], b_key text[], b_limit rl_limit[], b_request rl_request[],
                               b_initial float8[], b_sliding boolean[], b_enforce boolean[], left_out boolean[],
                               OUT all_allowed boolean, OUT b_decision rl_decision[])
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    buckets integer := pg_catalog.cardinality(b_name);
    taking_at integer[];
    a_decision @extschema@.rl_decision[];
BEGIN
    b_decision := pg_catalog.array_fill(NULL::@extschema@.rl_decision, ARRAY[buckets]);
    LOOP
        taking_at := ARRAY(SELECT b FROM pg_catalog.generate_series(1, buckets) AS b WHERE NOT left_out[b] ORDER BY b);
        all_allowed := true;
        IF pg_catalog.cardinality(taking_at) > 0 THEN
            SELECT t.all_allowed, t.b_decision INTO all_allowed, a_decision
              FROM @extschema@.rl_take_buckets(ARRAY(SELECT b_name[b] FROM pg_catalog.unnest(taking_at) WITH ORDINALITY AS u(b, o) ORDER BY o),
                                               ARRAY(SELECT b_key[b] FROM pg_catalog.unnest(taking_at) WITH ORDINALITY AS u(b, o) ORDER BY o),
                                               ARRAY(SELECT b_limit[b] FROM pg_catalog.unnest(taking_at) WITH ORDINALITY AS u(b, o) ORDER BY o),
                                               ARRAY(SELECT b_request[b] FROM pg_catalog.unnest(taking_at) WITH ORDINALITY AS u(b, o) ORDER BY o),
                                               ARRAY(SELECT b_initial[b] FROM pg_catalog.unnest(taking_at) WITH ORDINALITY AS u(b, o) ORDER BY o),
                                               ARRAY(SELECT b_sliding[b] FROM pg_catalog.unnest(taking_at) WITH ORDINALITY AS u(b, o) ORDER BY o)) AS t;
        END IF;
        FOR i IN 1..pg_catalog.cardinality(taking_at) LOOP
            b_decision[taking_at[i]] := a_decision[i];
        END LOOP;
        -- Refused by an enforced limit's denial, whatever the others say.
        EXIT WHEN all_allowed
                  OR NOT EXISTS (SELECT FROM pg_catalog.generate_series(1, pg_catalog.cardinality(taking_at)) AS i
                                  WHERE NOT a_decision[i].allowed AND NOT b_enforce[taking_at[i]])
                  OR EXISTS (SELECT FROM pg_catalog.generate_series(1, pg_catalog.cardinality(taking_at)) AS i
                              WHERE NOT a_decision[i].allowed AND b_enforce[taking_at[i]]);
        FOR i IN 1..pg_catalog.cardinality(taking_at) LOOP
            IF NOT a_decision[i].allowed THEN
                left_out[taking_at[i]] := true;
            END IF;
        END LOOP;
    END LOOP;
END
$$;
COMMENT ON FUNCTION rl_take_rounds(text[], text[], rl_limit[], rl_request[], float8[], boolean[], boolean[], boolean[]) IS
    'takes the buckets given but those left out, all or none, leaving out the report-only ones that would deny';

-- ReportMergedCostExceedsMaxCount: the costs rl_take_all adds up for one
-- sliding window exceed its max_count.
CREATE FUNCTION rl_report_merged_cost_exceeds_max_count(name text, key text, max_count float8)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'costs of one bucket exceed max_count'
        USING ERRCODE = 'invalid_parameter_value',
              DETAIL = pg_catalog.format(
                  'The costs given for bucket ("%s", "%s") add up to more than its max_count of %s, the most its sliding window admits in a window, so they could never be taken together.',
                  name, key, max_count),
              HINT = 'Name each bucket once, or lower the costs.';
END
$$;
COMMENT ON FUNCTION rl_report_merged_cost_exceeds_max_count(text, text, float8) IS
    'raises 22023: the costs given for one sliding window add up past its max_count';

-- Takes costs[i] (1 each when NULL) from (names[i], keys[i]) under policy
-- names[i] for every i, or from none (TakeAllLimits): the limits checked,
-- merged per bucket in canonical order, taken by rl_take_buckets, and the
-- answer with its binding limit.  With concurrency limits (TakeMixed): a
-- place none could give denies before any bucket is taken; otherwise the
-- buckets, then the places, in a subtransaction, rolled back when an
-- enforced place is denied (its takes undone, each bucket then answered as
-- a check), kept when a bucket denies (what a denial records is kept; the
-- places are answered as checks).
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
    b_enforce boolean[] := '{}';
    b_sliding boolean[] := '{}';         -- a sliding window's
    b_decision @extschema@.rl_decision[] := '{}';
    b_held integer[] := '{}';            -- max_held of a concurrency limit, else 0
    b_lease bigint[] := '{}';            -- a concurrency limit's lease, else NULL
    holds_places boolean := false;
    takes_tokens boolean := false;
    kept boolean := true;
    denied_hold integer;
    left_out boolean[];                  -- not taken in the first round
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
    -- Subscripts from 1, whatever the arrays' lower bounds.
    names := names[pg_catalog.array_lower(names, 1):pg_catalog.array_upper(names, 1)];
    keys := keys[pg_catalog.array_lower(keys, 1):pg_catalog.array_upper(keys, 1)];
    IF costs IS NOT NULL THEN
        costs := costs[pg_catalog.array_lower(costs, 1):pg_catalog.array_upper(costs, 1)];
    END IF;

    FOR i IN 1..count LOOP
        PERFORM @extschema@.rl_check_name_and_key(names[i], keys[i]);
        p := @extschema@.rl_policy_to_take(names[i], true);
        IF p.shards > 1 THEN
            PERFORM @extschema@.rl_report_sharded_take_all(names[i]);
        END IF;
        l := CASE WHEN p.kind = 'sliding' THEN @extschema@.rl_sliding_limit(p)
                  ELSE @extschema@.rl_policy_limit(p, names[i], keys[i]) END;
        r := @extschema@.rl_policy_request(p, coalesce(costs[i], 1), max_wait);
        IF p.kind = 'concurrency' THEN
            PERFORM @extschema@.rl_places(p, names[i], r.cost);
        ELSIF p.kind = 'sliding' THEN
            PERFORM @extschema@.rl_check_sliding_request(l, r);
        ELSE
            PERFORM @extschema@.rl_check_request(l, r, 'policy', l.rate);
        END IF;
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
            IF b_held[buckets] > 0 THEN
                PERFORM @extschema@.rl_places(given_policy[c], names[c], r.cost);
            ELSIF r.cost > b_limit[buckets].burst + cap THEN
                IF b_sliding[buckets] THEN
                    PERFORM @extschema@.rl_report_merged_cost_exceeds_max_count(names[c], keys[c], b_limit[buckets].burst);
                END IF;
                PERFORM @extschema@.rl_report_merged_cost_exceeds_burst(names[c], keys[c], b_limit[buckets].burst, cap);
            END IF;
        ELSE
            buckets := buckets + 1;
            b_name[buckets] := names[c];
            b_key[buckets] := keys[c];
            b_limit[buckets] := given_limit[c];
            b_request[buckets] := given_request[c];
            b_initial[buckets] := given_policy[c].initial;
            b_enforce[buckets] := given_policy[c].enforce;
            b_sliding[buckets] := given_policy[c].kind = 'sliding';
            b_held[buckets] := CASE WHEN given_policy[c].kind = 'concurrency'
                                    THEN given_policy[c].burst::integer ELSE 0 END;
            b_lease[buckets] := given_policy[c].lease_us;
            holds_places := holds_places OR b_held[buckets] > 0;
            takes_tokens := takes_tokens OR b_held[buckets] = 0;
        END IF;
        bucket_of[c] := buckets;
    END LOOP;
    FOR b IN 1..buckets LOOP
        IF b_sliding[b] THEN
            PERFORM @extschema@.rl_check_sliding_request(b_limit[b], b_request[b]);
        ELSIF b_held[b] = 0 THEN
            PERFORM @extschema@.rl_check_request(b_limit[b], b_request[b], 'policy', b_limit[b].rate);
        END IF;
    END LOOP;
    IF 0 OPERATOR(pg_catalog.<) ANY (b_lease) AND pg_catalog.pg_is_in_recovery() THEN
        PERFORM @extschema@.rl_report_lease_recovery('rate_limit_take_all');
    END IF;
    IF holds_places THEN
        PERFORM @extschema@.rl_require_holds('rate_limit_take_all');
    END IF;
    IF takes_tokens THEN
        PERFORM @extschema@.rl_require_writable('rate_limit_take_all');
    END IF;
    IF 0 OPERATOR(pg_catalog.<) ANY (b_lease) THEN
        PERFORM @extschema@.rl_require_lease_write('rate_limit_take_all', false);
    END IF;

    -- Every bucket or none; a report-only limit that denies refuses nothing:
    -- the others are taken without it, or refused by their own denial.
    -- Places are taken after the buckets, in a subtransaction that the
    -- first enforced place denied rolls back, once each was seen free.
    SELECT pg_catalog.array_agg(b_held[b] > 0 ORDER BY b) INTO left_out
      FROM pg_catalog.generate_series(1, buckets) AS b;
    IF NOT holds_places THEN
        SELECT t.all_allowed, t.b_decision INTO all_allowed, b_decision
          FROM @extschema@.rl_take_rounds(b_name, b_key, b_limit, b_request, b_initial, b_sliding, b_enforce, left_out) AS t;
    ELSE
        -- A place none could give denies at once, before any bucket is
        -- taken: a bucket's row may be locked by the very transaction that
        -- holds the place, for as long as it holds it.
        FOR b IN 1..buckets LOOP
            CONTINUE WHEN b_held[b] = 0;
            b_decision[b] := @extschema@.rl_places_decision(b_name[b], b_key[b], b_held[b], b_request[b].cost::integer,
                                                             b_lease[b], false);
            IF NOT b_decision[b].allowed AND b_enforce[b] THEN
                denied_hold := b;
                kept := false;
                EXIT;
            END IF;
        END LOOP;
        IF kept THEN
            BEGIN
                SELECT t.all_allowed, t.b_decision INTO all_allowed, b_decision
                  FROM @extschema@.rl_take_rounds(b_name, b_key, b_limit, b_request, b_initial, b_sliding, b_enforce, left_out) AS t;
                IF all_allowed THEN
                    FOR b IN 1..buckets LOOP
                        CONTINUE WHEN b_held[b] = 0;
                        b_decision[b] := @extschema@.rl_places_decision(b_name[b], b_key[b], b_held[b], b_request[b].cost::integer,
                                                             b_lease[b], true);
                        IF NOT b_decision[b].allowed AND b_enforce[b] THEN
                            denied_hold := b;
                            RAISE SQLSTATE 'RLHA0';
                        END IF;
                    END LOOP;
                END IF;
            EXCEPTION WHEN SQLSTATE 'RLHA0' THEN
                kept := false;
            END;
        END IF;
        IF NOT (kept AND all_allowed) THEN
            -- Denied: each limit but the place that denied answers as it
            -- stands, nothing taken.
            FOR b IN 1..buckets LOOP
                IF b_held[b] > 0 AND b IS DISTINCT FROM denied_hold THEN
                    b_decision[b] := @extschema@.rl_places_decision(b_name[b], b_key[b], b_held[b], b_request[b].cost::integer,
                                                             b_lease[b], false);
                ELSIF b_held[b] = 0 AND NOT kept THEN
                    b_decision[b] := @extschema@.rl_apply(b_name[b], b_key[b], b_limit[b], b_request[b],
                                                          'check'::text, 0::float8, b_initial[b], b_sliding[b]);
                END IF;
            END LOOP;
            all_allowed := false;
        END IF;
    END IF;

    -- The binding limit: denied, the one to wait longest for (a wait
    -- nobody knows, NULL: a place held until a transaction ends, is the
    -- longest); granted, the one left with the smallest share of its burst;
    -- ties: the first given.
    FOR i IN 2..count LOOP
        d := b_decision[bucket_of[i]];
        better := CASE WHEN all_allowed
                       THEN d.remaining / b_limit[bucket_of[i]].burst
                            < b_decision[bucket_of[binding]].remaining / b_limit[bucket_of[binding]].burst
                       ELSE NOT d.allowed AND (b_decision[bucket_of[binding]].allowed
                                               OR (b_decision[bucket_of[binding]].retry_after IS NOT NULL
                                                   AND (d.retry_after IS NULL
                                                        OR d.retry_after > b_decision[bucket_of[binding]].retry_after))) END;
        IF better THEN
            binding := i;
        END IF;
    END LOOP;
    FOR i IN 1..count LOOP
        d := b_decision[bucket_of[i]];
        remaining := remaining || d.remaining;
        decisions := decisions || @extschema@.rl_policy_answer(d, given_policy[i], names[i]);
        -- Granted, a report-only limit's would-be denial sets no wait.
        IF d.retry_after > longest AND (d.allowed OR NOT all_allowed) THEN
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

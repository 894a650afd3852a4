-- portable/shards.sql
--
-- Keys a policy splits over several rows ("shards"), as src/core/shards.cpp
-- and src/pg/sharding.cpp keep them: shard n of key is the row key, U+001F,
-- n in decimal; each holds and refills a 1/shards share of the limit.
-- Included by ratelimit.sql, after policies.sql.

-- The row key of shard n of key (ShardKey).
CREATE FUNCTION rl_shard_key(p_key text, n integer) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT (p_key OPERATOR(pg_catalog.||) pg_catalog.chr(31)) OPERATOR(pg_catalog.||) n::pg_catalog.text $$;

-- One shard's share of a limit split over shards buckets (ShareOfShard).
CREATE FUNCTION rl_share_of_shard(l rl_limit, shards integer) RETURNS rl_limit
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT ROW(l.rate OPERATOR(pg_catalog./) shards::pg_catalog.float8, l.burst OPERATOR(pg_catalog./) shards::pg_catalog.float8,
                 l.window_us, l.phase_us, l.floor_rate OPERATOR(pg_catalog./) shards::pg_catalog.float8,
                 l.penalty_us)::@extschema@.rl_limit $$;

-- The limit row row_key of name has under policy p as it is defined now,
-- with the key and shard it stands for (PolicyRowLimit): a key's own row
-- (shard NULL), or shard n of a key; no limit for a row the policy does not
-- read (a shard number it no longer has, or a plain key of a split one).
CREATE FUNCTION rl_policy_row(p rl_policies, p_name text, row_key text,
                              OUT row_limit rl_limit, OUT key text, OUT shard integer)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    parts pg_catalog.text[];
BEGIN
    key := row_key;
    shard := NULL;
    IF p.shards OPERATOR(pg_catalog.=) 1 THEN
        row_limit := @extschema@.rl_policy_limit(p, p_name, row_key);
        RETURN;
    END IF;
    -- One or two digits after the last U+001F, no leading zero: what "%d"
    -- writes below 64.
    parts := pg_catalog.regexp_match(row_key, '^(.*)\x1f([1-9]?[0-9])$'::pg_catalog.text);
    IF parts IS NULL OR parts[2]::integer OPERATOR(pg_catalog.>=) p.shards THEN
        row_limit := NULL;
        RETURN;
    END IF;
    key := parts[1];
    shard := parts[2]::integer;
    row_limit := @extschema@.rl_share_of_shard(@extschema@.rl_policy_limit(p, p_name, key), p.shards);
END
$$;

-- Shard n of key as it stands, refilled to now, without waiting for a
-- writer (PeekShard): a check of nothing on its row; a shard never seen
-- starts at its share of initial.
CREATE FUNCTION rl_peek_shard(p_name text, p_key text, n integer, share rl_limit,
                              initial float8) RETURNS rl_bucket
LANGUAGE sql VOLATILE
AS $$ SELECT (@extschema@.rl_apply(p_name, @extschema@.rl_shard_key(p_key, n), share, @extschema@.rl_no_request(), 'check'::pg_catalog.text,
                        '0'::pg_catalog.float8, initial)).next $$;
-- How a cost is spread over balances tokens (Spread): 'one' from the
-- richest, 'several' from the richest ones in turn, or 'deny'; take: what
-- from each; richest: the richest (first of equals), 1-based.
CREATE FUNCTION rl_spread(tokens float8[], share rl_limit, cost float8,
                          OUT kind text, OUT take float8[], OUT richest integer)
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    n integer := pg_catalog.cardinality(tokens);
    ord integer[] := '{}';
    j integer;
    swap integer;
    left_over pg_catalog.float8;
    piece pg_catalog.float8;
    s integer;
BEGIN
    take := pg_catalog.array_fill('0'::pg_catalog.float8, ARRAY[n]);
    FOR i IN 1..n LOOP
        ord[i] := i;
        j := i;
        WHILE j OPERATOR(pg_catalog.>) 1 AND tokens[ord[j]] OPERATOR(pg_catalog.>) tokens[ord[j OPERATOR(pg_catalog.-) 1]] LOOP
            swap := ord[j]; ord[j] := ord[j OPERATOR(pg_catalog.-) 1]; ord[j OPERATOR(pg_catalog.-) 1] := swap;
            j := j OPERATOR(pg_catalog.-) 1;
        END LOOP;
    END LOOP;
    richest := ord[1];
    IF @extschema@.rl_admits(tokens[ord[1]], share, ROW(cost, false, false, 0, 'Infinity')::@extschema@.rl_request) THEN
        take[ord[1]] := cost;
        kind := 'one';
        RETURN;
    END IF;
    left_over := cost;
    FOR i IN 1..n LOOP
        EXIT WHEN NOT (left_over OPERATOR(pg_catalog.>) '0'::pg_catalog.float8);
        s := ord[i];
        piece := CASE WHEN left_over OPERATOR(pg_catalog.<) tokens[s] THEN left_over ELSE tokens[s] END;
        EXIT WHEN NOT (piece OPERATOR(pg_catalog.>) '0'::pg_catalog.float8)
                  OR NOT @extschema@.rl_admits(tokens[s], share, ROW(piece, false, false, 0, 'Infinity')::@extschema@.rl_request);
        take[s] := piece;
        left_over := left_over OPERATOR(pg_catalog.-) piece;
    END LOOP;
    IF left_over OPERATOR(pg_catalog.>) '0'::pg_catalog.float8 THEN
        take := pg_catalog.array_fill('0'::pg_catalog.float8, ARRAY[n]);
        kind := 'deny';
    ELSE
        kind := 'several';
    END IF;
END
$$;

-- The plan for request r on shard states at at_us (PlanAt): a spread of
-- the refilled balances, or failing that, when r may reserve and the
-- richest admits it, the whole cost reserved on the richest ('reserve').
CREATE FUNCTION rl_plan_at(states rl_bucket[], share rl_limit, r rl_request, at_us bigint,
                           OUT kind text, OUT take float8[], OUT richest integer)
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    tokens pg_catalog.float8[] := '{}';
    cur @extschema@.rl_bucket;
BEGIN
    FOR s IN 1..pg_catalog.cardinality(states) LOOP
        tokens[s] := (@extschema@.rl_refill(states[s], share, at_us)).tokens;
    END LOOP;
    SELECT sp.kind, sp.take, sp.richest INTO kind, take, richest FROM @extschema@.rl_spread(tokens, share, r.cost) AS sp;
    IF kind OPERATOR(pg_catalog.<>) 'deny'::pg_catalog.text OR NOT r.reserve THEN
        RETURN;
    END IF;
    -- core::Admitted: the refilled richest admits the request lagging its stamp.
    cur := @extschema@.rl_refill(states[richest], share, at_us);
    IF @extschema@.rl_admits(cur.tokens, share, @extschema@.rl_lagging(r, @extschema@.rl_lag_micros(cur, at_us))) THEN
        take[richest] := r.cost;
        kind := 'reserve';
    END IF;
END
$$;

-- The plan for request r on shard states seen at now_us (PlanShards), with
-- each shard's state once it is carried out and a reservation's wait.
CREATE FUNCTION rl_plan_shards(seen rl_bucket[], share rl_limit, r rl_request, now_us bigint,
                               OUT kind text, OUT take float8[], OUT richest integer,
                               OUT after rl_bucket[], OUT wait float8)
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    d @extschema@.rl_decision;
BEGIN
    SELECT p.kind, p.take, p.richest INTO kind, take, richest FROM @extschema@.rl_plan_at(seen, share, r, now_us) AS p;
    after := '{}';
    wait := 0;
    FOR s IN 1..pg_catalog.cardinality(seen) LOOP
        IF kind = 'reserve' AND s = richest THEN
            d := @extschema@.rl_decide(seen[s], share, r, now_us);
            wait := d.retry_after;
        ELSE
            d := @extschema@.rl_decide(seen[s], share, ROW(take[s], false, false, 0, 'Infinity')::@extschema@.rl_request, now_us);
        END IF;
        after[s] := d.next;
    END LOOP;
END
$$;

-- Whole microseconds until states hold all they ever will (MicrosToSettle,
-- the largest over them) or catch up with their stamps.
CREATE FUNCTION rl_settle_micros(states rl_bucket[], share rl_limit, now_us bigint) RETURNS float8
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    settle float8 := 0;
    settled float8;
    micros float8;
    lag float8;
BEGIN
    FOR s IN 1..pg_catalog.cardinality(states) LOOP
        settled := (@extschema@.rl_refill(states[s], share, 9223372036854775807)).tokens;
        micros := CASE WHEN settled > (@extschema@.rl_refill(states[s], share, now_us)).tokens
                       THEN (@extschema@.rl_decide(states[s], share, ROW(settled, false, false, 0, 'Infinity')::@extschema@.rl_request,
                                       now_us)).retry_after * '1000000'::float8
                       ELSE 0 END;
        lag := states[s].stamp_us::float8 - now_us::float8;
        IF micros > settle THEN settle := micros; END IF;
        IF lag > settle THEN settle := lag; END IF;
    END LOOP;
    RETURN pg_catalog.ceil(settle);
END
$$;

-- Whether condition what holds of states at at_us: 'grants' (a plan for
-- r serves it) or 'holds' (together they hold at least target).
CREATE FUNCTION rl_shards_hold(what text, states rl_bucket[], share rl_limit, r rl_request,
                               target float8, at_us bigint) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    held pg_catalog.float8 := 0;
BEGIN
    IF what OPERATOR(pg_catalog.=) 'grants'::pg_catalog.text THEN
        RETURN (SELECT p.kind OPERATOR(pg_catalog.<>) 'deny'::pg_catalog.text FROM @extschema@.rl_plan_at(states, share, r, at_us) AS p);
    END IF;
    FOR s IN 1..pg_catalog.cardinality(states) LOOP
        held := held OPERATOR(pg_catalog.+) (@extschema@.rl_refill(states[s], share, at_us)).tokens;
    END LOOP;
    RETURN held OPERATOR(pg_catalog.>=) target;
END
$$;

-- The smallest whole-µs wait after which the condition holds (FirstMicros):
-- -1 if it never does, -2 if only beyond the last int64 microsecond.
CREATE FUNCTION rl_first_micros(what text, states rl_bucket[], share rl_limit, r rl_request,
                                target float8, now_us bigint) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    room bigint := 9223372036854775807 - greatest(now_us, 0);
    settle float8;
    beyond boolean;
    lo bigint := 0;
    hi bigint;
    mid bigint;
BEGIN
    IF @extschema@.rl_shards_hold(what, states, share, r, target, now_us) THEN
        RETURN 0;
    END IF;
    settle := @extschema@.rl_settle_micros(states, share, now_us);
    beyond := NOT (settle < room::float8);
    hi := CASE WHEN beyond THEN room ELSE settle::bigint END;
    IF hi < 1 THEN hi := 1; END IF;
    IF NOT @extschema@.rl_shards_hold(what, states, share, r, target, now_us + hi) THEN
        RETURN CASE WHEN beyond THEN -2 ELSE -1 END;
    END IF;
    WHILE hi - lo > 1 LOOP
        mid := lo + (hi - lo) / 2;
        IF @extschema@.rl_shards_hold(what, states, share, r, target, now_us + mid) THEN
            hi := mid;
        ELSE
            lo := mid;
        END IF;
    END LOOP;
    RETURN hi;
END
$$;

-- The answer to a sharded call of r that looked at states, standing there
-- once it is done (ShardOutcome).
CREATE FUNCTION rl_shard_outcome(allowed boolean, states rl_bucket[], share rl_limit,
                                 r rl_request, now_us bigint) RETURNS rl_decision
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    result @extschema@.rl_decision;
    look @extschema@.rl_decision;
    n integer := pg_catalog.cardinality(states);
    full_burst float8 := 0;
    target float8;
    wait bigint;
BEGIN
    result.allowed := allowed;
    result.remaining := 0;
    result.reset_after := 0;
    result.retry_after := 0;
    result.refill_after := 0;
    FOR s IN 1..n LOOP
        look := @extschema@.rl_decide(states[s], share, @extschema@.rl_no_request(), now_us);
        result.remaining := result.remaining + look.remaining;
        IF look.reset_after > result.reset_after THEN
            result.reset_after := look.reset_after;
        END IF;
        full_burst := full_burst + share.burst;
    END LOOP;
    IF NOT allowed THEN
        wait := @extschema@.rl_first_micros('grants', states, share, r, 0::float8, now_us);
        result.retry_after := CASE
            WHEN wait >= 0 THEN wait::float8 / '1000000'::float8
            WHEN wait = -2 AND share.rate > 0 AND (r.cost <= n * share.burst OR r.reserve)
                THEN '1.7976931348623157e308'::float8 / '1000000'::float8
            ELSE 'Infinity'::float8 END;
    END IF;
    target := @extschema@.rl_next_whole_token(result.remaining, full_burst);
    IF result.remaining < target THEN
        wait := @extschema@.rl_first_micros('holds', states, share, r, target, now_us);
        result.refill_after := CASE WHEN wait >= 0 THEN wait::float8 / '1000000'::float8
                                    WHEN wait = -2 THEN '1.7976931348623157e308'::float8 / '1000000'::float8
                                    ELSE 'Infinity'::float8 END;
    END IF;
    RETURN result;
END
$$;

-- Take (op 'take') or check ('check') request r on key, which policy p
-- splits over its shards, or refund amount to it ('refund')
-- (ShardedDecision, ShardedRefund): the richer of two shards picked at
-- random serves the call alone if it can; otherwise the whole key decides,
-- from its richest shards, all or nothing.
CREATE FUNCTION rl_sharded_call(p_name text, p_key text, p rl_policies, l rl_limit,
                                r rl_request, op text, amount float8) RETURNS rl_decision
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    shards integer := p.shards;
    share @extschema@.rl_limit := @extschema@.rl_share_of_shard(l, p.shards);
    initial float8 := p.initial / p.shards;
    shard_request @extschema@.rl_request;
    cost float8;
    numbers integer[];
    pair @extschema@.rl_bucket[];
    plan record;
    d @extschema@.rl_decision;
    answer @extschema@.rl_decision;
    every_shard @extschema@.rl_bucket[];
    canonical integer[];
    allowed boolean := false;
    wait float8 := 0;
    left_over float8;
    result @extschema@.rl_decision;
    t_keys text[];
    t_names text[];
    t_limits @extschema@.rl_limit[];
    t_requests @extschema@.rl_request[];
    t_initials float8[];
    t_numbers integer[];
    taken record;
    n integer;
BEGIN
    -- Shard numbers in canonical order: bytewise by their decimal forms.
    SELECT pg_catalog.array_agg(g.number ORDER BY g.number::text COLLATE pg_catalog."C") INTO canonical
      FROM pg_catalog.generate_series(0, shards - 1) AS g(number);
    IF op = 'refund' THEN
        result.allowed := true;
        result.remaining := 0;
        result.reset_after := 0;
        result.retry_after := 0;
        result.refill_after := 0;
        left_over := amount;
        FOREACH n IN ARRAY canonical LOOP
            IF left_over > 0 THEN
                d := @extschema@.rl_apply(p_name, @extschema@.rl_shard_key(p_key, n), share, NULL::@extschema@.rl_request, 'refund', left_over, initial);
                left_over := left_over - d.refunded;
            ELSE
                d := @extschema@.rl_apply(p_name, @extschema@.rl_shard_key(p_key, n), share, @extschema@.rl_no_request(), 'check', 0::float8,
                              initial);
            END IF;
            result.remaining := result.remaining + d.remaining;
            IF d.reset_after > result.reset_after THEN
                result.reset_after := d.reset_after;
            END IF;
        END LOOP;
        RETURN result;
    END IF;

    cost := r.cost;
    shard_request := r;
    shard_request.max_reserved := r.max_reserved / shards;
    IF cost > 2 * share.burst
       AND NOT (r.reserve AND cost <= share.burst + @extschema@.rl_debt_cap(share, shard_request)) THEN
        PERFORM @extschema@.rl_report_sharded_cost(cost, 2 * share.burst, shards, r.reserve);
    END IF;

    -- Two shards at random, as they stand.
    numbers[1] := pg_catalog.floor(pg_catalog.random() * shards)::integer;
    numbers[2] := (numbers[1] + 1 + pg_catalog.floor(pg_catalog.random() * (shards - 1))::integer) % shards;
    FOR i IN 1..2 LOOP
        pair[i] := @extschema@.rl_peek_shard(p_name, p_key, numbers[i], share, initial);
    END LOOP;
    SELECT * INTO plan FROM @extschema@.rl_plan_shards(pair, share, ROW(cost, false, false, 0, 'Infinity')::@extschema@.rl_request, @extschema@.rl_now());
    IF plan.kind = 'one' THEN
        IF op = 'check' THEN
            allowed := true;
            pair[plan.richest] := plan.after[plan.richest];
        ELSE
            -- In a subtransaction: a shard that denies once locked (others
            -- took from it meanwhile) is released before the whole key is
            -- locked in canonical order, or two sharded takes could
            -- deadlock over two shards.
            BEGIN
                d := @extschema@.rl_apply(p_name, @extschema@.rl_shard_key(p_key, numbers[plan.richest]), share,
                              ROW(cost, false, false, 0, 'Infinity')::@extschema@.rl_request, 'take', 0::float8, initial);
                IF NOT d.allowed AND NOT d.write THEN
                    RAISE SQLSTATE 'RLNW0';
                END IF;
            EXCEPTION WHEN SQLSTATE 'RLNW0' THEN
                NULL; -- denied, nothing written: the lock goes with the subtransaction
            END;
            allowed := d.allowed;
            pair[plan.richest] := d.next;
        END IF;
    END IF;

    IF allowed THEN
        -- The two tell enough unless they hold less than the call.
        answer := @extschema@.rl_shard_outcome(true, pair, share, ROW(cost, false, false, 0, 'Infinity')::@extschema@.rl_request, @extschema@.rl_now());
        IF answer.remaining >= cost AND answer.remaining >= 1 THEN
            RETURN answer;
        END IF;
        FOR s IN 0..shards - 1 LOOP
            every_shard[s + 1] := CASE WHEN s = numbers[1] THEN pair[1]
                                       WHEN s = numbers[2] THEN pair[2]
                                       ELSE @extschema@.rl_peek_shard(p_name, p_key, s, share, initial) END;
        END LOOP;
    ELSE
        -- The whole key decides (DecideOverEveryShard), planning again when
        -- others took what it counted on before it could lock the rows.
        FOR attempt IN 1..4 LOOP
            FOR s IN 0..shards - 1 LOOP
                every_shard[s + 1] := @extschema@.rl_peek_shard(p_name, p_key, s, share, initial);
            END LOOP;
            SELECT * INTO plan FROM @extschema@.rl_plan_shards(every_shard, share, shard_request, @extschema@.rl_now());
            EXIT WHEN plan.kind = 'deny';
            IF op = 'check' THEN
                every_shard := plan.after;
                wait := plan.wait;
                allowed := true;
                EXIT;
            END IF;
            -- TakeFromShards: each shard the plan draws on, in canonical order.
            t_names := '{}'; t_keys := '{}'; t_limits := '{}'; t_requests := '{}';
            t_initials := '{}'; t_numbers := '{}';
            FOREACH n IN ARRAY canonical LOOP
                CONTINUE WHEN NOT (plan.take[n + 1] > 0);
                t_names := t_names || p_name;
                t_keys := t_keys || @extschema@.rl_shard_key(p_key, n);
                t_limits := t_limits || share;
                t_requests := t_requests || CASE WHEN plan.kind = 'reserve' THEN shard_request
                                                 ELSE ROW(plan.take[n + 1], false, false, 0, 'Infinity')::@extschema@.rl_request END;
                t_initials := t_initials || initial;
                t_numbers := t_numbers || n;
            END LOOP;
            SELECT * INTO taken FROM @extschema@.rl_take_buckets(t_names, t_keys, t_limits, t_requests, t_initials);
            FOR t IN 1..pg_catalog.cardinality(t_numbers) LOOP
                every_shard[t_numbers[t] + 1] := (taken.b_decision[t]).next;
                IF taken.all_allowed AND plan.kind = 'reserve' THEN
                    wait := (taken.b_decision[t]).retry_after;
                END IF;
            END LOOP;
            IF taken.all_allowed THEN
                allowed := true;
                EXIT;
            END IF;
        END LOOP;
    END IF;

    -- Denied shards never seen before still start earning now, recorded in
    -- canonical order.
    IF NOT allowed AND op = 'take' AND initial < share.burst THEN
        FOREACH n IN ARRAY canonical LOOP
            PERFORM @extschema@.rl_apply(p_name, @extschema@.rl_shard_key(p_key, n), share, @extschema@.rl_no_request(), 'record', 0::float8, initial);
        END LOOP;
    END IF;
    result := @extschema@.rl_shard_outcome(allowed, every_shard, share, shard_request, @extschema@.rl_now());
    IF allowed THEN
        result.retry_after := wait;
    END IF;
    RETURN result;
END
$$;

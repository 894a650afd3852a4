-- bench/plpgsql_bucket.sql
--
-- The token bucket a backend engineer writes by hand, for comparison: one
-- UPDATE ... RETURNING that refills and takes when there is enough, and an
-- INSERT for a key seen for the first time.  Same table settings as the
-- extension's own (unlogged, COLLATE "C", fillfactor 30), so the comparison
-- is about the code path, not the storage.
CREATE UNLOGGED TABLE plpgsql_buckets (
    name        text COLLATE "C" NOT NULL,
    key         text COLLATE "C" NOT NULL,
    tokens      float8 NOT NULL,
    last_refill timestamptz NOT NULL,
    PRIMARY KEY (name, key)
) WITH (fillfactor = 30);

CREATE FUNCTION plpgsql_take(p_name text, p_key text, p_cost float8, p_rate float8, p_burst float8)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_now    timestamptz := clock_timestamp();
    v_tokens float8;
BEGIN
    UPDATE plpgsql_buckets AS b
       SET tokens = least(p_burst, b.tokens + p_rate * extract(epoch FROM v_now - b.last_refill)) - p_cost,
           last_refill = v_now
     WHERE b.name = p_name AND b.key = p_key
       AND least(p_burst, b.tokens + p_rate * extract(epoch FROM v_now - b.last_refill)) >= p_cost
    RETURNING b.tokens INTO v_tokens;
    IF FOUND THEN
        RETURN true;
    END IF;
    -- Denied, or a key seen for the first time.
    INSERT INTO plpgsql_buckets (name, key, tokens, last_refill)
    VALUES (p_name, p_key, p_burst - p_cost, v_now)
    ON CONFLICT (name, key) DO NOTHING;
    RETURN FOUND;
END
$$;

-- portable/policies.sql
--
-- Named policies in the portable limiter: the table rate_limit_define()
-- writes, the calls that give only a name, a key and a cost, several limits
-- at once, the HTTP header values and the maintenance of the buckets.
-- Included by ratelimit.sql, after core.sql, errors.sql and the calls with
-- explicit parameters; runs in the schema the limiter is installed into,
-- naming its own objects as ratelimit.sql says.
-- Policy checks and messages are the native extension's, word for word: the
-- shared regression suite runs against both.

-- The policy table, as the native ratelimit.policies: column for column and
-- constraint for constraint.
\ir ../sql/src/policies_table.sql
-- Policies are configuration: pg_dump keeps them, also when the limiter is
-- installed as an extension (the line is the extension script's only).
--extension: SELECT pg_catalog.pg_extension_config_dump('rl_policies', '');
COMMENT ON TABLE rl_policies IS
    'named rate limit policies of the portable limiter, written by rate_limit_define()';

-- One row, updated before every statement that writes rl_policies (as
-- rate_limit_define and rate_limit_drop do), in its transaction, by the
-- trigger rl_policies_change (so that they queue on it, and never wait for
-- each other's policies in turn): the version of it that a snapshot sees
-- has been replaced by a committed transaction (its xmax) exactly when a
-- policy was defined, redefined or dropped since the snapshot was taken
-- (rl_policies_changed).  Nothing else writes or locks it.  Not dumped with
-- the extension: its install writes the row.
CREATE TABLE rl_policy_changes (
    one     boolean NOT NULL DEFAULT true,
    changes bigint NOT NULL DEFAULT '0'::bigint,
    CONSTRAINT rl_policy_changes_pkey PRIMARY KEY (one),
    CONSTRAINT rl_policy_changes_one_check CHECK (one)
);
INSERT INTO rl_policy_changes (one, changes) VALUES (true, '0'::bigint);
REVOKE ALL ON TABLE rl_policy_changes FROM PUBLIC;
COMMENT ON TABLE rl_policy_changes IS
    'one row, rewritten by every rate_limit_define() and rate_limit_drop(): changes counts them';
\ir policy_changes.sql

\ir memory_engine.sql
\ir concurrency.sql
\ir sliding.sql

-- rate_limit_define, rate_limit_drop and the view rate_limit_policies, as
-- the native extension has them.
\ir ../sql/src/policy_options.sql
\ir ../sql/src/define.sql
\ir ../sql/src/define_concurrency.sql
\ir ../sql/src/define_sliding.sql
\ir ../sql/src/policies_view.sql

\ir policy_lookup.sql

-- The policy called name; 42704 if there is none.
CREATE FUNCTION rl_policy(p_name text) RETURNS rl_policies
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    p @extschema@.rl_policies := @extschema@.rl_find_policy(p_name);
BEGIN
    IF p.name IS NULL THEN
        PERFORM @extschema@.rl_report_undefined_policy(p_name, true);
    END IF;
    RETURN p;
END
$$;

-- The native BucketHash(name, key, seed), as an unsigned number: the
-- 64-bit hash of the key's bytes seeded with that of the name's.
CREATE FUNCTION rl_bucket_hash(p_name text, p_key text, seed bigint) RETURNS numeric
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT h::numeric OPERATOR(pg_catalog.+) CASE WHEN h OPERATOR(pg_catalog.<) '0'::bigint THEN '18446744073709551616'::numeric
                                ELSE '0'::numeric END
        FROM (SELECT pg_catalog.hashtextextended(p_key COLLATE pg_catalog."C",
                     pg_catalog.hashtextextended(p_name COLLATE pg_catalog."C", seed)) AS h) AS s $$;

-- A policy call's request (PolicyRequest): reserving within max_wait
-- seconds, owing at most the policy's max_reserved.
CREATE FUNCTION rl_policy_request(p rl_policies, cost float8, max_wait float8) RETURNS rl_request
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT ROW(cost, max_wait OPERATOR(pg_catalog.>) '0'::pg_catalog.float8, true, p.max_reserved,
                 CASE WHEN max_wait OPERATOR(pg_catalog.>) '0'::pg_catalog.float8 THEN max_wait
                      ELSE 'Infinity'::pg_catalog.float8 END)::@extschema@.rl_request $$;

-- retry_after stretched by the key's share of the policy's jitter
-- (core::Jittered, with the hash of BucketHash's jitter seed).
CREATE FUNCTION rl_jittered(retry_after float8, fraction float8, p_name text, p_key text)
RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    share pg_catalog.float8;
    stretched pg_catalog.float8;
BEGIN
    IF NOT (retry_after OPERATOR(pg_catalog.>) '0'::pg_catalog.float8) OR retry_after OPERATOR(pg_catalog.=) 'Infinity'::pg_catalog.float8
       OR NOT (fraction OPERATOR(pg_catalog.>) '0'::pg_catalog.float8) THEN
        RETURN retry_after;
    END IF;
    share := pg_catalog.floor(@extschema@.rl_bucket_hash(p_name, p_key, '117001157895538'::bigint) OPERATOR(pg_catalog./) '2048'::numeric)::pg_catalog.float8
             OPERATOR(pg_catalog.*) ('1'::pg_catalog.float8 OPERATOR(pg_catalog./) '9007199254740992'::pg_catalog.float8);
    stretched := pg_catalog.ceil((retry_after OPERATOR(pg_catalog.*) ('1'::pg_catalog.float8 OPERATOR(pg_catalog.+) (fraction OPERATOR(pg_catalog.*) share)))
                                 OPERATOR(pg_catalog.*) '1000000'::pg_catalog.float8)
                 OPERATOR(pg_catalog./) '1000000'::pg_catalog.float8;
    RETURN CASE WHEN stretched OPERATOR(pg_catalog.<) retry_after THEN retry_after ELSE stretched END;
END
$$;

-- A decision row of policy p.
CREATE FUNCTION rl_policy_answer(d rl_decision, p rl_policies, p_name text)
RETURNS rate_limit_decision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT ROW(d.allowed, d.remaining, d.retry_after, d.reset_after, p.burst, p_name, p.rate,
                 p.per, d.refill_after)::@extschema@.rate_limit_decision $$;

\ir policy_decide.sql
\ir policy_take.sql

CREATE FUNCTION rate_limit_check(name text, key text, cost float8, max_wait interval)
RETURNS rate_limit_decision
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.num_nulls($1, $2, $3) > 0 THEN
        PERFORM @extschema@.rl_null_argument('rate_limit_check', ARRAY['name', 'key', 'cost'],
                                 ARRAY[$1, $2, $3::text], 'Only max_wait may be NULL, meaning no reservation.');
    END IF;
    RETURN @extschema@.rl_policy_call('rate_limit_check', $1, $2, $3, @extschema@.rl_max_wait($4), 'check');
END
$$;
COMMENT ON FUNCTION rate_limit_check(text, text, float8, interval) IS
    'answers as rate_limit_take(name, key, cost, max_wait) would, without consuming or writing anything';

\ir policy_refund.sql

-- The elements of array argument what, none NULL (ArrayElements); an
-- array of costs comes as text, with its NULLs and dimensions.
CREATE FUNCTION rl_limit_list_elements(function_name text, what text, elements text[])
RETURNS integer
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.array_ndims(elements) > 1 THEN
        PERFORM @extschema@.rl_report_bad_limit_list(pg_catalog.format('%s has %s dimensions.', what,
                                                           pg_catalog.array_ndims(elements)));
    END IF;
    FOR i IN 1..coalesce(pg_catalog.cardinality(elements), 0) LOOP
        IF elements[pg_catalog.array_lower(elements, 1) + i - 1] IS NULL THEN
            PERFORM @extschema@.rl_report_null_argument(function_name, pg_catalog.format('%s[%s]', what, i),
                                            'Every element of names, keys and costs needs a value.');
        END IF;
    END LOOP;
    RETURN coalesce(pg_catalog.cardinality(elements), 0);
END
$$;

\ir take_all.sql

CREATE FUNCTION rate_limit_take_all(names text[], keys text[], costs float8[] DEFAULT NULL)
RETURNS rate_limit_all_decision
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.num_nulls($1, $2) > 0 THEN
        PERFORM @extschema@.rl_null_argument('rate_limit_take_all', ARRAY['names', 'keys'],
                                 ARRAY[$1::text, $2::text], 'Every argument of this function needs a value.');
    END IF;
    RETURN @extschema@.rl_take_all($1, $2, $3, 0::float8);
END
$$;
COMMENT ON FUNCTION rate_limit_take_all(text[], text[], float8[]) IS
    'takes costs[i] (default 1) from bucket (names[i], keys[i]) under policy names[i] for every i, or from none; rows are locked in one canonical order';

CREATE FUNCTION rate_limit_take_all(names text[], keys text[], costs float8[], max_wait interval)
RETURNS rate_limit_all_decision
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.num_nulls($1, $2) > 0 THEN
        PERFORM @extschema@.rl_null_argument('rate_limit_take_all', ARRAY['names', 'keys'],
                                 ARRAY[$1::text, $2::text],
                                 'Only costs (meaning 1 each) and max_wait (meaning no reservation) may be NULL.');
    END IF;
    RETURN @extschema@.rl_take_all($1, $2, $3, @extschema@.rl_max_wait($4));
END
$$;
COMMENT ON FUNCTION rate_limit_take_all(text[], text[], float8[], interval) IS
    'takes costs[i] (default 1) from bucket (names[i], keys[i]) under policy names[i] for every i, or from none, each reserving within max_wait where its policy allows; rows are locked in one canonical order';

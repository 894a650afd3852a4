-- sql/src/policy_options.sql
--
-- @rl@check_policy_options(kind, name, storage, enforce): the checks that
-- rate_limit_define, rate_limit_define_sliding_window and
-- rate_limit_define_concurrency make alike of what every policy has, before
-- those of its own kind: its name (1 to :rl_max_name_bytes bytes of
-- printable ASCII), its storage and enforce.  The hints name examples of
-- the kind of policy being defined, kind as the policy table has it
-- ('bucket', 'sliding' or 'concurrency').  A NULL name is for the caller
-- to refuse, with a message that names its other required arguments.
-- Included before define.sql (by each target and by enforce_upgrade.sql);
-- PUBLIC may not execute it.

\ir limits.sql
\set rl_check_policy_options :rl check_policy_options
CREATE FUNCTION :rl_check_policy_options(kind text, name text, storage text, enforce boolean)
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- Names a policy of this kind might have, for the hints.
    short_names     text := CASE WHEN kind OPERATOR(pg_catalog.=) 'concurrency'
                                 THEN '''exports'' or ''llm-calls'''
                                 ELSE '''api'' or ''login''' END;
    printable_names text := CASE WHEN kind OPERATOR(pg_catalog.=) 'concurrency'
                                 THEN '''exports'' or ''llm:v2'''
                                 WHEN kind OPERATOR(pg_catalog.=) 'sliding'
                                 THEN '''api'' or ''login:v2'''
                                 ELSE '''api-free'' or ''login:v2''' END;
BEGIN
    IF name OPERATOR(pg_catalog.=) '' OR pg_catalog.octet_length(name) OPERATOR(pg_catalog.>) @rl_max_name_bytes@ THEN
        RAISE EXCEPTION 'policy name must be 1 to @rl_max_name_bytes@ bytes long'
            USING ERRCODE = CASE WHEN name OPERATOR(pg_catalog.=) '' THEN 'invalid_parameter_value'
                                 ELSE 'program_limit_exceeded' END,
                  DETAIL = pg_catalog.format('The name given is %s bytes long.', pg_catalog.octet_length(name)),
                  HINT = pg_catalog.format('Use a short name, such as %s.', short_names);
    END IF;
    -- The name is what rate_limit_headers() writes into the RateLimit
    -- fields, as a structured-field string: printable ASCII only.
    IF name OPERATOR(pg_catalog.!~) '^[ -~]+$' THEN
        RAISE EXCEPTION 'policy name must be printable ASCII'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('Character %s of the name given is outside the printable ASCII range (space to tilde), which the RateLimit header fields cannot carry.',
                                             pg_catalog.length(pg_catalog.substring(name, '^[ -~]*')) OPERATOR(pg_catalog.+) 1),
                  HINT = pg_catalog.format('Use letters, digits and punctuation, such as %s.', printable_names);
    END IF;
    IF storage IS NULL OR NOT (storage OPERATOR(pg_catalog.=) ANY ('{table,memory}'::text[])) THEN
        RAISE EXCEPTION 'storage must be ''table'' or ''memory'''
            USING ERRCODE = CASE WHEN storage IS NULL THEN 'null_value_not_allowed' ELSE 'invalid_parameter_value' END,
                  DETAIL = pg_catalog.format('The storage given was %s.', coalesce(pg_catalog.quote_literal(storage), 'NULL')),
                  HINT = CASE WHEN kind OPERATOR(pg_catalog.=) 'bucket'
                              THEN 'Pass ''table'' (the default) to keep buckets in a table, or ''memory'' to keep them in shared memory.'
                              ELSE 'Pass ''table'' (the default) or ''memory''.' END;
    END IF;
    IF enforce IS NULL THEN
        RAISE EXCEPTION 'enforce must not be null'
            USING ERRCODE = 'null_value_not_allowed',
                  DETAIL = 'enforce chooses between refusing what the policy denies and only reporting it.',
                  HINT = 'Pass true (the default) to refuse, false to grant every call and count what would be denied.';
    END IF;
END
$$;
COMMENT ON FUNCTION :rl_check_policy_options(text, text, text, boolean) IS
    'raises the error of a policy name, storage or enforce that the define functions refuse (kind: the policy''s, for the hints)';
REVOKE ALL ON FUNCTION :rl_check_policy_options(text, text, text, boolean) FROM PUBLIC;

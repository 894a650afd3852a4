--
-- Every grant the README recommends works on its own: a role granted EXECUTE
-- on one administrative function can call it, and only it; without the grant
-- a call gets 42501.  Any role may take, check and build header values.
--
SET ratelimit.fixed_clock = 1000;
\i test/sql/include/error_of.sql
-- The SQLSTATE a statement raises, or 'ok'.
CREATE FUNCTION pg_temp.outcome(statement text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE statement;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END
$$;

SELECT rate_limit_define('grants', 1, '1 second', 10);
SELECT rate_limit_define('grants-dropped', 1, '1 second', 10);
SELECT remaining FROM rate_limit_take('grants', 'refund-me', 5);
SELECT remaining FROM rate_limit_take('grants', 'reset-me', 5);
SELECT remaining FROM rate_limit_take('grants-explicit', 'refund-me', 5, 1, 10);

CREATE ROLE ratelimit_grant_none NOLOGIN;
CREATE ROLE ratelimit_grant_define NOLOGIN;
CREATE ROLE ratelimit_grant_drop NOLOGIN;
CREATE ROLE ratelimit_grant_reset NOLOGIN;
CREATE ROLE ratelimit_grant_refund NOLOGIN;
CREATE ROLE ratelimit_grant_refund_explicit NOLOGIN;
CREATE ROLE ratelimit_grant_manage NOLOGIN;
GRANT EXECUTE ON FUNCTION rate_limit_define(text, float8, interval, float8, float8, float8, boolean, interval, float8, integer, float8, interval, text, boolean)
    TO ratelimit_grant_define;
GRANT EXECUTE ON FUNCTION rate_limit_drop(text) TO ratelimit_grant_drop;
GRANT EXECUTE ON FUNCTION rate_limit_reset(text, text) TO ratelimit_grant_reset;
GRANT EXECUTE ON FUNCTION rate_limit_refund(text, text, float8) TO ratelimit_grant_refund;
GRANT EXECUTE ON FUNCTION rate_limit_refund(text, text, float8, float8, float8) TO ratelimit_grant_refund_explicit;
-- as the README words it for the role that manages limits: by name alone,
-- which PostgreSQL accepts for a name with one signature only
SELECT proname, count(*) AS signatures FROM pg_proc
 WHERE proname IN ('rate_limit_define', 'rate_limit_drop') GROUP BY proname ORDER BY proname;
GRANT EXECUTE ON FUNCTION rate_limit_define, rate_limit_drop TO ratelimit_grant_manage;

-- Each role tries every administrative call.
CREATE TEMP TABLE calls (call text, statement text);
INSERT INTO calls VALUES
    ('define', $$SELECT rate_limit_define('grants-defined', 5, '1 minute')$$),
    ('drop', $$SELECT rate_limit_drop('grants-dropped')$$),
    ('reset', $$SELECT rate_limit_reset('grants', 'reset-me')$$),
    ('refund', $$SELECT rate_limit_refund('grants', 'refund-me', 1)$$),
    ('refund explicit', $$SELECT rate_limit_refund('grants-explicit', 'refund-me', 1, 1, 10)$$);
GRANT SELECT ON calls TO PUBLIC;
-- What one role gets from each call.
CREATE FUNCTION pg_temp.outcomes(role_name text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    result text;
BEGIN
    EXECUTE format('SET ROLE %I', role_name);
    SELECT string_agg(call || ': ' || pg_temp.outcome(statement), ', ' ORDER BY call) INTO result FROM calls;
    RESET ROLE;
    RETURN result;
END
$$;
SELECT r AS role, pg_temp.outcomes(r)
  FROM unnest(ARRAY['ratelimit_grant_none', 'ratelimit_grant_define', 'ratelimit_grant_drop',
                    'ratelimit_grant_reset', 'ratelimit_grant_refund',
                    'ratelimit_grant_refund_explicit', 'ratelimit_grant_manage']) WITH ORDINALITY AS g(r, n)
 ORDER BY n;

-- What the granted calls did.
SELECT name, rate, per, burst FROM ratelimit.policies WHERE name LIKE 'grants%' ORDER BY name;
SELECT name, key, tokens FROM ratelimit.buckets WHERE name LIKE 'grants%' ORDER BY name, key;

-- The policy-writing functions run as the extension's owner, with a fixed
-- search_path; so does every other SECURITY DEFINER function: pg_catalog
-- and pg_temp, in the native extension and in the portable one
-- (ratelimit_portable), which both name their own objects with their
-- schema.  One has none: the portable take by a policy's name, which runs
-- on every request and resolves nothing through its caller's search_path
-- (portable/policy_take.sql; test/cluster/portable_install.sh checks its
-- text and calls it under a search_path full of traps).
SELECT p.proname, p.prosecdef
  FROM pg_proc AS p JOIN pg_depend AS d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass
  JOIN pg_extension AS e ON e.oid = d.refobjid AND e.extname IN ('ratelimit', 'ratelimit_portable')
 WHERE p.proname IN ('rate_limit_define', 'rate_limit_drop') ORDER BY p.proname;
SELECT p.oid::regprocedure AS definer_without_search_path
  FROM pg_proc AS p JOIN pg_depend AS d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass
  JOIN pg_extension AS e ON e.oid = d.refobjid AND e.extname IN ('ratelimit', 'ratelimit_portable')
 WHERE p.prosecdef
   AND NOT coalesce(p.proconfig @> ARRAY['search_path=pg_catalog, pg_temp'], false)
   AND NOT (e.extname = 'ratelimit_portable' AND p.proname = 'rate_limit_take'
            AND pg_get_function_identity_arguments(p.oid) = 'name text, key text, cost double precision');

-- Policies are not secret: a role with only the default grants gets a
-- policy's header values (its burst and window), though it cannot read
-- ratelimit.policies itself.
SET ROLE ratelimit_grant_none;
SELECT allowed FROM rate_limit_take('grants', 'headers', 4);
SELECT h.* FROM rate_limit_check('grants', 'headers', 0) AS d, LATERAL rate_limit_headers(d, 'grants') AS h;
SELECT pg_temp.error_of($$SELECT * FROM ratelimit.policies$$);
RESET ROLE;

DROP TABLE calls;
-- Leave no policy or bucket behind for the tests that follow.
DELETE FROM ratelimit.policies WHERE name LIKE 'grants%';
DELETE FROM ratelimit.buckets WHERE name LIKE 'grants%';
DROP OWNED BY ratelimit_grant_none, ratelimit_grant_define, ratelimit_grant_drop,
    ratelimit_grant_reset, ratelimit_grant_refund, ratelimit_grant_refund_explicit,
    ratelimit_grant_manage;
DROP ROLE ratelimit_grant_none, ratelimit_grant_define, ratelimit_grant_drop,
    ratelimit_grant_reset, ratelimit_grant_refund, ratelimit_grant_refund_explicit,
    ratelimit_grant_manage;

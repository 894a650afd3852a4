--
-- Installing into a schema named ratelimit, the natural choice: the state
-- tables go there too, the schema stays the user's (its owner, grants and
-- comment untouched, and DROP EXTENSION leaves it), and every function works
-- there.  Installing anywhere else while it exists is refused.
--
DROP EXTENSION ratelimit;
CREATE ROLE ratelimit_schema_app NOLOGIN;
CREATE SCHEMA ratelimit;
GRANT USAGE ON SCHEMA ratelimit TO ratelimit_schema_app;
COMMENT ON SCHEMA ratelimit IS 'rate limits of the application';
CREATE TABLE ratelimit.application_table (id integer);
CREATE TEMP TABLE schema_before AS
    SELECT nspowner, nspacl::text AS acl, obj_description(oid, 'pg_namespace') AS comment
      FROM pg_namespace WHERE nspname = 'ratelimit';

CREATE EXTENSION ratelimit SCHEMA ratelimit;
SELECT extnamespace::regnamespace AS schema FROM pg_extension WHERE extname = 'ratelimit';
SELECT (SELECT row(s.*) FROM schema_before AS s)
       = (SELECT row(nspowner, nspacl::text, obj_description(oid, 'pg_namespace'))
            FROM pg_namespace WHERE nspname = 'ratelimit') AS schema_unchanged,
       has_schema_privilege('ratelimit_schema_app', 'ratelimit', 'USAGE') AS app_usage,
       EXISTS (SELECT FROM pg_depend
                WHERE classid = 'pg_namespace'::regclass AND objid = 'ratelimit'::regnamespace
                  AND deptype = 'e') AS schema_is_member;
SELECT c.relname, c.relkind, c.relpersistence,
       has_table_privilege('ratelimit_schema_app', c.oid, 'SELECT') AS app_select
  FROM pg_class AS c WHERE c.relnamespace = 'ratelimit'::regnamespace AND c.relkind IN ('r', 'c')
 ORDER BY c.relname;
SELECT count(*) AS functions FROM pg_proc WHERE pronamespace = 'ratelimit'::regnamespace;

-- Every function, schema-qualified.
SET ratelimit.fixed_clock = 1000;
\i test/sql/include/error_of.sql
SELECT name, rate, per, burst, tokens_per_second, max_reserved
  FROM ratelimit.rate_limit_define('api', 10, '1 minute', 5);
SELECT allowed, remaining FROM ratelimit.rate_limit_take('api', 'k');
SELECT allowed, remaining FROM ratelimit.rate_limit_check('api', 'k', 2);
SELECT allowed, remaining FROM ratelimit.rate_limit_refund('api', 'k', 1);
SELECT allowed, binding_name, remaining FROM ratelimit.rate_limit_take_all(ARRAY['api'], ARRAY['k2']);
SELECT allowed, remaining FROM ratelimit.rate_limit_take('explicit', 'k', 2, 1, 5);
SELECT allowed, remaining FROM ratelimit.rate_limit_check('explicit', 'k', 1, 1, 5, true, 1);
SELECT allowed, remaining FROM ratelimit.rate_limit_refund('explicit', 'k', 1, 1, 5);
SELECT h.* FROM ratelimit.rate_limit_check('api', 'k', 0) AS d,
    LATERAL ratelimit.rate_limit_headers(d, 'api') AS h;
SELECT h.* FROM ratelimit.rate_limit_headers(
    ROW(false, 0.5, 6.5, 27, 5, 'api', 10, '1 minute', 3)::ratelimit.rate_limit_decision) AS h;
SELECT h.* FROM ratelimit.rate_limit_headers(
    ROW(true, 0, NULL, NULL, '{4}', ARRAY[ROW(true, 4, 0, 6, 5, 'api', 10, '1 minute', 6)::ratelimit.rate_limit_decision]
       )::ratelimit.rate_limit_all_decision) AS h;
SELECT ratelimit.rate_limit_reset('explicit', 'k');
-- An application role with the default grants and the schema on its path.
SET ROLE ratelimit_schema_app;
SET search_path = ratelimit;
SELECT allowed, remaining FROM rate_limit_take('api', 'k');
SELECT h.ratelimit_policy FROM rate_limit_check('api', 'k', 0) AS d, LATERAL rate_limit_headers(d, 'api') AS h;
SELECT pg_temp.error_of($$SELECT rate_limit_define('api', 1000)$$);
SELECT pg_temp.error_of($$SELECT * FROM ratelimit.policies$$);
RESET search_path;
RESET ROLE;

-- The entry points of 0.3.0 and the decision's new fields (written by the
-- library): the limiter's own decision makes header values.
SELECT h.* FROM ratelimit.rate_limit_take('api', 'k2') AS d, LATERAL ratelimit.rate_limit_headers(d) AS h;
SELECT h.ratelimit FROM ratelimit.rate_limit_take_all(ARRAY['api'], ARRAY['k2']) AS d,
    LATERAL ratelimit.rate_limit_headers(d) AS h;
SELECT allowed FROM ratelimit.rate_limit_take('api', 'k3', 1, max_wait => '1 minute');
SELECT allowed FROM ratelimit.rate_limit_check('api', 'k3', 1, max_wait => '1 minute');
SELECT allowed FROM ratelimit.rate_limit_take_all(ARRAY['api'], ARRAY['k3'], NULL, '1 minute');
SELECT allowed FROM ratelimit.rate_limit_take_explicit('explicit-per', 'k', 1, 10, per => '1 minute');
SELECT allowed FROM ratelimit.rate_limit_check_explicit('explicit-per', 'k', 1, 10, per => '1 minute');
SELECT allowed FROM ratelimit.rate_limit_refund_explicit('explicit-per', 'k', 1, 10, per => '1 minute');
SELECT ratelimit.rate_limit_drop('api');
RESET ratelimit.fixed_clock;

-- DROP EXTENSION takes its objects and leaves the schema and the user's.
DROP EXTENSION ratelimit;
SELECT (SELECT row(s.*) FROM schema_before AS s)
       = (SELECT row(nspowner, nspacl::text, obj_description(oid, 'pg_namespace'))
            FROM pg_namespace WHERE nspname = 'ratelimit') AS schema_unchanged;
SELECT c.relname FROM pg_class AS c WHERE c.relnamespace = 'ratelimit'::regnamespace ORDER BY c.relname;
SELECT count(*) AS functions FROM pg_proc WHERE pronamespace = 'ratelimit'::regnamespace;

-- Anywhere else while the schema exists: refused, as the state schema
-- cannot be created.  (From 18 the error also quotes the install script:
-- the context is hidden.)
\set SHOW_CONTEXT never
CREATE EXTENSION ratelimit;
CREATE EXTENSION ratelimit SCHEMA public;
\set SHOW_CONTEXT errors
SELECT count(*) AS extensions FROM pg_extension WHERE extname = 'ratelimit';

-- Leave the extension as the other tests expect it.
DROP TABLE ratelimit.application_table;
DROP SCHEMA ratelimit;
DROP ROLE ratelimit_schema_app;
CREATE EXTENSION ratelimit;

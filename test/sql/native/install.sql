--
-- What CREATE EXTENSION installs: the state table's storage settings,
-- privileges and comments, and a clean reinstall into another schema.
--
SELECT c.relpersistence, c.reloptions, i.indisprimary, pg_get_indexdef(i.indexrelid)
    FROM pg_class c JOIN pg_index i ON i.indrelid = c.oid
    WHERE c.oid = 'ratelimit.buckets'::regclass;
SELECT attname, format_type(atttypid, atttypmod), attnotnull, collname
    FROM pg_attribute a LEFT JOIN pg_collation co ON co.oid = a.attcollation AND a.attcollation <> 0
    WHERE attrelid = 'ratelimit.buckets'::regclass AND attnum > 0 ORDER BY attnum;

-- PUBLIC may call take and check, not reset, and has nothing on the table.
SELECT p.proname, p.provolatile, p.proparallel, p.proisstrict,
       has_function_privilege('public', p.oid, 'EXECUTE') AS public_may_call,
       obj_description(p.oid, 'pg_proc') IS NOT NULL AS commented
    FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass
    JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'ratelimit'
    ORDER BY p.proname, p.oid::regprocedure::text;
SELECT has_schema_privilege('public', 'ratelimit', 'USAGE') AS schema_usage,
       has_table_privilege('public', 'ratelimit.buckets', 'SELECT') AS table_select,
       has_table_privilege('public', 'ratelimit.buckets', 'UPDATE') AS table_update;
SELECT obj_description('ratelimit.buckets'::regclass, 'pg_class') IS NOT NULL AS table_commented,
       obj_description('rate_limit_decision'::regtype, 'pg_type') IS NOT NULL AS type_commented,
       obj_description('ratelimit'::regnamespace, 'pg_namespace') IS NOT NULL AS schema_commented;

-- Reinstall into another schema: the functions follow, the state table is
-- new (and empty), and calls in this session find it.
SELECT allowed FROM rate_limit_take('install', 'k', 1, 0, 1);
DROP EXTENSION ratelimit;
SELECT count(*) FROM pg_namespace WHERE nspname = 'ratelimit';
CREATE SCHEMA app;
CREATE EXTENSION ratelimit SCHEMA app;
SELECT allowed, remaining FROM app.rate_limit_take('install', 'k', 1, 0, 1);
SELECT allowed, remaining FROM app.rate_limit_take('install', 'k', 1, 0, 1);
DROP EXTENSION ratelimit;
DROP SCHEMA app;
-- The state schema is the extension's own, unless the extension goes into a
-- schema named ratelimit (native/schema_ratelimit.sql): installing anywhere
-- else while one exists is refused rather than mixing the user's objects
-- with ours.
CREATE SCHEMA ratelimit;
CREATE SCHEMA app;
-- (From 18 the error also quotes the install script: the context is hidden.)
\set SHOW_CONTEXT never
CREATE EXTENSION ratelimit SCHEMA app;
\set SHOW_CONTEXT errors
SELECT count(*) AS extensions FROM pg_extension WHERE extname = 'ratelimit';
SELECT count(*) AS objects FROM pg_depend WHERE refobjid = 'ratelimit'::regnamespace;
DROP SCHEMA app;
DROP SCHEMA ratelimit;
CREATE EXTENSION ratelimit;
SELECT allowed, remaining FROM rate_limit_take('install', 'k', 1, 0, 1);

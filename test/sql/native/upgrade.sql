--
-- Upgrading from 0.1.0: buckets survive, every 0.1.0 function keeps working
-- against the new library until ALTER EXTENSION UPDATE (the state between
-- installing a build and updating), and every 0.2.0 function works after it.
--
DROP EXTENSION ratelimit;
CREATE EXTENSION ratelimit VERSION '0.1.0';
SELECT extversion FROM pg_extension WHERE extname = 'ratelimit';
SET ratelimit.fixed_clock = 1000;
\i test/sql/include/error_of.sql

-- The functions of the installed version.
CREATE TEMP VIEW extension_functions AS
SELECT d.objid::regprocedure AS function
  FROM pg_catalog.pg_depend AS d
 WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'ratelimit')
   AND d.classid = 'pg_catalog.pg_proc'::regclass
 ORDER BY d.objid::regprocedure::text;

-- Every signature of 0.1.0, with its defaults and with all arguments.
SELECT * FROM extension_functions;
SELECT allowed, remaining FROM rate_limit_take('upgrade', 'k', 3, 0, 5);
SELECT allowed, remaining FROM rate_limit_take('upgrade', 'k', 1, 0, 5, true, 1);
SELECT allowed, remaining FROM rate_limit_check('upgrade', 'k', 1, 0, 5);
SELECT allowed, remaining FROM rate_limit_check('upgrade', 'k', 1, 0, 5, true, 2);
SELECT rate_limit_reset('upgrade', 'gone');
SELECT rate_limit_reset('upgrade', 'k');
SELECT allowed, remaining FROM rate_limit_take('upgrade', 'k', 3, 0, 5);
SELECT count(*) AS policy_functions FROM pg_proc WHERE proname = 'rate_limit_define';

ALTER EXTENSION ratelimit UPDATE TO '0.2.0';
SELECT extversion FROM pg_extension WHERE extname = 'ratelimit';

-- Every signature of 0.2.0.
SELECT * FROM extension_functions;
-- the bucket taken before the upgrade is still there
SELECT allowed, remaining FROM rate_limit_take('upgrade', 'k', 1, 0, 5);
SELECT allowed, remaining FROM rate_limit_check('upgrade', 'k', 1, 0, 5, true, 2);
SELECT pg_temp.error_of($$SELECT * FROM rate_limit_take('upgrade', 'k')$$);
SELECT rate_limit_define('upgrade', 0, '1 second', 5);
SELECT rate_limit_define('upgrade-all', 1, '1 minute', 10, 10, 0, false, NULL, 0, 1);
SELECT allowed, remaining FROM rate_limit_take('upgrade', 'k');
SELECT allowed, remaining FROM rate_limit_take('upgrade', 'k', 0);
SELECT allowed, remaining FROM rate_limit_check('upgrade', 'k');
SELECT allowed, remaining FROM rate_limit_check('upgrade', 'k', 1);
SELECT allowed, remaining FROM rate_limit_refund('upgrade', 'k', 2);
SELECT allowed, remaining FROM rate_limit_refund('upgrade-explicit', 'k', 1, 1, 5);
SELECT allowed, binding_name, remaining
  FROM rate_limit_take_all(ARRAY['upgrade', 'upgrade-all'], ARRAY['k', 'k']);
SELECT allowed, binding_name, remaining
  FROM rate_limit_take_all(ARRAY['upgrade', 'upgrade-all'], ARRAY['k', 'k'], ARRAY[1, 2]);
SELECT h.* FROM rate_limit_check('upgrade-all', 'k') AS d, LATERAL rate_limit_headers(d, 'upgrade-all') AS h;
SELECT h.* FROM rate_limit_check('upgrade-all', 'k') AS d, LATERAL rate_limit_headers(d, 'upgrade-all', 2) AS h;
SELECT rate_limit_reset('upgrade', 'k');
SELECT rate_limit_drop('upgrade');
SELECT rate_limit_drop('upgrade-all');


--
-- Upgrading from 0.2.0 to 0.3.0: policies (which gain max_reserved 0) and
-- buckets survive, and so do the grants of rate_limit_define, which 0.3.0
-- replaces with a function returning the stored policy.
--
SELECT rate_limit_define('kept', 2, '1 minute', 4);
SELECT allowed, remaining FROM rate_limit_take('kept', 'k', 3);
SELECT allowed, remaining FROM rate_limit_take('kept-explicit', 'k', 2, 0, 5);
CREATE ROLE ratelimit_upgrade_definer NOLOGIN;
CREATE ROLE ratelimit_upgrade_admin NOLOGIN;
CREATE ROLE ratelimit_upgrade_delegate NOLOGIN;
GRANT EXECUTE ON FUNCTION rate_limit_define(text, float8, interval, float8, float8, float8, boolean, interval, float8, integer)
    TO ratelimit_upgrade_definer;
GRANT EXECUTE ON FUNCTION rate_limit_define(text, float8, interval, float8, float8, float8, boolean, interval, float8, integer)
    TO ratelimit_upgrade_admin WITH GRANT OPTION;
ALTER EXTENSION ratelimit UPDATE TO '0.3.0';
SELECT extversion FROM pg_extension WHERE extname = 'ratelimit';

-- Every signature of 0.3.0.
SELECT * FROM extension_functions;
SELECT name, rate, per, burst, max_reserved FROM ratelimit.policies ORDER BY name;
SELECT allowed, remaining FROM rate_limit_take('kept', 'k', 1);
SELECT allowed, remaining FROM rate_limit_take('kept-explicit', 'k', 1, 0, 5);
-- The grants, as they were: PUBLIC still may not define.
SELECT a.grantee::regrole, a.privilege_type, a.is_grantable
  FROM pg_proc AS p, LATERAL aclexplode(p.proacl) AS a
 WHERE p.oid = 'rate_limit_define(text, float8, interval, float8, float8, float8, boolean, interval, float8, integer, float8, interval, text)'::regprocedure
   AND a.grantee <> p.proowner
 ORDER BY 1::text;
SELECT has_function_privilege('public', 'rate_limit_define(text, float8, interval, float8, float8, float8, boolean, interval, float8, integer, float8, interval, text)', 'EXECUTE')
    AS public_may_define;
SET ROLE ratelimit_upgrade_definer;
SELECT name, rate, burst, max_reserved FROM rate_limit_define('granted', 1, '1 minute', 3);
RESET ROLE;
SET ROLE ratelimit_upgrade_admin;
SELECT name, rate, burst, max_reserved FROM rate_limit_define('granted', 2, '1 minute', 3);
GRANT EXECUTE ON FUNCTION rate_limit_define(text, float8, interval, float8, float8, float8, boolean, interval, float8, integer, float8, interval, text)
    TO ratelimit_upgrade_delegate;
RESET ROLE;
SET ROLE ratelimit_upgrade_delegate;
SELECT name, rate, burst, max_reserved FROM rate_limit_define('granted', 3, '1 minute', 3);
RESET ROLE;

--
-- Upgrading from 0.3.0 to 0.4.0: policies gain enforce (true, as before),
-- rate_limit_define its last parameter enforce: the function is replaced,
-- and whoever could execute it still can; the view rate_limit_policies
-- keeps its grants and shows the new column.
--
CREATE ROLE ratelimit_upgrade_viewer NOLOGIN;
GRANT SELECT ON rate_limit_policies TO ratelimit_upgrade_viewer;
ALTER EXTENSION ratelimit UPDATE TO '0.4.0';
SELECT extversion FROM pg_extension WHERE extname = 'ratelimit';
SELECT name, rate, burst, enforce FROM ratelimit.policies ORDER BY name;
SELECT count(*) AS define_functions FROM pg_proc WHERE proname LIKE 'rate_limit_define%';
SELECT a.grantee::regrole, a.privilege_type, a.is_grantable
  FROM pg_proc AS p, LATERAL aclexplode(p.proacl) AS a
 WHERE p.oid = 'rate_limit_define(text, float8, interval, float8, float8, float8, boolean, interval, float8, integer, float8, interval, text, boolean)'::regprocedure
   AND a.grantee <> p.proowner
 ORDER BY 1::text;
SELECT has_function_privilege('public', 'rate_limit_define(text, float8, interval, float8, float8, float8, boolean, interval, float8, integer, float8, interval, text, boolean)', 'EXECUTE')
    AS public_may_define;
-- rate_limit_define_sliding_window, new, is granted as rate_limit_define
-- was, and PUBLIC may not run it; the bucket rows gain previous (0).
SELECT a.grantee::regrole, a.privilege_type, a.is_grantable
  FROM pg_proc AS p, LATERAL aclexplode(p.proacl) AS a
 WHERE p.oid = 'rate_limit_define_sliding_window(text, float8, interval, text, boolean)'::regprocedure
   AND a.grantee <> p.proowner
 ORDER BY 1::text;
SELECT has_function_privilege('public', 'rate_limit_define_sliding_window(text, float8, interval, text, boolean)', 'EXECUTE')
    AS public_may_define_sliding;
SELECT count(*) AS rows, count(*) FILTER (WHERE previous = 0) AS previous_0 FROM ratelimit.buckets;
SELECT has_table_privilege('ratelimit_upgrade_viewer', 'rate_limit_policies', 'SELECT') AS viewer_may_read,
       has_table_privilege('public', 'rate_limit_policies', 'SELECT') AS public_may_read;
SET ROLE ratelimit_upgrade_delegate;
SELECT name, rate, enforce FROM rate_limit_define('granted', 4, '1 minute', 3, enforce => false);
SELECT name, enforce FROM rate_limit_policies WHERE name = 'granted';
RESET ROLE;
SELECT allowed, remaining FROM rate_limit_take('kept', 'k', 1);

--
-- Upgrading from 0.1.0 to the current version at once: buckets survive.
--
DROP EXTENSION ratelimit;
DROP ROLE ratelimit_upgrade_definer, ratelimit_upgrade_admin, ratelimit_upgrade_delegate, ratelimit_upgrade_viewer;
CREATE EXTENSION ratelimit VERSION '0.1.0';
SELECT allowed, remaining FROM rate_limit_take('from-0.1.0', 'k', 2, 0, 5);
ALTER EXTENSION ratelimit UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'ratelimit';
SELECT allowed, remaining FROM rate_limit_take('from-0.1.0', 'k', 2, 0, 5);
SELECT count(*) AS policies FROM ratelimit.policies;

--
-- The install script of the current version makes what the upgrade scripts
-- make: the same objects with the same definitions (function bodies,
-- defaults, settings), comments and privileges; the same attributes of
-- types and columns of tables, with their defaults, constraints, indexes
-- and triggers.  (Of the extension upgrade.extension names.)
--
SET upgrade.extension = 'ratelimit';
CREATE TEMP VIEW extension_catalog AS
-- Types that PostgreSQL makes along with another object (array types, the
-- row types of tables) are members of their own from 17 on; they come and go
-- with that object, so they are left out to compare the same on every version.
WITH members AS (
    SELECT d.classid, d.objid, d.objsubid
      FROM pg_depend AS d
     WHERE d.refclassid = 'pg_extension'::regclass
       AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = current_setting('upgrade.extension'))
       AND d.deptype = 'e'
       AND NOT (d.classid = 'pg_type'::regclass AND EXISTS (
               SELECT FROM pg_type AS t LEFT JOIN pg_class AS c ON c.oid = t.typrelid
                WHERE t.oid = d.objid
                  AND (EXISTS (SELECT FROM pg_type AS e WHERE e.typarray = t.oid)
                       OR c.relkind <> 'c')))),
relations AS (
    SELECT m.objid AS oid FROM members AS m WHERE m.classid = 'pg_class'::regclass
    UNION ALL
    SELECT t.typrelid FROM members AS m JOIN pg_type AS t ON m.classid = 'pg_type'::regclass
                                                         AND t.oid = m.objid AND t.typrelid <> 0)
SELECT 'extension' AS kind, e.extname::text AS object,
       concat_ws(' ', e.extnamespace::regnamespace, e.extrelocatable, e.extconfig::regclass[], e.extcondition) AS description
  FROM pg_extension AS e WHERE e.extname = current_setting('upgrade.extension')
UNION ALL
SELECT 'member', pg_describe_object(m.classid, m.objid, m.objsubid), ''
  FROM members AS m
UNION ALL
SELECT 'function', p.oid::regprocedure::text,
       concat_ws(E'\n', pg_get_functiondef(p.oid), 'owner ' || p.proowner::regrole::text, 'acl ' || p.proacl::text,
                 'comment ' || obj_description(p.oid, 'pg_proc'))
  FROM members AS m JOIN pg_proc AS p ON m.classid = 'pg_proc'::regclass AND p.oid = m.objid
UNION ALL
SELECT 'type', t.oid::regtype::text,
       concat_ws(' ', t.typtype, t.typowner::regrole, 'acl ' || t.typacl::text, 'comment ' || obj_description(t.oid, 'pg_type'))
  FROM members AS m JOIN pg_type AS t ON m.classid = 'pg_type'::regclass AND t.oid = m.objid
UNION ALL
SELECT 'schema', n.nspname::text,
       concat_ws(' ', n.nspowner::regrole, 'acl ' || n.nspacl::text, 'comment ' || obj_description(n.oid, 'pg_namespace'))
  FROM members AS m JOIN pg_namespace AS n ON m.classid = 'pg_namespace'::regclass AND n.oid = m.objid
UNION ALL
SELECT 'relation', c.oid::regclass::text,
       concat_ws(' ', c.relkind, c.relpersistence, c.relowner::regrole, 'options ' || c.reloptions::text,
                 'acl ' || c.relacl::text, 'comment ' || obj_description(c.oid, 'pg_class'))
  FROM relations AS r JOIN pg_class AS c ON c.oid = r.oid
UNION ALL
SELECT 'column', a.attrelid::regclass || '.' || a.attname,
       concat_ws(' ', a.attnum, format_type(a.atttypid, a.atttypmod), a.attnotnull, a.attisdropped,
                 'collation ' || a.attcollation::regcollation::text, 'generated ' || nullif(a.attgenerated, '')::text,
                 'default ' || pg_get_expr(ad.adbin, ad.adrelid), 'acl ' || a.attacl::text,
                 'comment ' || col_description(a.attrelid, a.attnum))
  FROM relations AS r JOIN pg_attribute AS a ON a.attrelid = r.oid AND a.attnum > 0
  LEFT JOIN pg_attrdef AS ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
UNION ALL
SELECT 'constraint', co.conrelid::regclass || '.' || co.conname,
       concat_ws(' ', pg_get_constraintdef(co.oid), co.convalidated, 'comment ' || obj_description(co.oid, 'pg_constraint'))
  FROM relations AS r JOIN pg_constraint AS co ON co.conrelid = r.oid
        -- NOT NULL is in the columns' rows; 18 also keeps it as a constraint.
        AND co.contype <> 'n'
UNION ALL
SELECT 'view', c.oid::regclass::text, pg_get_viewdef(c.oid)
  FROM relations AS r JOIN pg_class AS c ON c.oid = r.oid AND c.relkind = 'v'
UNION ALL
SELECT 'index', i.indexrelid::regclass::text,
       concat_ws(' ', pg_get_indexdef(i.indexrelid), 'options ' || c.reloptions::text)
  FROM relations AS r JOIN pg_index AS i ON i.indrelid = r.oid JOIN pg_class AS c ON c.oid = i.indexrelid
UNION ALL
SELECT 'trigger', tg.tgrelid::regclass || '.' || tg.tgname,
       concat_ws(' ', pg_get_triggerdef(tg.oid), 'enabled ' || tg.tgenabled::text)
  FROM relations AS r JOIN pg_trigger AS tg ON tg.tgrelid = r.oid AND NOT tg.tgisinternal
UNION ALL
SELECT 'initial privileges', pg_describe_object(ip.classoid, ip.objoid, ip.objsubid),
       concat_ws(' ', ip.privtype, ip.initprivs::text)
  FROM members AS m JOIN pg_init_privs AS ip ON ip.classoid = m.classid AND ip.objoid = m.objid;

-- The update above ran 0.1.0, then every upgrade script.
CREATE TEMP TABLE updated AS SELECT * FROM extension_catalog;
DROP EXTENSION ratelimit;
CREATE EXTENSION ratelimit;
SELECT extversion FROM pg_extension WHERE extname = 'ratelimit';
CREATE TEMP TABLE installed AS SELECT * FROM extension_catalog;
-- The rows of the catalog of one install that the other has not.
CREATE FUNCTION pg_temp.catalog_differences(updated regclass, installed regclass)
RETURNS TABLE ("where" text, kind text, object text, description text)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY EXECUTE format(
        'SELECT ''only updated'', * FROM (TABLE %1$s EXCEPT TABLE %2$s) AS u
         UNION ALL
         SELECT ''only installed'', * FROM (TABLE %2$s EXCEPT TABLE %1$s) AS i
         ORDER BY 1, 2, 3', updated, installed);
END
$$;
SELECT * FROM pg_temp.catalog_differences('updated', 'installed');
SELECT kind, count(*) FROM updated GROUP BY kind ORDER BY kind;

--
-- From 0.3.0, the last version released, its upgrade script alone gives
-- the same.
--
DROP EXTENSION ratelimit;
CREATE EXTENSION ratelimit VERSION '0.3.0';
ALTER EXTENSION ratelimit UPDATE TO '0.4.0';
CREATE TEMP TABLE updated_from_0_3 AS SELECT * FROM extension_catalog;
SELECT * FROM pg_temp.catalog_differences('updated_from_0_3', 'installed');
DROP EXTENSION ratelimit;
-- rate_limit_buckets gains a column, so the upgrade makes it anew: whoever
-- could execute it still can, and PUBLIC still cannot.
CREATE EXTENSION ratelimit VERSION '0.3.0';
CREATE ROLE ratelimit_upgrade_lister NOLOGIN;
GRANT EXECUTE ON FUNCTION rate_limit_buckets(text) TO ratelimit_upgrade_lister WITH GRANT OPTION;
ALTER EXTENSION ratelimit UPDATE TO '0.4.0';
SELECT has_function_privilege('ratelimit_upgrade_lister', 'rate_limit_buckets(text)', 'EXECUTE WITH GRANT OPTION') AS lister_kept,
       has_function_privilege('public', 'rate_limit_buckets(text)', 'EXECUTE') AS public_executes;
SELECT key, tokens, previous FROM rate_limit_buckets('nothing');
DROP EXTENSION ratelimit;
DROP ROLE ratelimit_upgrade_lister;
CREATE EXTENSION ratelimit;

--
-- The same of the portable limiter, installed as managed services let it
-- be: by a role that is not a superuser, which the trusted extension's
-- tables and SECURITY DEFINER routines belong to (test/cluster/
-- portable_install.sh).  The upgrade is run by a superuser.
--
CREATE ROLE ratelimit_upgrade_owner NOLOGIN;
GRANT CREATE ON DATABASE contrib_regression TO ratelimit_upgrade_owner;
SET ROLE ratelimit_upgrade_owner;
CREATE SCHEMA portable_upgrade;
CREATE EXTENSION ratelimit_portable SCHEMA portable_upgrade VERSION '0.3.0';
SELECT name, burst FROM portable_upgrade.rate_limit_define('kept', 1, '1 minute', 3);
RESET ROLE;
ALTER EXTENSION ratelimit_portable UPDATE TO '0.4.0';
SELECT extversion FROM pg_extension WHERE extname = 'ratelimit_portable';
SET upgrade.extension = 'ratelimit_portable';
CREATE TEMP TABLE portable_updated AS SELECT * FROM extension_catalog;
-- The policy survives, and the upgraded functions work for their owner.
SET ROLE ratelimit_upgrade_owner;
SELECT name, rate, burst FROM portable_upgrade.rate_limit_policies;
SELECT name, burst FROM portable_upgrade.rate_limit_define('kept', 1, '1 minute', 4);
SELECT allowed, remaining FROM portable_upgrade.rate_limit_take('kept', 'k');
SELECT h.* FROM portable_upgrade.rate_limit_check('kept', 'k') AS d,
                LATERAL portable_upgrade.rate_limit_headers(d, 'kept') AS h;
SELECT portable_upgrade.rate_limit_drop('kept');
-- A concurrency limit holds its places once upgraded.
SELECT name, burst, kind FROM portable_upgrade.rate_limit_define_concurrency('held', 1);
BEGIN;
SELECT allowed, remaining FROM portable_upgrade.rate_limit_take('held', 'k');
SELECT allowed, remaining, retry_after FROM portable_upgrade.rate_limit_take('held', 'k');
COMMIT;
SELECT allowed, remaining FROM portable_upgrade.rate_limit_check('held', 'k');
SELECT portable_upgrade.rate_limit_drop('held');
DROP EXTENSION ratelimit_portable;
CREATE EXTENSION ratelimit_portable SCHEMA portable_upgrade;
RESET ROLE;
SELECT extversion FROM pg_extension WHERE extname = 'ratelimit_portable';
CREATE TEMP TABLE portable_installed AS SELECT * FROM extension_catalog;
SELECT * FROM pg_temp.catalog_differences('portable_updated', 'portable_installed');
SELECT kind, count(*) FROM portable_updated GROUP BY kind ORDER BY kind;
DROP EXTENSION ratelimit_portable;
DROP SCHEMA portable_upgrade;
REVOKE CREATE ON DATABASE contrib_regression FROM ratelimit_upgrade_owner;
DROP ROLE ratelimit_upgrade_owner;
RESET upgrade.extension;

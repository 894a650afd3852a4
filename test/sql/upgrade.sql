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

-- A fresh install at the default version has the same objects as the upgrade.
CREATE TEMP TABLE upgraded AS
    SELECT pg_describe_object(classid, objid, objsubid) AS object
      FROM pg_depend WHERE refobjid = (SELECT oid FROM pg_extension WHERE extname = 'ratelimit')
       AND deptype = 'e';
DROP EXTENSION ratelimit;
CREATE EXTENSION ratelimit;
SELECT extversion FROM pg_extension WHERE extname = 'ratelimit';
SELECT object FROM upgraded
EXCEPT
SELECT pg_describe_object(classid, objid, objsubid)
  FROM pg_depend WHERE refobjid = (SELECT oid FROM pg_extension WHERE extname = 'ratelimit')
   AND deptype = 'e';
SELECT count(*) AS objects FROM upgraded;

--
-- Upgrading from 0.1.0: buckets survive, the 0.1.0 functions keep working
-- against the new library, and the 0.2.0 functions arrive.
--
DROP EXTENSION ratelimit;
CREATE EXTENSION ratelimit VERSION '0.1.0';
SELECT extversion FROM pg_extension WHERE extname = 'ratelimit';
SET ratelimit.fixed_clock = 1000;
SELECT allowed, remaining FROM rate_limit_take('upgrade', 'k', 3, 0, 5);
SELECT count(*) AS policy_functions FROM pg_proc WHERE proname = 'rate_limit_define';

ALTER EXTENSION ratelimit UPDATE TO '0.2.0';
SELECT extversion FROM pg_extension WHERE extname = 'ratelimit';
-- the bucket taken before the upgrade is still there
SELECT allowed, remaining FROM rate_limit_take('upgrade', 'k', 1, 0, 5);
SELECT rate_limit_define('upgrade', 0, '1 second', 5);
SELECT allowed, remaining FROM rate_limit_take('upgrade', 'k');
SELECT allowed, remaining FROM rate_limit_refund('upgrade', 'k', 2);
SELECT rate_limit_reset('upgrade', 'k');

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

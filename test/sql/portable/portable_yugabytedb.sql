--
-- The portable limiter's ways on YugabyteDB, which has no transaction ids
-- and no system columns xmin, xmax and ctid (docs/yugabytedb.md), taken
-- here on PostgreSQL: a psql install in a schema of its own whose
-- rl_on_yugabytedb() says true.  There the limiter reads policies at READ
-- COMMITTED only and refuses other levels (0A000), purges by key while it
-- holds the row of policy changes shared, and keeps bucket state logged.
-- (YugabyteDB itself runs nothing here.)
--
CREATE SCHEMA portable_yb;
SET search_path = portable_yb;
-- (The script itself is not echoed.)
\set ECHO none
\i portable/ratelimit.sql
\set ECHO all
RESET search_path;
\i test/sql/include/error_of.sql
CREATE OR REPLACE FUNCTION portable_yb.rl_on_yugabytedb() RETURNS boolean
LANGUAGE sql IMMUTABLE
AS $$ SELECT true $$;
CREATE OR REPLACE FUNCTION portable_yb.rl_now() RETURNS bigint
LANGUAGE sql VOLATILE
AS $$ SELECT ((pg_catalog.current_setting('ratelimit.fixed_clock')::float8 - 946684800) * 1000000)::bigint $$;
SET ratelimit.fixed_clock = 1000;
SELECT name, rate, burst FROM portable_yb.rate_limit_define('yb', 1, '1 second', 3);

-- At READ COMMITTED: takes by the policy's name, explicit calls on other
-- names and refusals on the policy's, resets, headers.
SELECT allowed, remaining FROM portable_yb.rate_limit_take('yb', 'k', 2);
SELECT allowed, remaining, retry_after FROM portable_yb.rate_limit_take('yb', 'k', 2);
SELECT allowed, remaining FROM portable_yb.rate_limit_check('yb', 'k');
SELECT allowed, remaining FROM portable_yb.rate_limit_take('other', 'k', 1, 1, 5);
SELECT pg_temp.error_of($$SELECT portable_yb.rate_limit_take('yb', 'k', 1, 1, 5)$$);
SELECT pg_temp.error_of($$SELECT portable_yb.rate_limit_take('missing', 'k')$$);
SELECT h.* FROM portable_yb.rate_limit_check('yb', 'k') AS d, LATERAL portable_yb.rate_limit_headers(d) AS h;

-- Other levels read a snapshot that cannot tell a policy changed since:
-- refused, policy or not.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT pg_temp.error_of($$SELECT portable_yb.rate_limit_take('yb', 'k')$$);
ROLLBACK;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT pg_temp.error_of($$SELECT portable_yb.rate_limit_take('other', 'k', 1, 1, 5)$$);
SELECT pg_temp.error_of($$SELECT portable_yb.rate_limit_reset('yb', 'k')$$);
ROLLBACK;
SELECT count(*) AS buckets FROM portable_yb.rl_buckets;

-- Purge, at READ COMMITTED: a batch forgets the full buckets by their key,
-- and holds the row of policy changes (which every definition or removal
-- of a policy rewrites first) until its transaction ends; at the other
-- levels it is refused.  (The batches are called as the procedure calls
-- all but its first, after a bucket: the first refuses a transaction
-- block.)
SET ratelimit.fixed_clock = 1999;
SELECT allowed FROM portable_yb.rate_limit_take('yb', 'spent', 3);
SET ratelimit.fixed_clock = 2000;
BEGIN;
SELECT deleted, last_name, last_key FROM portable_yb.rl_purge_batch(NULL, '', '', 1000);
SELECT c.xmax = pg_current_xact_id()::text::xid AS held_by_the_batch FROM portable_yb.rl_policy_changes AS c;
COMMIT;
SELECT name, key FROM portable_yb.rl_buckets ORDER BY name, key;
SET ratelimit.fixed_clock = 3000;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT pg_temp.error_of($$SELECT portable_yb.rl_purge_batch(NULL, '', '', 1000)$$);
ROLLBACK;
CALL portable_yb.rate_limit_purge();
SELECT count(*) AS buckets FROM portable_yb.rl_buckets;

-- YugabyteDB replicates every table: bucket state stays logged.
SELECT pg_temp.error_of($$SELECT portable_yb.rate_limit_set_logged(false)$$);

RESET ratelimit.fixed_clock;
SET client_min_messages = warning;
DROP SCHEMA portable_yb CASCADE;
RESET client_min_messages;

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
-- levels it is refused.  (The second batch is called as the procedure calls
-- all but its first, after a bucket: the first refuses a transaction block.
-- Batches page in the order of rl_hash_code, which the keys do not tell:
-- the first batch, of one bucket, is not shown.)
SET ratelimit.fixed_clock = 1999;
SELECT allowed FROM portable_yb.rate_limit_take('yb', 'spent', 3);
SET ratelimit.fixed_clock = 2000;
SELECT deleted AS first_deleted, last_name AS first_name, last_key AS first_key
  FROM portable_yb.rl_purge_batch(NULL, NULL, NULL, 1) \gset
BEGIN;
SELECT :first_deleted + deleted AS deleted, last_name IS NULL AS to_the_end
  FROM portable_yb.rl_purge_batch(NULL, :'first_name', :'first_key', 1000);
SELECT c.xmax = pg_current_xact_id()::text::xid AS held_by_the_batch FROM portable_yb.rl_policy_changes AS c;
COMMIT;
SELECT name, key FROM portable_yb.rl_buckets ORDER BY name, key;
SET ratelimit.fixed_clock = 3000;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT pg_temp.error_of($$SELECT portable_yb.rl_purge_batch(NULL, '', '', 1000)$$);
ROLLBACK;
CALL portable_yb.rate_limit_purge();
SELECT count(*) AS buckets FROM portable_yb.rl_buckets;

-- The pages of a purge follow the order in which YugabyteDB keeps the rows
-- of the hash-sharded bucket table (rl_hash_code, then the key), not the
-- key's order: 50 buckets in batches of 7, of which the 40 full ones go.
SET ratelimit.fixed_clock = 4000;
SELECT name FROM portable_yb.rate_limit_define('page', 1, '1 second', 5);
SELECT count(*) FILTER (WHERE allowed) AS taken
  FROM generate_series(1, 50) AS i, LATERAL portable_yb.rate_limit_take('page', 'p' || i) AS t;
SET ratelimit.fixed_clock = 4002;
SELECT count(*) FILTER (WHERE allowed) AS taken_again
  FROM generate_series(41, 50) AS i, LATERAL portable_yb.rate_limit_take('page', 'p' || i) AS t;
SET ratelimit.fixed_clock = 4002.5;
CREATE TEMP TABLE pages (n int, deleted bigint, last_name text, last_key text);
DO $$
DECLARE
    batch record;
    after_name text;
    after_key text;
BEGIN
    FOR n IN 1..20 LOOP
        batch := portable_yb.rl_purge_batch('page', after_name, after_key, 7);
        INSERT INTO pages VALUES (n, batch.deleted, batch.last_name, batch.last_key);
        EXIT WHEN batch.last_name IS NULL;
        after_name := batch.last_name;
        after_key := batch.last_key;
    END LOOP;
END
$$;
SELECT count(*) AS batches, sum(deleted) AS deleted, count(*) FILTER (WHERE last_name IS NULL) AS ended
  FROM pages;
SELECT bool_and((portable_yb.rl_hash_code(p.last_name, p.last_key), p.last_key)
                > (portable_yb.rl_hash_code(q.last_name, q.last_key), q.last_key)) AS in_hash_order,
       bool_and(p.last_key > q.last_key) AS in_key_order
  FROM pages AS p JOIN pages AS q ON q.n = p.n - 1 WHERE p.last_name IS NOT NULL;
SELECT string_agg(key, ' ' ORDER BY substr(key, 2)::int) AS kept FROM portable_yb.rl_buckets WHERE name = 'page';

-- YugabyteDB replicates every table: bucket state stays logged.
SELECT pg_temp.error_of($$SELECT portable_yb.rate_limit_set_logged(false)$$);

-- Its pg_locks does not list advisory locks by their numbers, by which the
-- places of a concurrency limit are counted: refused, defined or (a row
-- restored from PostgreSQL) taken.
SELECT pg_temp.error_of($$SELECT portable_yb.rate_limit_define_concurrency('yb-held', 2)$$);
INSERT INTO portable_yb.rl_policies (name, rate, per, burst, kind) VALUES ('yb-held', 0, '1 second', 2, 'concurrency');
BEGIN;
SELECT pg_temp.error_of($$SELECT portable_yb.rate_limit_take('yb-held', 'k')$$);
SELECT pg_temp.error_of($$SELECT portable_yb.rate_limit_check('yb-held', 'k')$$);
SELECT pg_temp.error_of($$SELECT portable_yb.rate_limit_take_all(ARRAY['yb', 'yb-held'], ARRAY['k', 'k'])$$);
COMMIT;

RESET ratelimit.fixed_clock;
SET client_min_messages = warning;
DROP SCHEMA portable_yb CASCADE;
RESET client_min_messages;

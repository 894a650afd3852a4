-- test/sql/include/concurrency_leases.sql: included by regression tests (\i)
-- after error_of.sql, at ratelimit.fixed_clock 1000: concurrency limits
-- held as leases, as every limiter answers them, field by field and error
-- by error (test/sql/native/concurrency_leases.sql,
-- test/sql/portable/portable_concurrency_leases.sql,
-- test/sql/memory/memory_concurrency_leases.sql).  Lease ids are random:
-- only whether there is one is shown.  Drops what it defines.
SELECT name, rate, per, burst, kind, lease
  FROM rate_limit_define_concurrency('lease-llm', 3, lease => '30 seconds');
SELECT name, burst, kind, lease FROM rate_limit_policies WHERE name = 'lease-llm';

-- Leases outlive their transaction (here, each statement's): two places,
-- then one, then a denial until the earliest lease expires.
SELECT allowed, remaining, retry_after, reset_after, capacity, refill_after,
       lease IS NOT NULL AS leased, expires_at
  FROM rate_limit_lease('lease-llm', 'u1', 2);
SET ratelimit.fixed_clock = 1010;
SELECT allowed, remaining, retry_after, reset_after, refill_after,
       lease IS NOT NULL AS leased, expires_at
  FROM rate_limit_lease('lease-llm', 'u1');
SELECT allowed, remaining, retry_after, reset_after, refill_after,
       lease IS NOT NULL AS leased, expires_at
  FROM rate_limit_lease('lease-llm', 'u1');
-- Two places come back when the first lease (2 places) expires: at 1030.
SELECT allowed, remaining, retry_after, reset_after, refill_after
  FROM rate_limit_check('lease-llm', 'u1', 2);
SELECT h.* FROM rate_limit_lease('lease-llm', 'u1') AS d, rate_limit_headers(d) AS h;
SELECT h.* FROM rate_limit_check('lease-llm', 'u1') AS d, rate_limit_headers(d) AS h;
-- Another key has its own places.
SELECT allowed, remaining FROM rate_limit_lease('lease-llm', 'u2', 3);
-- Just before its expiry the lease still counts; at its expiry it is free.
SET ratelimit.fixed_clock = 1029.999;
SELECT allowed, remaining, retry_after FROM rate_limit_check('lease-llm', 'u1');
SET ratelimit.fixed_clock = 1030;
SELECT allowed, remaining, retry_after, reset_after, refill_after
  FROM rate_limit_check('lease-llm', 'u1', 2);
SELECT allowed, remaining, lease IS NOT NULL AS leased, expires_at
  FROM rate_limit_lease('lease-llm', 'u1', 2);
-- Denied, a lease of three waits for the lease of one place (1040) and
-- for the one of two (1060): retry_after is the later.
SELECT allowed, remaining, retry_after, reset_after, refill_after
  FROM rate_limit_check('lease-llm', 'u1', 3);

-- A release gives the places back at once, true once, then false.
CREATE TEMPORARY TABLE held (id uuid);
INSERT INTO held SELECT lease FROM rate_limit_lease('lease-llm', 'u3');
SELECT allowed, remaining FROM rate_limit_check('lease-llm', 'u3', 0);
SELECT rate_limit_release(id) FROM held;
SELECT allowed, remaining FROM rate_limit_check('lease-llm', 'u3', 0);
SELECT rate_limit_release(id) FROM held;
-- An unknown lease, NULL (a denial's), and an expired one: false.
SELECT rate_limit_release('00000000-0000-4000-8000-000000000000');
SELECT rate_limit_release(NULL);
DELETE FROM held;
INSERT INTO held SELECT lease FROM rate_limit_lease('lease-llm', 'u3');
SET ratelimit.fixed_clock = 1060;
SELECT rate_limit_release(id) FROM held;

-- A rollback gives a lease back; a release rolled back releases nothing.
BEGIN;
SELECT allowed, remaining FROM rate_limit_lease('lease-llm', 'u4', 2);
SELECT allowed, remaining FROM rate_limit_check('lease-llm', 'u4', 0);
ROLLBACK;
SELECT allowed, remaining FROM rate_limit_check('lease-llm', 'u4', 0);
DELETE FROM held;
INSERT INTO held SELECT lease FROM rate_limit_lease('lease-llm', 'u4', 2);
BEGIN;
SELECT rate_limit_release(id) FROM held;
SELECT allowed, remaining FROM rate_limit_check('lease-llm', 'u4', 0);
ROLLBACK;
SELECT allowed, remaining FROM rate_limit_check('lease-llm', 'u4', 0);
-- ROLLBACK TO SAVEPOINT gives back a lease taken after the savepoint.
BEGIN;
SELECT allowed, remaining FROM rate_limit_lease('lease-llm', 'u4');
SAVEPOINT s;
SELECT allowed, remaining FROM rate_limit_lease('lease-llm', 'u4');
ROLLBACK TO SAVEPOINT s;
SELECT allowed, remaining FROM rate_limit_check('lease-llm', 'u4', 0);
COMMIT;
SELECT allowed, remaining FROM rate_limit_check('lease-llm', 'u4', 0);
SELECT rate_limit_release(id) FROM held;

-- rate_limit_take and rate_limit_take_all take a lease too (released by
-- its expiry); a check takes nothing; a look (cost 0) leases nothing.
SELECT allowed, remaining, reset_after FROM rate_limit_take('lease-llm', 'u5');
SELECT allowed, remaining FROM rate_limit_check('lease-llm', 'u5');
SELECT allowed, remaining, lease, expires_at FROM rate_limit_lease('lease-llm', 'u5', 0);
-- "2 a minute and at most 3 leases", all or nothing.
SELECT name FROM rate_limit_define('lease-llm-rate', 2, '1 minute');
SELECT allowed, retry_after, binding_name, remaining
  FROM rate_limit_take_all(ARRAY['lease-llm-rate', 'lease-llm'], ARRAY['u5', 'u5'], ARRAY[1, 2]);
-- Every place is leased: denied by the leases, with their wait, and the
-- token the rate limit would have taken is not taken.
SELECT allowed, retry_after, binding_name, remaining
  FROM rate_limit_take_all(ARRAY['lease-llm-rate', 'lease-llm'], ARRAY['u5', 'u5']);
SELECT h.* FROM rate_limit_take_all(ARRAY['lease-llm-rate', 'lease-llm'], ARRAY['u5', 'u5']) AS d,
               rate_limit_headers(d) AS h;
SELECT allowed, remaining FROM rate_limit_check('lease-llm-rate', 'u5', 0);
-- Once they expire, the rate limit denies, and no lease is taken.
SET ratelimit.fixed_clock = 1090;
SELECT allowed, remaining FROM rate_limit_take('lease-llm-rate', 'u5');
SELECT allowed, retry_after, binding_name, remaining
  FROM rate_limit_take_all(ARRAY['lease-llm-rate', 'lease-llm'], ARRAY['u5', 'u5']);
SELECT allowed, remaining FROM rate_limit_check('lease-llm', 'u5', 0);

-- A report-only limit grants what it would deny, leasing nothing.
SELECT name, enforce FROM rate_limit_define_concurrency('lease-llm-shadow', 1, lease => '1 minute', enforce => false);
SELECT allowed, remaining, lease IS NOT NULL AS leased FROM rate_limit_lease('lease-llm-shadow', 'k');
SELECT allowed, remaining, retry_after, lease IS NOT NULL AS leased FROM rate_limit_lease('lease-llm-shadow', 'k');

-- rate_limit_purge deletes the expired leases (and only them).
SET ratelimit.fixed_clock = 1200;
SELECT allowed, remaining FROM rate_limit_lease('lease-llm', 'u6');
CALL rate_limit_purge('lease-llm');
CALL rate_limit_purge('lease-llm');
SELECT allowed, remaining FROM rate_limit_check('lease-llm', 'u6', 0);

-- Errors.
SELECT pg_temp.error_of($$SELECT rate_limit_define_concurrency('lease-llm', 3, lease => '0 seconds')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define_concurrency('lease-llm', 3, lease => '-1 minute')$$);
SELECT name FROM rate_limit_define_concurrency('held', 2);
SELECT pg_temp.error_of($$SELECT rate_limit_lease('held', 'k')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_lease('lease-llm-rate', 'k')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_lease('nosuch', 'k')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_lease('lease-llm', 'k', 1.5)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_lease('lease-llm', 'k', 4)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_lease('lease-llm', NULL)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_refund('lease-llm', 'k', 1)$$);
-- A read-only transaction cannot lease, nor release; it can check.
BEGIN READ ONLY;
SELECT allowed, remaining FROM rate_limit_check('lease-llm', 'k');
SELECT pg_temp.error_of($$SELECT rate_limit_lease('lease-llm', 'k')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take('lease-llm', 'k')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take_all(ARRAY['lease-llm'], ARRAY['k'])$$);
SELECT pg_temp.error_of($$SELECT rate_limit_release('00000000-0000-4000-8000-000000000000')$$);
ROLLBACK;
SELECT rate_limit_drop('lease-llm'), rate_limit_drop('lease-llm-rate'), rate_limit_drop('lease-llm-shadow'),
       rate_limit_drop('held');
DROP TABLE held;
SET ratelimit.fixed_clock = 1000;

-- Dropping a policy deletes its leases, in the dropping transaction: a
-- rollback keeps them, and a policy defined again under the name starts
-- with every place free.
SELECT name FROM rate_limit_define_concurrency('lease-drop', 2, lease => '30 seconds');
SELECT allowed, remaining FROM rate_limit_lease('lease-drop', 'k', 2);
BEGIN;
SELECT rate_limit_drop('lease-drop');
ROLLBACK;
SELECT allowed, remaining FROM rate_limit_check('lease-drop', 'k');
SELECT rate_limit_drop('lease-drop');
SELECT name FROM rate_limit_define_concurrency('lease-drop', 2, lease => '30 seconds');
SELECT allowed, remaining, lease IS NOT NULL AS leased FROM rate_limit_lease('lease-drop', 'k');
SELECT allowed, remaining, lease IS NOT NULL AS leased FROM rate_limit_lease('lease-drop', 'k');
SELECT allowed, remaining FROM rate_limit_check('lease-drop', 'k');
SELECT rate_limit_drop('lease-drop');

-- max_held lowered below the places leased: remaining is 0, never
-- negative, whichever call answers.
SELECT name FROM rate_limit_define_concurrency('lease-low', 3, lease => '30 seconds');
SELECT allowed, remaining FROM rate_limit_lease('lease-low', 'k', 3);
SELECT name, burst FROM rate_limit_define_concurrency('lease-low', 1, lease => '30 seconds');
SELECT allowed, remaining, retry_after FROM rate_limit_check('lease-low', 'k');
SELECT allowed, remaining, retry_after FROM rate_limit_check('lease-low', 'k', 0);
SELECT allowed, remaining, retry_after FROM rate_limit_take('lease-low', 'k');
SELECT allowed, remaining, retry_after, lease IS NOT NULL AS leased FROM rate_limit_lease('lease-low', 'k');
SELECT allowed, remaining, retry_after FROM rate_limit_take_all(ARRAY['lease-low'], ARRAY['k']);
SELECT rate_limit_drop('lease-low');
SET ratelimit.fixed_clock = 1000;

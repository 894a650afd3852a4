-- test/sql/include/concurrency_holds.sql: included by regression tests (\i)
-- after error_of.sql, at ratelimit.fixed_clock 1000: concurrency limits held
-- until the transaction ends, as both limiters answer them, field by field
-- and error by error (test/sql/native/concurrency_holds.sql,
-- test/sql/portable/portable_concurrency_holds.sql).  Leaves policy
-- "exports" (3 places, none held) defined.
SELECT name, rate, per, burst, storage, enforce, kind, lease
  FROM rate_limit_define_concurrency('exports', 3);
SELECT name, burst, kind, lease FROM rate_limit_policies WHERE name = 'exports';

-- Three places, then a denial; each take sees the places this transaction
-- holds already.
BEGIN;
SELECT * FROM rate_limit_take('exports', 'tenant:7');
SELECT * FROM rate_limit_take('exports', 'tenant:7');
SELECT * FROM rate_limit_check('exports', 'tenant:7');
SELECT * FROM rate_limit_take('exports', 'tenant:7');
SELECT * FROM rate_limit_take('exports', 'tenant:7');
SELECT * FROM rate_limit_check('exports', 'tenant:7', 0);
-- Another key has its own places.
SELECT allowed, remaining FROM rate_limit_take('exports', 'tenant:8');
SELECT h.* FROM rate_limit_take('exports', 'tenant:8') AS d, rate_limit_headers(d) AS h;
SELECT h.* FROM rate_limit_take('exports', 'tenant:7') AS d, rate_limit_headers(d) AS h;
-- The 0.2.0 form, by the policy's name, says the same.
SELECT h.* FROM rate_limit_take('exports', 'tenant:8') AS d, rate_limit_headers(d, 'exports') AS h;
SELECT h.* FROM rate_limit_take('exports', 'tenant:7') AS d, rate_limit_headers(d, 'exports') AS h;
COMMIT;
-- The transaction ended: every place is free again, with nothing to sweep.
SELECT * FROM rate_limit_check('exports', 'tenant:7', 3);
SELECT allowed, remaining FROM rate_limit_check('exports', 'tenant:7', 0);
SELECT h.* FROM rate_limit_check('exports', 'tenant:7') AS d, rate_limit_headers(d) AS h;

-- A rollback gives the places back, and so does ROLLBACK TO SAVEPOINT for
-- those taken after the savepoint.
BEGIN;
SELECT allowed, remaining FROM rate_limit_take('exports', 'tenant:7', 2);
SAVEPOINT s;
SELECT allowed, remaining FROM rate_limit_take('exports', 'tenant:7');
SELECT allowed, remaining FROM rate_limit_take('exports', 'tenant:7');
ROLLBACK TO SAVEPOINT s;
SELECT allowed, remaining FROM rate_limit_check('exports', 'tenant:7');
-- A take of more places than are free holds none of them.
SELECT allowed, remaining FROM rate_limit_take('exports', 'tenant:7', 2);
SELECT allowed, remaining FROM rate_limit_take('exports', 'tenant:7', 1);
ROLLBACK;
SELECT allowed, remaining FROM rate_limit_check('exports', 'tenant:7');

-- A statement that fails gives back what it took (its subtransaction, here).
BEGIN;
SELECT pg_temp.error_of($$SELECT rate_limit_take('exports', 'tenant:7', 3), 1 / 0$$);
SELECT allowed, remaining FROM rate_limit_check('exports', 'tenant:7');
COMMIT;

-- "2 a minute and at most 1 at once", all or nothing.
SELECT name FROM rate_limit_define('exports-rate', 2, '1 minute');
SELECT name FROM rate_limit_define_concurrency('exports-held', 1);
BEGIN;
SELECT allowed, retry_after, binding_name, remaining
  FROM rate_limit_take_all(ARRAY['exports-rate', 'exports-held'], ARRAY['t1', 't1']);
-- The place is held: denied by it, with no known wait, and the token the
-- rate limit would have taken is not taken.
SELECT d.allowed, d.retry_after, d.binding_name, d.remaining, h.*
  FROM rate_limit_take_all(ARRAY['exports-rate', 'exports-held'], ARRAY['t1', 't1']) AS d,
       rate_limit_headers(d) AS h;
SELECT key, balance FROM rate_limit_buckets('exports-rate');
-- Another key holds its own place and spends the rate limit's last token.
SELECT allowed, remaining
  FROM rate_limit_take_all(ARRAY['exports-held', 'exports-rate'], ARRAY['t2', 't1']);
COMMIT;
-- The places are back; the rate limit is spent: denied by it, with its
-- wait, and no place is held.
BEGIN;
SELECT allowed, retry_after, binding_name, remaining
  FROM rate_limit_take_all(ARRAY['exports-rate', 'exports-held'], ARRAY['t1', 't1']);
SELECT allowed, remaining FROM rate_limit_check('exports-held', 't1');
SELECT (d).decisions[2].allowed AS held_would_grant
  FROM rate_limit_take_all(ARRAY['exports-rate', 'exports-held'], ARRAY['t1', 't1']) AS d;
COMMIT;
-- Places named twice add up: 2 of 1 is refused as a cost.
SELECT pg_temp.error_of($$SELECT rate_limit_take_all(ARRAY['exports-held', 'exports-held'], ARRAY['t3', 't3'])$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take_all(ARRAY['exports-held'], ARRAY['t3'], ARRAY[0.5])$$);
SELECT rate_limit_drop('exports-rate'), rate_limit_drop('exports-held');

-- Report-only: a would-be denial is allowed, holds nothing and says so.
SELECT name, kind, enforce FROM rate_limit_define_concurrency('llm', 1, enforce => false);
BEGIN;
SELECT * FROM rate_limit_take('llm', 'team:1');
SELECT * FROM rate_limit_take('llm', 'team:1');
COMMIT;

-- Redefining turns a name into the other kind, in place.
SELECT name, rate, burst, kind FROM rate_limit_define('llm', 5, '1 minute');
SELECT allowed, remaining, retry_after FROM rate_limit_take('llm', 'team:1');
SELECT name, rate, burst, kind FROM rate_limit_define_concurrency('llm', 2);
BEGIN;
SELECT allowed, remaining, retry_after FROM rate_limit_take('llm', 'team:1');
COMMIT;

-- A place writes nothing: a read-only transaction holds places too.
BEGIN READ ONLY;
SELECT allowed, remaining FROM rate_limit_check('exports', 'tenant:7');
SELECT allowed, remaining FROM rate_limit_take('exports', 'tenant:7');
SELECT allowed, remaining FROM rate_limit_take_all(ARRAY['exports'], ARRAY['tenant:7'], ARRAY[2]);
SELECT allowed, remaining FROM rate_limit_take('exports', 'tenant:7');
COMMIT;

-- Errors (in a transaction block, where a take may hold places).
BEGIN;
SELECT pg_temp.error_of($$SELECT rate_limit_define_concurrency(NULL, 3)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define_concurrency('c', NULL)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define_concurrency('c', 0)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define_concurrency('c', 1001)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define_concurrency('', 1)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define_concurrency('c', 1, lease => '0 seconds')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define_concurrency('c', 1, storage => 'disk')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define_concurrency('c', 1, enforce => NULL)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take('exports', 'tenant:7', 1.5)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take('exports', 'tenant:7', 4)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_check('exports', 'tenant:7', -1)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take('exports', 'tenant:7', 'NaN')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_refund('exports', 'tenant:7', 1)$$);
COMMIT;

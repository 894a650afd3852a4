--
-- Every error: SQLSTATE, message, detail and hint, and nothing changed.
--
SET ratelimit.fixed_clock = 1000;

-- pg_temp.error_of(statement): the error a statement raises, field by field.
\i test/sql/include/error_of.sql

SELECT * FROM rate_limit_take('err', 'k', 1, 1, 5);

-- NULL arguments: 22004, whichever argument it is.
SELECT pg_temp.error_of($$SELECT rate_limit_take(NULL, 'k', 1, 1, 5)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take('err', NULL, 1, 1, 5)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take('err', 'k', NULL, 1, 5)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take('err', 'k', 1, NULL, 5)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take('err', 'k', 1, 1, NULL)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take('err', 'k', 1, 1, 5, NULL)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_check(NULL, 'k', 1, 1, 5)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_reset(NULL, 'k')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_reset('err', NULL)$$);
-- max_reserved NULL means no cap: not an error
SELECT allowed FROM rate_limit_check('err', 'k', 1, 1, 5, true, NULL);

-- Bad numbers: 22023.
SELECT pg_temp.error_of($$SELECT rate_limit_take('err', 'k', 'NaN', 1, 5)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take('err', 'k', '-1', 1, 5)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take('err', 'k', 'Infinity', 1, 5, true)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take('err', 'k', 1, 'NaN', 5)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take('err', 'k', 1, '-0.5', 5)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take('err', 'k', 1, 'Infinity', 5)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take('err', 'k', 1, 1, 0)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take('err', 'k', 1, 1, '-5')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take('err', 'k', 1, 1, '-Infinity')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take('err', 'k', 0, 1, 'NaN')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take('err', 'k', 1, 1, 5, true, '-1')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take('err', 'k', 1, 1, 5, true, 'NaN')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_check('err', 'k', 1, 1, 5, false, 'Infinity')$$);
-- a cost that can never be granted is an error, not a denial
SELECT pg_temp.error_of($$SELECT rate_limit_take('err', 'k', 6, 1, 5)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_check('err', 'k', 5.5, 1, 5)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take('err', 'k', 12, 1, 5, true, 6)$$);
-- exactly at the edge is no error (the bucket holds 4 tokens, so a denial)
SELECT allowed FROM rate_limit_check('err', 'k', 5, 1, 5);
SELECT allowed FROM rate_limit_check('err', 'k', 11, 1, 5, true, 6);

-- Names and keys: empty name 22023, over-long name or key 54000.
SELECT pg_temp.error_of($$SELECT rate_limit_take('', 'k', 1, 1, 5)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take(repeat('n', 257), 'k', 1, 1, 5)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take('err', repeat('k', 1025), 1, 1, 5)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_check('err', repeat('é', 513), 1, 1, 5)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_reset('err', repeat('k', 1025))$$);

-- None of the above changed the bucket.
SELECT tokens, last_refill = to_timestamp(1000) AS unchanged
    FROM ratelimit.buckets WHERE name = 'err';

-- Read-only transactions: take and reset refuse with 25006; check works.
BEGIN TRANSACTION READ ONLY;
SELECT pg_temp.error_of($$SELECT rate_limit_take('err', 'k', 1, 1, 5)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_reset('err', 'k')$$);
SELECT allowed, remaining FROM rate_limit_check('err', 'k', 1, 1, 5);
COMMIT;
SET default_transaction_read_only = on;
SELECT pg_temp.error_of($$SELECT rate_limit_take('err', 'k', 1, 1, 5)$$);
RESET default_transaction_read_only;

-- Privileges: any role may take and check; only granted roles may reset;
-- nobody but the owner may touch the table.
CREATE ROLE ratelimit_app NOLOGIN;
SET ROLE ratelimit_app;
SELECT allowed FROM rate_limit_take('err', 'app', 1, 1, 5);
SELECT allowed FROM rate_limit_check('err', 'app', 1, 1, 5);
SELECT pg_temp.error_of($$SELECT rate_limit_reset('err', 'app')$$);
SELECT pg_temp.error_of($$SELECT * FROM ratelimit.buckets$$);
SELECT pg_temp.error_of($$UPDATE ratelimit.buckets SET tokens = 100$$);
RESET ROLE;
GRANT EXECUTE ON FUNCTION rate_limit_reset(text, text) TO ratelimit_app;
SET ROLE ratelimit_app;
SELECT rate_limit_reset('err', 'app');
RESET ROLE;
REVOKE EXECUTE ON FUNCTION rate_limit_reset(text, text) FROM ratelimit_app;
DROP ROLE ratelimit_app;


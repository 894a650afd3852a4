--
-- The row types the functions return belong to the extension, but their
-- owner (a superuser) can alter them.  A function then refuses (55000) with a
-- hint to restore the type, instead of forming a row of the wrong shape (which
-- crashed the server).  Each change is undone, and the functions work again.
--
SET ratelimit.fixed_clock = 1000;
\i test/sql/include/error_of.sql
SELECT rate_limit_define('rt', 1, '1 second', 5);

-- A changed attribute type.
ALTER TYPE rate_limit_decision ALTER ATTRIBUTE remaining TYPE text;
SELECT pg_temp.error_of($$SELECT * FROM rate_limit_take('rt-x', 'k', 1, 1, 5)$$);
SELECT pg_temp.error_of($$SELECT * FROM rate_limit_check('rt-x', 'k', 1, 1, 5)$$);
SELECT pg_temp.error_of($$SELECT * FROM rate_limit_take('rt', 'k')$$);
SELECT pg_temp.error_of($$SELECT * FROM rate_limit_check('rt', 'k')$$);
SELECT pg_temp.error_of($$SELECT * FROM rate_limit_refund('rt', 'k', 1)$$);
SELECT pg_temp.error_of($$SELECT * FROM rate_limit_refund('rt-x', 'k', 1, 1, 5)$$);
SELECT pg_temp.error_of($$SELECT (rate_limit_take('rt', 'k')).allowed$$);
ALTER TYPE rate_limit_decision ALTER ATTRIBUTE remaining TYPE float8;
SELECT * FROM rate_limit_take('rt', 'k');

-- An attribute added, then dropped again: the dropped slot is skipped.
ALTER TYPE rate_limit_decision ADD ATTRIBUTE note text;
SELECT pg_temp.error_of($$SELECT * FROM rate_limit_take('rt', 'k')$$);
ALTER TYPE rate_limit_decision DROP ATTRIBUTE note;
SELECT * FROM rate_limit_take('rt', 'k');

-- An attribute dropped: restored by adding it back and re-adding the ones
-- after it, in order.
ALTER TYPE rate_limit_decision DROP ATTRIBUTE reset_after;
SELECT pg_temp.error_of($$SELECT * FROM rate_limit_take('rt', 'k')$$);
ALTER TYPE rate_limit_decision DROP ATTRIBUTE capacity, DROP ATTRIBUTE name,
    DROP ATTRIBUTE quota, DROP ATTRIBUTE per, DROP ATTRIBUTE refill_after,
    ADD ATTRIBUTE reset_after float8, ADD ATTRIBUTE capacity float8, ADD ATTRIBUTE name text,
    ADD ATTRIBUTE quota float8, ADD ATTRIBUTE per interval, ADD ATTRIBUTE refill_after float8;
SELECT * FROM rate_limit_take('rt', 'k');

-- The all-or-nothing row type.
ALTER TYPE rate_limit_all_decision ALTER ATTRIBUTE remaining TYPE text[];
SELECT pg_temp.error_of($$SELECT * FROM rate_limit_take_all(ARRAY['rt'], ARRAY['k'])$$);
ALTER TYPE rate_limit_all_decision ALTER ATTRIBUTE remaining TYPE float8[];
ALTER TYPE rate_limit_all_decision ALTER ATTRIBUTE binding_name TYPE varchar;
SELECT pg_temp.error_of($$SELECT * FROM rate_limit_take_all(ARRAY['rt'], ARRAY['k'])$$);
ALTER TYPE rate_limit_all_decision ALTER ATTRIBUTE binding_name TYPE text;
SELECT * FROM rate_limit_take_all(ARRAY['rt'], ARRAY['k']);

-- A change made while a call site has already formed rows (here a PL/pgSQL
-- expression, whose state lives for the transaction) is seen at its next
-- call: the descriptor cached for the call site is not reused blindly.
CREATE FUNCTION pg_temp.take_remaining() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    d record;
BEGIN
    d := rate_limit_take('rt', 'k', 0);
    RETURN d.remaining::text;
END
$$;
BEGIN;
SELECT pg_temp.take_remaining();
ALTER TYPE rate_limit_decision ALTER ATTRIBUTE remaining TYPE text;
SELECT pg_temp.error_of($$SELECT pg_temp.take_remaining()$$);
ROLLBACK;
PREPARE take_rt AS SELECT * FROM rate_limit_take('rt', 'k', 0);
EXECUTE take_rt;
ALTER TYPE rate_limit_decision ALTER ATTRIBUTE remaining TYPE text;
SELECT pg_temp.error_of($$EXECUTE take_rt$$);
ALTER TYPE rate_limit_decision ALTER ATTRIBUTE remaining TYPE float8;
EXECUTE take_rt;
SELECT pg_temp.take_remaining();

SELECT rate_limit_drop('rt');
SELECT rate_limit_reset('rt', 'k');

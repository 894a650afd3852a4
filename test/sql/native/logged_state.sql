--
-- rate_limit_set_logged: bucket state in a logged or an unlogged table,
-- switched explicitly, with every balance kept across the switch.
--
\set SHOW_CONTEXT never
SET ratelimit.fixed_clock = 1000;
SELECT relpersistence FROM pg_class WHERE oid = 'ratelimit.buckets'::regclass;
SELECT (rate_limit_take_explicit('ls', 'a', 3, 0, '1 second', 5)).remaining;

SELECT rate_limit_set_logged(true) AS changed;
SELECT c.relname, c.relpersistence FROM pg_class c
WHERE c.oid IN ('ratelimit.buckets'::regclass, 'ratelimit.buckets_pkey'::regclass) ORDER BY 1;
SELECT rate_limit_set_logged(true) AS changed;
-- The balance survived the rewrite; takes go on, in the caller's transaction.
SELECT (rate_limit_take_explicit('ls', 'a', 1, 0, '1 second', 5)).remaining;
BEGIN;
SELECT (rate_limit_take_explicit('ls', 'a', 1, 0, '1 second', 5)).remaining;
ROLLBACK;
SELECT (rate_limit_check_explicit('ls', 'a', 1, 0, '1 second', 5)).remaining;
SELECT (rate_limit_take_explicit('ls', 'new', 1, 0, '1 second', 5)).remaining;

SELECT rate_limit_set_logged(false) AS changed;
SELECT relpersistence FROM pg_class WHERE oid = 'ratelimit.buckets'::regclass;
SELECT (rate_limit_check_explicit('ls', 'a', 1, 0, '1 second', 5)).remaining;

SELECT rate_limit_set_logged(NULL);
CREATE ROLE ratelimit_durable NOLOGIN;
SET ROLE ratelimit_durable;
SELECT rate_limit_set_logged(true);
RESET ROLE;
DROP ROLE ratelimit_durable;

DELETE FROM ratelimit.buckets WHERE name = 'ls';
RESET ratelimit.fixed_clock;

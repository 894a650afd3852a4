--
-- ratelimit.policies is read by column name, with each column's type checked;
-- its primary key must be the one on name.  A table altered otherwise (by
-- its owner, a superuser) is refused with 55000 and a hint that says how to
-- undo the change, never to drop the extension.  Each change is rolled back.
--
SET ratelimit.fixed_clock = 1000;
\i test/sql/include/error_of.sql
SELECT rate_limit_define('shape', 1, '1 second', 5);

-- Columns the limiter does not read may be added: they change nothing.
BEGIN;
ALTER TABLE ratelimit.policies ADD COLUMN note text;
SELECT capacity FROM rate_limit_check('shape', 'k');
ROLLBACK;

-- A column of another type, renamed, or holding NULL.
BEGIN;
-- (rate_limit_policies reads the column: the view goes first, until ROLLBACK.)
ALTER EXTENSION ratelimit DROP VIEW rate_limit_policies;
DROP VIEW rate_limit_policies;
ALTER TABLE ratelimit.policies ALTER COLUMN jitter TYPE numeric;
SELECT pg_temp.error_of($$SELECT * FROM rate_limit_check('shape', 'k')$$);
ROLLBACK;
BEGIN;
ALTER TABLE ratelimit.policies RENAME COLUMN shards TO pieces;
SELECT pg_temp.error_of($$SELECT * FROM rate_limit_take('shape', 'k')$$);
ROLLBACK;
BEGIN;
ALTER TABLE ratelimit.policies ALTER COLUMN jitter DROP NOT NULL;
UPDATE ratelimit.policies SET jitter = NULL WHERE name = 'shape';
SELECT pg_temp.error_of($$SELECT * FROM rate_limit_take_all(ARRAY['shape'], ARRAY['k'])$$);
ROLLBACK;
BEGIN;
ALTER TABLE ratelimit.policies DROP CONSTRAINT policies_shards_check;
UPDATE ratelimit.policies SET shards = 0 WHERE name = 'shape';
SELECT pg_temp.error_of($$SELECT rate_limit_reset('shape', 'k')$$);
ROLLBACK;

-- The primary key dropped, or replaced by another.
BEGIN;
ALTER TABLE ratelimit.policies DROP CONSTRAINT policies_pkey;
SELECT pg_temp.error_of($$SELECT * FROM rate_limit_refund('shape', 'k', 1)$$);
ROLLBACK;
BEGIN;
ALTER TABLE ratelimit.policies DROP CONSTRAINT policies_pkey,
    ADD CONSTRAINT policies_pkey PRIMARY KEY (name, per);
SELECT pg_temp.error_of($$SELECT * FROM rate_limit_check('shape', 'k')$$);
ROLLBACK;

-- Without the table (renamed here, or an extension not yet updated) there
-- are no policies: explicit limits and resets work, policy calls raise 42704.
BEGIN;
ALTER TABLE ratelimit.policies RENAME TO policies_moved;
SELECT rate_limit_reset('shape', 'k');
SELECT allowed FROM rate_limit_take('shape-x', 'k', 1, 1, 5);
SELECT pg_temp.error_of($$SELECT * FROM rate_limit_check('shape', 'k')$$);
ROLLBACK;

-- ratelimit.buckets without its primary key, or no longer a table.
BEGIN;
ALTER TABLE ratelimit.buckets DROP CONSTRAINT buckets_pkey;
SELECT pg_temp.error_of($$SELECT * FROM rate_limit_take('shape-x', 'k', 1, 1, 5)$$);
ROLLBACK;
BEGIN;
ALTER TABLE ratelimit.buckets RENAME TO buckets_moved;
CREATE VIEW ratelimit.buckets AS SELECT * FROM ratelimit.buckets_moved;
SELECT pg_temp.error_of($$SELECT * FROM rate_limit_take('shape-x', 'k', 1, 1, 5)$$);
ROLLBACK;

-- Everything works again.
SELECT allowed, capacity FROM rate_limit_take('shape', 'k');
SELECT rate_limit_reset('shape', 'k');
SELECT rate_limit_drop('shape');

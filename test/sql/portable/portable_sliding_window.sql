--
-- The portable limiter keeps no sliding windows in this version: it
-- refuses to define one (0A000), storing nothing, rather than decide it as
-- a token bucket.
--
\i test/sql/include/error_of.sql
\set SHOW_CONTEXT never
SELECT pg_temp.error_of($$SELECT rate_limit_define_sliding_window('sw', 5, '10 seconds')$$);
SELECT count(*) FROM rate_limit_policies WHERE name = 'sw';
-- One restored from the native extension (the row as it stores it) is
-- refused by every call rather than decided as a token bucket, and stores
-- nothing.
INSERT INTO rl_policies (name, rate, per, burst, kind) VALUES ('sw', 5, '10 seconds', 5, 'sliding');
-- A key with a row already (its common case, portable/policy_take.sql, too).
INSERT INTO rl_buckets (name, key, tokens, stamp_us, full_at_us, blocked_until_us)
VALUES ('sw', 'kept', 5, 0, 0, -9223372036854775808);
SELECT pg_temp.error_of($$SELECT rate_limit_take('sw', 'kept')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take('sw', 'k')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_check('sw', 'k')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_refund('sw', 'k', 1)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take_all(ARRAY['sw'], ARRAY['k'])$$);
SELECT key, tokens FROM rl_buckets WHERE name = 'sw';
DELETE FROM rl_buckets WHERE name = 'sw';
SELECT rate_limit_drop('sw');

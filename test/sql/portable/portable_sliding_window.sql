--
-- Sliding windows in the portable limiter: the calls of
-- test/sql/include/sliding_window.sql, with the native extension's answers
-- (test/sql/native/sliding_window.sql), in the portable limiter's table
-- (portable/sliding.sql).
--
\i test/sql/include/error_of.sql
\set SHOW_CONTEXT never
\i test/sql/include/sliding_window.sql
SELECT name, storage FROM rate_limit_policies WHERE name LIKE 'sw%' ORDER BY name;
SELECT rate_limit_drop('sw'), rate_limit_drop('sw-bucket');
-- The memory engine is the native extension's: a sliding window kept there
-- is refused (0A000), and nothing is stored.
SELECT pg_temp.error_of($$SELECT rate_limit_define_sliding_window('sw', 5, '10 seconds', 'memory')$$);
SELECT count(*) FROM rate_limit_policies WHERE name = 'sw';

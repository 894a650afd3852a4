--
-- Sliding windows in the memory engine: every policy of
-- test/sql/include/sliding_window.sql is stored with storage 'memory'
-- (memory_setup's trigger), and every answer is the table engine's
-- (test/sql/native/sliding_window.sql).
--
\i test/sql/include/error_of.sql
\set SHOW_CONTEXT never
\i test/sql/include/sliding_window.sql
SELECT name, storage FROM rate_limit_policies WHERE name LIKE 'sw%' ORDER BY name;
SELECT rate_limit_drop('sw'), rate_limit_drop('sw-bucket');

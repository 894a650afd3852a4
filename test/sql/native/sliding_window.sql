--
-- Sliding windows in the table engine: the calls of
-- test/sql/include/sliding_window.sql (the memory engine gives the same
-- answers: test/sql/memory/memory_sliding_window.sql).  The row itself:
-- sliding_window_table.
--
\i test/sql/include/error_of.sql
\set SHOW_CONTEXT never
\i test/sql/include/sliding_window.sql
SELECT name, storage FROM rate_limit_policies WHERE name LIKE 'sw%' ORDER BY name;
SELECT rate_limit_drop('sw'), rate_limit_drop('sw-bucket');

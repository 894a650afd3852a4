--
-- The portable limiter keeps no sliding windows in this version: it
-- refuses to define one (0A000), storing nothing, rather than decide it as
-- a token bucket.
--
\i test/sql/include/error_of.sql
\set SHOW_CONTEXT never
SELECT pg_temp.error_of($$SELECT rate_limit_define_sliding_window('sw', 5, '10 seconds')$$);
SELECT count(*) FROM rate_limit_policies WHERE name = 'sw';

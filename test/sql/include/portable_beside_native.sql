-- test/sql/include/portable_beside_native.sql (not echoed)
\set ECHO none
-- Included by regression tests (\i) that run the portable limiter beside
-- the native extension: installs portable/ratelimit.sql in a schema of its
-- own, :schema, and makes its clock read the seconds held by the setting
-- :clock (the test's own, set as the native fixed clock is:
-- current_setting shows a float8 setting to six digits only).  Only the
-- schema's owner can replace the function; callers cannot.  The script
-- leaves ON_ERROR_STOP on; the test gets the harness's default back, so
-- that it shows its errors.
\set SHOW_CONTEXT never
CREATE SCHEMA :"schema";
SET search_path = :"schema";
\i portable/ratelimit.sql
\set ON_ERROR_STOP 0
RESET search_path;
SELECT pg_catalog.format($f$CREATE OR REPLACE FUNCTION %I.rl_now() RETURNS bigint
LANGUAGE sql VOLATILE
AS $$ SELECT ((pg_catalog.current_setting(%L)::float8 - 946684800) * 1000000)::bigint $$$f$, :'schema', :'clock') \gexec
\set ECHO all

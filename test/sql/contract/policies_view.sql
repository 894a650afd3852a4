--
-- rate_limit_policies: the stored policies, shown to roles that may execute
-- rate_limit_define and to superusers; other roles see no rows (and still
-- cannot read ratelimit.policies).
--
\i test/sql/include/error_of.sql
SELECT name, rate, per, burst FROM rate_limit_define('view-a', 5, '1 minute', burst => 3);
SELECT name, rate, per, burst FROM rate_limit_define('view-b', 100, '1 hour', initial => 10,
                                                      shards => 2, max_reserved => 50);
SELECT * FROM rate_limit_policies WHERE name LIKE 'view-%' ORDER BY name;
-- A security barrier: no function of a caller's runs on rows before the
-- privilege check.
SELECT reloptions FROM pg_class WHERE oid = 'rate_limit_policies'::regclass;

CREATE ROLE ratelimit_view_manager NOLOGIN;
CREATE ROLE ratelimit_view_app NOLOGIN;
GRANT EXECUTE ON FUNCTION rate_limit_define(text, float8, interval, float8, float8, float8,
                                            boolean, interval, float8, integer, float8, interval, text, boolean)
    TO ratelimit_view_manager;

SET ROLE ratelimit_view_manager;
SELECT name, rate, per, burst, max_reserved FROM rate_limit_policies
 WHERE name LIKE 'view-%' ORDER BY name;
RESET ROLE;

SET ROLE ratelimit_view_app;
SELECT count(*) AS visible FROM rate_limit_policies;
SELECT pg_temp.error_of($$SELECT count(*) FROM ratelimit.policies$$) ~ '^42501' AS table_refused;
RESET ROLE;

-- Revoking the grant hides the rows again.
REVOKE EXECUTE ON FUNCTION rate_limit_define(text, float8, interval, float8, float8, float8,
                                             boolean, interval, float8, integer, float8, interval, text, boolean)
    FROM ratelimit_view_manager;
SET ROLE ratelimit_view_manager;
SELECT count(*) AS visible FROM rate_limit_policies;
RESET ROLE;

DROP ROLE ratelimit_view_manager;
DROP ROLE ratelimit_view_app;
SELECT rate_limit_drop('view-a');
SELECT rate_limit_drop('view-b');

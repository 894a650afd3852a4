--
-- rate_limit_define in 0.3.0: it returns the stored policy (with the columns
-- the table derives), takes max_reserved, and refuses names the RateLimit
-- header fields cannot carry (0.2.0 stored them, and every header value of
-- the policy then failed).
--
\i test/sql/include/error_of.sql

-- The stored row, generated columns included; max_reserved 0 by default.
SELECT * FROM rate_limit_define('define-0.3', 10, '1 minute');
-- Replacing a policy returns the new row, as stored.
CREATE TEMP TABLE returned AS
    SELECT * FROM rate_limit_define('define-0.3', 5, '1 second', 20, 4, 0.25, false, NULL, 1, 4, 12.5);
SELECT * FROM returned;
SELECT row(r.*) IS NOT DISTINCT FROM row(p.*) AS returned_as_stored
  FROM returned AS r, ratelimit.policies AS p WHERE p.name = 'define-0.3';
SELECT name, fixed_window, window_start, window_us, window_start_us, max_reserved
  FROM rate_limit_define('define-0.3', 100, '1 hour', fixed_window => true,
                         window_start => '15 minutes', max_reserved => 50);
SELECT (rate_limit_define('define-0.3', 1, max_reserved => 0)).max_reserved;
SELECT name, rate, per, burst, max_reserved FROM ratelimit.policies WHERE name = 'define-0.3';

-- Names are written into the header fields as structured-field strings:
-- printable ASCII only (quotes and backslashes are escaped there).
SELECT name FROM rate_limit_define(' ', 1);
SELECT name FROM rate_limit_define('~', 1);
SELECT name FROM rate_limit_define('say "hi" \ bye', 1);
SELECT pg_temp.error_of($$SELECT rate_limit_define('clé', 1)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define(E'tab\there', 1)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define(E'line\nbreak', 1)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define(E'del\x7f', 1)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define('😀', 1)$$);
-- (The length is checked first, in bytes, as in 0.2.0.)
SELECT pg_temp.error_of($$SELECT rate_limit_define(repeat('é', 129), 1)$$);
SELECT octet_length(name) FROM rate_limit_define(repeat('x', 256), 1);
SELECT count(*) AS refused_stored FROM ratelimit.policies WHERE name !~ '^[ -~]+$';

-- max_reserved: the most tokens a key may owe, finite and not negative.
SELECT pg_temp.error_of($$SELECT rate_limit_define('define-0.3', 1, max_reserved => NULL)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define('define-0.3', 1, max_reserved => -1)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define('define-0.3', 1, max_reserved => 'NaN')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define('define-0.3', 1, max_reserved => 'Infinity')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_define('define-0.3', 1, max_reserved => '-Infinity')$$);
SELECT max_reserved FROM ratelimit.policies WHERE name = 'define-0.3';
-- The table holds the same rule.
-- (The portable limiter's table is rl_policies: the same constraint.)
SELECT replace(pg_temp.error_of($$INSERT INTO ratelimit.policies (name, rate, per, burst, max_reserved)
                                  VALUES ('direct', 1, '1 second', 1, -1)$$),
               'relation "rl_policies"', 'relation "policies"') AS error_of;

-- A role granted EXECUTE defines (the function runs as its owner), and gets
-- the stored row back; a role without the grant does not.
CREATE ROLE ratelimit_define_admin NOLOGIN;
CREATE ROLE ratelimit_define_app NOLOGIN;
GRANT EXECUTE ON FUNCTION rate_limit_define(text, float8, interval, float8, float8, float8, boolean, interval, float8, integer, float8, interval, text, boolean)
    TO ratelimit_define_admin;
SET ROLE ratelimit_define_admin;
SELECT name, rate, per, burst, tokens_per_second, max_reserved
  FROM rate_limit_define('define-granted', 3, '1 hour', max_reserved => 2);
SELECT (rate_limit_define('define-granted', 6, '1 hour')).tokens_per_second;
RESET ROLE;
SET ROLE ratelimit_define_app;
SELECT pg_temp.error_of($$SELECT rate_limit_define('define-granted', 1000, '1 second')$$);
RESET ROLE;
SELECT name, rate, per, max_reserved FROM ratelimit.policies WHERE name = 'define-granted';

SELECT rate_limit_drop(name) FROM ratelimit.policies ORDER BY name;
REVOKE EXECUTE ON FUNCTION rate_limit_define(text, float8, interval, float8, float8, float8, boolean, interval, float8, integer, float8, interval, text, boolean)
    FROM ratelimit_define_admin;
DROP ROLE ratelimit_define_admin, ratelimit_define_app;

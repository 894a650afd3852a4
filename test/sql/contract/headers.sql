--
-- rate_limit_headers(): header values of draft-ietf-httpapi-ratelimit-headers-10,
-- checked against the draft's own examples.
--
SET ratelimit.fixed_clock = 1000;
\i test/sql/include/error_of.sql

-- The draft's policy "default" of 100 quota units per minute, and its
-- example state after 50 of them are used: RateLimit-Policy:
-- "default";q=100;w=60 and RateLimit: "default";r=50;t=30.
SELECT rate_limit_define('default', 100, '1 minute', 100);
SELECT h.* FROM rate_limit_take('default', 'client', 50) AS d, LATERAL rate_limit_headers(d, 'default') AS h;

-- A denial: t and Retry-After point at the same moment (draft section 5).
SELECT d.allowed, d.retry_after AS exact_wait, h.*
  FROM rate_limit_take('default', 'client', 60) AS d, LATERAL rate_limit_headers(d, 'default') AS h;

-- Several policies in one field, as in the draft's list example
-- ("burst";q=100;w=60, "daily";q=1000;w=86400): one item per policy.
SELECT rate_limit_define('burst', 100, '1 minute', 100);
SELECT rate_limit_define('daily', 1000, '1 day', 1000);
SELECT string_agg(h.ratelimit_policy, ', ' ORDER BY p.ord) AS "RateLimit-Policy"
  FROM (VALUES ('burst', 1), ('daily', 2)) AS p(name, ord),
       LATERAL rate_limit_check(p.name, 'client', 0) AS d,
       LATERAL rate_limit_headers(d, p.name) AS h;

-- Without a policy: pass the rate used for the decision.
SELECT h.* FROM rate_limit_take('adhoc', 'client', 3, 0.5, 10) AS d,
    LATERAL rate_limit_headers(d, 'adhoc', 0.5) AS h;
-- A reserved grant: Retry-After says when the reserved work may start.
SELECT h.* FROM rate_limit_take('adhoc', 'client', 12, 0.5, 10, reserve => true) AS d,
    LATERAL rate_limit_headers(d, 'adhoc', 0.5) AS h;
-- rate 0: no window, and a denial that can never succeed has no t and no
-- Retry-After; fractional counts are floored (q, r) and waits ceiled (t).
SELECT h.* FROM rate_limit_take('fixed', 'client', 2.5, 0, 3.75) AS d,
    LATERAL rate_limit_headers(d, 'fixed', 0) AS h;
SELECT h.* FROM rate_limit_take('fixed', 'client', 2, 0, 3.75) AS d,
    LATERAL rate_limit_headers(d, 'fixed', 0) AS h;
-- Names are structured-field strings: quotes and backslashes escaped.
SELECT h.ratelimit_policy FROM rate_limit_check('x', 'client', 0, 1, 5) AS d,
    LATERAL rate_limit_headers(d, 'say "hi" \ bye', 1) AS h;

SELECT pg_temp.error_of($$SELECT rate_limit_headers(d, 'clé', 1) FROM rate_limit_check('x', 'c', 0, 1, 5) AS d$$);
SELECT pg_temp.error_of($$SELECT rate_limit_headers(d, 'undefined') FROM rate_limit_check('x', 'c', 0, 1, 5) AS d$$);
SELECT pg_temp.error_of($$SELECT rate_limit_headers(NULL, 'default')$$);
SELECT pg_temp.error_of($$SELECT rate_limit_headers(d, 'x', -1) FROM rate_limit_check('x', 'c', 0, 1, 5) AS d$$);
-- Any role may build headers (the policy's rate is read on its behalf).
CREATE ROLE ratelimit_headers_app NOLOGIN;
SET ROLE ratelimit_headers_app;
SELECT h.ratelimit_policy FROM rate_limit_check('default', 'client', 0) AS d,
    LATERAL rate_limit_headers(d, 'default') AS h;
RESET ROLE;
DROP ROLE ratelimit_headers_app;

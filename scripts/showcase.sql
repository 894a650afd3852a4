-- A tour of ratelimit, run by scripts/demo.  To run it yourself:
--     psql -X -v ON_ERROR_STOP=1 -f scripts/showcase.sql
-- as a role that may define policies, in a database where CREATE EXTENSION
-- ratelimit has been done.  It defines policies named 'demo-*' and drops
-- them, and their buckets, at the end.  Takes about 2 seconds.

\pset footer off
\pset null '(null)'

-- Numbers are rounded to milliseconds for reading.
\set decision 'allowed, round(remaining::numeric, 3) AS remaining, round(retry_after::numeric, 3) AS retry_after'

\echo
\echo '== 1. Policies: a limit is defined once, by name; tiers are just policies'
\echo '      rate_limit_define(name, rate, per, burst => ...) returns what it stored'
\echo
SELECT name, rate, per, burst
FROM rate_limit_define('demo-free', 5, '1 second', burst => 5)
UNION ALL
SELECT name, rate, per, burst
FROM rate_limit_define('demo-pro', 50, '1 second', burst => 20);

\echo '== 2. A burst: six requests at once from a free user and a pro user'
\echo '      rate_limit_take(policy, key): a new key starts full; a denial changes nothing'
\echo
WITH takes AS MATERIALIZED (
    SELECT n, tier, rate_limit_take(tier, 'user:42', 1) AS d
    FROM generate_series(1, 6) AS n, (VALUES ('demo-free'), ('demo-pro')) AS t(tier)
)
SELECT tier, n AS request, (d).allowed,
       round((d).remaining::numeric, 3) AS remaining,
       round((d).retry_after::numeric, 3) AS retry_after
FROM takes ORDER BY tier, n;

\echo '== 3. Every decision carries its HTTP header values: RateLimit-Policy, RateLimit'
\echo '      and, on a denial, Retry-After (draft-ietf-httpapi-ratelimit-headers)'
\echo
SELECT d.allowed, h.ratelimit_policy, h.ratelimit, h.retry_after AS "Retry-After"
FROM rate_limit_take('demo-free', 'user:42') AS d, LATERAL rate_limit_headers(d) AS h;

\echo '== 4. After 0.5 s the free bucket has refilled 2.5 tokens: allowed again, the fraction kept'
SELECT pg_sleep(0.5) \g /dev/null
\echo
SELECT :decision FROM rate_limit_take('demo-free', 'user:42');

\echo '== 5. Reservation by policy: an LLM budget of 600 tokens a minute, 100 at once,'
\echo '      that may run up to 200 ahead.  With max_wait a call is granted when the'
\echo '      bucket holds too little, if its work can start within max_wait:'
\echo '      retry_after says when.  Beyond the debt allowed or the wait accepted: denied.'
\echo
SELECT name, rate, per, burst, max_reserved
FROM rate_limit_define('demo-llm', 600, '1 minute', burst => 100, max_reserved => 200);
SELECT step.call, :decision
FROM (VALUES (1, 'take 80 tokens',                         80, '0 seconds'::interval),
             (2, 'reserve 80 more, waiting up to 10 s',    80, '10 seconds'),
             (3, 'reserve 80 more, waiting up to 2 s',     80, '2 seconds'),
             (4, 'reserve 150 more, waiting up to 1 min', 150, '1 minute')) AS step(n, call, cost, max_wait)
CROSS JOIN LATERAL rate_limit_take('demo-llm', 'team:7', step.cost, step.max_wait)
ORDER BY step.n;

\echo '== 6. The reserved call used only 25 of its 80 tokens: the rest is refunded'
\echo
SELECT :decision FROM rate_limit_refund('demo-llm', 'team:7', 80 - 25);

\echo '== 7. Several limits, all or nothing: a request limit per user and a global'
\echo '      cap, taken together; when one denies, none is taken'
\echo
SELECT name FROM rate_limit_define('demo-global', 3, '1 minute', fixed_window => true) \g /dev/null
SELECT n AS request, d.allowed, d.binding_name, d.remaining, h.ratelimit
FROM generate_series(1, 4) AS n,
     LATERAL rate_limit_take_all(ARRAY['demo-pro', 'demo-global'],
                                 ARRAY['user:' || n, ''], NULL) AS d,
     LATERAL rate_limit_headers(d) AS h;

\echo '== 8. Consumption belongs to the transaction: ROLLBACK gives the tokens back'
\echo
BEGIN;
SELECT 'inside the transaction: take 3' AS call, :decision
FROM rate_limit_take('demo-pro', 'ip:192.0.2.1', 3);
ROLLBACK;
SELECT 'after ROLLBACK: look (cost 0)' AS call, :decision
FROM rate_limit_check('demo-pro', 'ip:192.0.2.1', 0);

-- Forget the demo's policies and buckets.
SELECT count(*) FILTER (WHERE rate_limit_reset(b.name, b.key)) AS buckets_forgotten
FROM (VALUES ('demo-free', 'user:42'), ('demo-pro', 'user:42'), ('demo-llm', 'team:7'),
             ('demo-global', ''), ('demo-pro', 'user:1'), ('demo-pro', 'user:2'),
             ('demo-pro', 'user:3'), ('demo-pro', 'user:4')) AS b(name, key) \g /dev/null
SELECT rate_limit_drop(p) FROM unnest(ARRAY['demo-free', 'demo-pro', 'demo-llm', 'demo-global']) AS p \g /dev/null

-- A tour of ratelimit, run by scripts/demo.  To run it yourself:
--     psql -X -v ON_ERROR_STOP=1 -f scripts/showcase.sql
-- in a database where CREATE EXTENSION ratelimit has been done.  It uses
-- buckets named 'demo:*' and forgets them at the end.  Takes about 2 seconds.

\pset footer off
\pset null '(null)'

-- Every call returns one row: allowed, remaining (tokens left; negative =
-- reserved debt), retry_after (seconds until this call would succeed, or
-- until reserved work may start), reset_after (seconds until the bucket is
-- full) and capacity.  Numbers are rounded to milliseconds for reading.
\set decision 'allowed, round(remaining::numeric, 3) AS remaining, round(retry_after::numeric, 3) AS retry_after, round(reset_after::numeric, 3) AS reset_after, capacity'

\echo
\echo '== 1. A burst: six calls at once on a bucket of 5 tokens that refills at 2 per second'
\echo '      rate_limit_take(name, key, cost, rate, burst): a new key starts full'
\echo
WITH takes AS MATERIALIZED (
    SELECT n, rate_limit_take('demo:api', 'user:42', 1, 2, 5) AS d
    FROM generate_series(1, 6) AS n
)
SELECT n AS call, (d).allowed,
       round((d).remaining::numeric, 3) AS remaining,
       round((d).retry_after::numeric, 3) AS retry_after
FROM takes ORDER BY n;

\echo '== 2. Asking again right away: denied, and retry_after says for how long'
\echo '      (a denial changes nothing: the bucket keeps refilling as if it had not happened)'
\echo
SELECT :decision FROM rate_limit_take('demo:api', 'user:42', 1, 2, 5);

\echo '== 3. After 1.25 s the bucket has refilled 2.5 tokens: allowed again, the fraction is kept'
SELECT pg_sleep(1.25) \g /dev/null
\echo
SELECT :decision FROM rate_limit_take('demo:api', 'user:42', 1, 2, 5);

\echo '== 4. rate_limit_check answers the same question without consuming anything'
\echo '      (remaining: what a take of that cost would leave)'
\echo
SELECT 'check 1 token' AS call, :decision FROM rate_limit_check('demo:api', 'user:42', 1, 2, 5)
UNION ALL
SELECT 'check 1 token again', :decision FROM rate_limit_check('demo:api', 'user:42', 1, 2, 5)
UNION ALL
SELECT 'check 3 tokens', :decision FROM rate_limit_check('demo:api', 'user:42', 3, 2, 5);

\echo '== 5. Reservation: an export queue that refills 1 token per second, burst 5'
\echo '      reserve => true lets the bucket go negative: the call is granted now, and'
\echo '      retry_after says when the reserved work may start; max_reserved caps the debt'
\echo
SELECT step.call, :decision
FROM (VALUES (1, 'take all 5 tokens',             5, false),
             (2, 'reserve 8 more',                8, true),
             (3, 'reserve 3 more (debt 11 > 10)', 3, true)) AS step(n, call, cost, reserve)
CROSS JOIN LATERAL rate_limit_take('demo:export', 'tenant:7', step.cost, 1, 5,
                                   reserve => step.reserve, max_reserved => 10)
ORDER BY step.n;

\echo '== 6. Consumption belongs to the transaction: ROLLBACK gives the tokens back'
\echo
BEGIN;
SELECT 'inside the transaction: take 3' AS call, :decision
FROM rate_limit_take('demo:login', 'ip:192.0.2.1', 3, 2, 5);
ROLLBACK;
SELECT 'after ROLLBACK: look (cost 0)' AS call, :decision
FROM rate_limit_check('demo:login', 'ip:192.0.2.1', 0, 2, 5);

\echo '== 7. rate_limit_reset forgets a bucket: the next call finds it full'
\echo
SELECT rate_limit_reset('demo:api', 'user:42') AS "reset user:42";
SELECT :decision FROM rate_limit_take('demo:api', 'user:42', 1, 2, 5);

SELECT rate_limit_reset('demo:api', 'user:42') AND rate_limit_reset('demo:export', 'tenant:7')
       AS "forgot the demo buckets" \g /dev/null

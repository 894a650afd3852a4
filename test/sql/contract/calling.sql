--
-- What SQL itself decides about a call: a take in FROM whose arguments are
-- all constants is evaluated once, however many rows drive it (a take per
-- row needs an argument that refers to the row); and the header values of a
-- take that is then rolled back describe that take, not the bucket the
-- rollback leaves.
--
SET ratelimit.fixed_clock = 1000;
SELECT (rate_limit_define('calling', 10, '1 minute')).name;

-- Five rows, constant arguments: one token taken, its decision five times.
SELECT g, d.allowed, d.remaining
  FROM generate_series(1, 5) AS g, LATERAL rate_limit_take('calling', 'constant') AS d;
SELECT remaining FROM rate_limit_check('calling', 'constant', 0);
-- An argument from the driving row: a take per row, here 2 + 2 + 1 tokens
-- of one key (the same cost twice is still two takes), and one key per row.
SELECT r.n, d.allowed, d.remaining
  FROM (VALUES (1, 2.0), (2, 2.0), (3, 1.0)) AS r(n, cost),
       LATERAL rate_limit_take('calling', 'per-row', r.cost) AS d
 ORDER BY r.n;
SELECT remaining FROM rate_limit_check('calling', 'per-row', 0);
SELECT g, d.allowed, d.remaining
  FROM generate_series(1, 3) AS g, LATERAL rate_limit_take('calling', 'user:' || g) AS d
 ORDER BY g;

-- A take's header values, then a rollback: the tokens come back, the values
-- computed before it still count them as taken; a check afterwards gives
-- the values of the bucket as it is.
BEGIN;
SELECT d.allowed, d.remaining, h.ratelimit AS sent
  FROM rate_limit_take('calling', 'rolled-back', 3) AS d, LATERAL rate_limit_headers(d) AS h \gset
ROLLBACK;
SELECT :'allowed' AS allowed, :'remaining' AS remaining, :'sent' AS sent,
       d.remaining AS remaining_now, h.ratelimit AS ratelimit_now
  FROM rate_limit_check('calling', 'rolled-back', 0) AS d, LATERAL rate_limit_headers(d) AS h;

DELETE FROM ratelimit.buckets WHERE name = 'calling';
SELECT rate_limit_drop('calling');
RESET ratelimit.fixed_clock;

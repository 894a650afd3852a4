-- test/sql/include/calls_0_2_0.sql: included by old_signatures.sql.
-- Every signature 0.2.0 added, with its defaults and with every argument;
-- the columns of the 0.2.0 decisions.  Leaves no policy or bucket behind.
SELECT count(*) AS defined FROM rate_limit_define('old-policy', 10);
SELECT count(*) AS defined FROM rate_limit_define('old-minute', 6, '1 minute');
SELECT count(*) AS defined FROM rate_limit_define('old-burst', 6, '1 minute', 3);
SELECT count(*) AS defined FROM rate_limit_define('old-initial', 6, '1 minute', 3, 1);
SELECT count(*) AS defined FROM rate_limit_define('old-all', 6, '1 minute', 4, 2, 0, false, NULL, 0, 1);
SELECT count(*) AS defined FROM rate_limit_define('old-window', 60, '1 hour', 10, NULL, 0, true, '0 seconds', 0, 1);
SELECT count(*) AS defined FROM rate_limit_define('old-named', 1, per => '1 second', floor_rate => 0.5, shards => 2);
SELECT name, rate, per, burst, initial, jitter, fixed_window, window_start, floor_rate, shards
  FROM ratelimit.policies WHERE name LIKE 'old-%' ORDER BY name;
SELECT allowed, remaining, retry_after, reset_after, capacity FROM rate_limit_take('old-burst', 'k');
SELECT allowed, remaining, retry_after, reset_after, capacity FROM rate_limit_take('old-burst', 'k', 2);
SELECT allowed, remaining, retry_after, reset_after, capacity FROM rate_limit_take('old-burst', 'k', 1);
SELECT allowed, remaining, retry_after, reset_after, capacity FROM rate_limit_check('old-initial', 'k');
SELECT allowed, remaining, retry_after, reset_after, capacity FROM rate_limit_check('old-initial', 'k', 2);
SELECT allowed, remaining, retry_after, reset_after, capacity FROM rate_limit_take('old-window', 'k', 4);
SELECT allowed, remaining, retry_after, reset_after, capacity FROM rate_limit_take('old-named', 'k', 1);
SELECT allowed, remaining, retry_after, reset_after, capacity FROM rate_limit_refund('old-burst', 'k', 2);
SELECT allowed, remaining, retry_after, reset_after, capacity FROM rate_limit_refund('old-explicit', 'k', 1, 1, 5);
SELECT allowed, retry_after, binding_name, binding_key, remaining
  FROM rate_limit_take_all(ARRAY['old-all', 'old-window'], ARRAY['k', 'k']);
SELECT allowed, retry_after, binding_name, binding_key, remaining
  FROM rate_limit_take_all(ARRAY['old-all', 'old-window'], ARRAY['k', 'k'], ARRAY[3, 1]);
SELECT h.* FROM rate_limit_check('old-minute', 'k', 0) AS d, LATERAL rate_limit_headers(d, 'old-minute') AS h;
SELECT h.* FROM rate_limit_take('old-all', 'k', 1) AS d, LATERAL rate_limit_headers(d, 'old-all') AS h;
SELECT h.* FROM rate_limit_take('old-explicit', 'k', 3, 1, 5) AS d, LATERAL rate_limit_headers(d, 'old-explicit', 1) AS h;
SELECT rate_limit_reset(name, 'k') FROM ratelimit.policies WHERE name LIKE 'old-%' ORDER BY name;
SELECT rate_limit_reset('old-explicit', 'k');
SELECT rate_limit_drop('old-policy');
SELECT rate_limit_drop(name) FROM ratelimit.policies WHERE name LIKE 'old-%' ORDER BY name;

--
-- A policy governs its buckets: a call that passes a rate and burst of its
-- own cannot refill them or lock them out, whoever makes it, and no call can
-- leave a balance that is not a finite number.
--
SET ratelimit.fixed_clock = 1000;
\i test/sql/include/error_of.sql

SELECT rate_limit_define('gov-login', 5, '15 minutes');
SELECT allowed, remaining FROM rate_limit_take('gov-login', 'alice');

-- Refilling with a huge rate and burst, reserving a debt that cannot be
-- repaid, reading or refunding with made-up parameters: all refused.
SELECT pg_temp.error_of($$SELECT rate_limit_take('gov-login', 'alice', 5e-324, 1e308, 1e308)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take('gov-login', 'alice', 1e308, 1, 1, reserve => true)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_check('gov-login', 'alice', 1, 1e308, 1e308)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_refund('gov-login', 'alice', 5, 1, 5)$$);
-- A key the policy has not seen yet is governed just the same.
SELECT pg_temp.error_of($$SELECT rate_limit_take('gov-login', 'nobody', 1, 100, 100)$$);
SELECT key, tokens FROM ratelimit.buckets WHERE name = 'gov-login' ORDER BY key;

-- A role with only the default grants can at most exhaust the burst.
CREATE ROLE ratelimit_gov_app NOLOGIN;
SET ROLE ratelimit_gov_app;
SELECT count(*) FILTER (WHERE d.allowed) AS granted
  FROM generate_series(1, 10) AS g, LATERAL rate_limit_take('gov-login', 'bob', 1 + 0 * g) AS d;
SELECT pg_temp.error_of($$SELECT rate_limit_take('gov-login', 'bob', 0, 1e308, 1e308)$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take_all(ARRAY['gov-login'], ARRAY['bob'], ARRAY[1e308])$$);
SELECT pg_temp.error_of($$SELECT rate_limit_reset('gov-login', 'bob')$$);
SELECT allowed, remaining FROM rate_limit_check('gov-login', 'bob');
RESET ROLE;
DROP ROLE ratelimit_gov_app;

-- The rows of a sharded policy are governed as well.
SELECT rate_limit_define('gov-sharded', 10, '1 second', 10, shards => 2);
SELECT allowed FROM rate_limit_take('gov-sharded', 'k');
SELECT pg_temp.error_of($$SELECT rate_limit_take('gov-sharded', E'k\x1f0', 1, 1e308, 1e308)$$);

-- Once the policy is dropped, the name is free for explicit parameters.
SELECT rate_limit_drop('gov-sharded');
SELECT allowed, remaining FROM rate_limit_take('gov-sharded', 'k', 1, 1, 3);

-- Reserving: a debt that would overflow float8 is denied and writes nothing.
SELECT allowed, remaining FROM rate_limit_take('gov-explicit', 'k', 1e308, 1, 1, reserve => true);
SELECT allowed, remaining FROM rate_limit_take('gov-explicit', 'k', 1e308, 1, 1, reserve => true);
SELECT allowed, remaining FROM rate_limit_take('gov-explicit', 'k', 1.7976931348623157e308, 1, 1, reserve => true);
SELECT tokens, tokens > '-Infinity' AS finite FROM ratelimit.buckets WHERE name = 'gov-explicit';

-- Waits are finite for any positive rate, however slow: Infinity means never.
SELECT allowed, retry_after > 1e300 AS long, retry_after < 'Infinity' AS finite,
       reset_after > 1e300 AS long_reset, reset_after < 'Infinity' AS finite_reset
  FROM rate_limit_check('gov-explicit', 'k', 0, 1, 1);
SELECT allowed, reset_after > 1e300 AS long_reset, reset_after < 'Infinity' AS finite_reset
  FROM rate_limit_take('gov-explicit', 'slow', 1e300, 1e-300, 1e300);
SELECT allowed, retry_after >= 1e300 AS long, retry_after < 'Infinity' AS finite
  FROM rate_limit_take('gov-explicit', 'slow', 1, 1e-300, 1e300);
SELECT allowed, retry_after, reset_after FROM rate_limit_take('gov-explicit', 'never', 1, 0, 1);
SELECT retry_after, reset_after FROM rate_limit_take('gov-explicit', 'never', 1, 0, 1);

SELECT rate_limit_drop('gov-login');
RESET ratelimit.fixed_clock;

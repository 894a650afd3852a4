--
-- rate_limit_buckets: the buckets of one limit, as takes see them.
--
SET ratelimit.fixed_clock = 1000;
SELECT (rate_limit_define('bl-policy', 1, '1 second', 4)).name;
SELECT (rate_limit_define('bl-sharded', 8, '1 second', 8, shards => 4)).name;
SELECT (rate_limit_take('bl-policy', 'b', 3)).allowed, (rate_limit_take('bl-policy', 'a', 1)).allowed;
SELECT (rate_limit_take('bl-policy', 'empty', 4)).allowed;
SELECT (rate_limit_take('bl-sharded', 'k', 2)).allowed;
SELECT (rate_limit_take_explicit('bl-explicit', 'x', 2, 1, '1 second', 4)).allowed;

-- Two seconds on: balances are refilled to now, full_at is when each is
-- full; a key of a sharded policy lists its shard rows.
SET ratelimit.fixed_clock = 1002;
SELECT key, shard, balance, full_at - to_timestamp(1002) AS full_in, tokens,
       last_refill - to_timestamp(1000) AS written
FROM rate_limit_buckets('bl-policy');
SELECT key, shard IS NOT NULL AS sharded, balance, full_at - to_timestamp(1002) AS full_in
FROM rate_limit_buckets('bl-sharded');
-- Without a policy the table holds no rate: no balance, full_at as stored.
SELECT key, shard, balance, full_at - to_timestamp(1000) AS full_in_from_write, tokens
FROM rate_limit_buckets('bl-explicit');
SELECT count(*) FROM rate_limit_buckets('bl-nothing');

-- This transaction's own takes are shown; so is a redefinition, at once.
BEGIN;
SELECT (rate_limit_take('bl-policy', 'a', 3)).remaining;
SELECT key, balance FROM rate_limit_buckets('bl-policy') WHERE key = 'a';
ROLLBACK;
SELECT (rate_limit_define('bl-policy', 1, '10 seconds', 4)).name;
SELECT key, balance, full_at - to_timestamp(1002) AS full_in
FROM rate_limit_buckets('bl-policy') WHERE key = 'b';

-- Errors; only for the roles it is granted to.
SELECT * FROM rate_limit_buckets(NULL);
SELECT * FROM rate_limit_buckets('');
CREATE ROLE ratelimit_lister NOLOGIN;
SET ROLE ratelimit_lister;
SELECT count(*) FROM rate_limit_buckets('bl-policy');
RESET ROLE;
GRANT EXECUTE ON FUNCTION rate_limit_buckets(text) TO ratelimit_lister;
SET ROLE ratelimit_lister;
SELECT count(*) FROM rate_limit_buckets('bl-policy');
RESET ROLE;
REVOKE EXECUTE ON FUNCTION rate_limit_buckets(text) FROM ratelimit_lister;
DROP ROLE ratelimit_lister;

DELETE FROM ratelimit.buckets WHERE name LIKE 'bl-%';
SELECT rate_limit_drop(n) FROM unnest(ARRAY['bl-policy', 'bl-sharded']) AS n;
RESET ratelimit.fixed_clock;

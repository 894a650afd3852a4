--
-- A policy whose keys start below the cost of a call: a key earns from its
-- first sighting, and retry_after is honoured (waiting that long makes the
-- same call succeed), for single takes, after a reset, in take_all and for
-- sharded keys.
--
SET ratelimit.fixed_clock = 1000;

SELECT rate_limit_define('earn', 10, '1 second', 100, initial => 0);
SELECT allowed, remaining, retry_after FROM rate_limit_take('earn', 'a');
-- The denial recorded the key at its initial balance.
SELECT tokens, last_refill = to_timestamp(1000) AS stamped_now FROM ratelimit.buckets WHERE name = 'earn';
SET ratelimit.fixed_clock = 1000.1;
SELECT allowed, remaining, retry_after FROM rate_limit_take('earn', 'a');
SELECT allowed, remaining, retry_after FROM rate_limit_take('earn', 'a');

-- A check writes nothing, and answers what the take would: the same wait.
SELECT allowed, retry_after FROM rate_limit_check('earn', 'b');
SELECT count(*) FROM ratelimit.buckets WHERE name = 'earn' AND key = 'b';

-- After a reset the key starts again at its initial balance, and earns.
SELECT rate_limit_reset('earn', 'a');
SELECT allowed, retry_after FROM rate_limit_take('earn', 'a', 5);
SET ratelimit.fixed_clock = 1000.6;
SELECT allowed, remaining FROM rate_limit_take('earn', 'a', 5);

-- A rolled-back denial forgets the sighting with it.
BEGIN;
SELECT allowed FROM rate_limit_take('earn', 'rolled-back');
ROLLBACK;
SELECT count(*) FROM ratelimit.buckets WHERE name = 'earn' AND key = 'rolled-back';

-- take_all: the denied new key that starts below full is recorded and earns;
-- the one that starts full is not recorded.
SELECT rate_limit_define('full-start', 1, '1 second', 2);
SET ratelimit.fixed_clock = 2000;
SELECT allowed, binding_name, retry_after FROM rate_limit_take_all(ARRAY['full-start', 'earn'], ARRAY['c', 'c'], ARRAY[1, 2]);
SELECT name, tokens FROM ratelimit.buckets WHERE key = 'c' ORDER BY name;
SET ratelimit.fixed_clock = 2000.2;
SELECT allowed, remaining FROM rate_limit_take_all(ARRAY['full-start', 'earn'], ARRAY['c', 'c'], ARRAY[1, 2]);

-- A granted take_all records a new key that starts below full too, as a
-- single take does, even when it takes nothing from it: the key earns from
-- its first sighting on.
SET ratelimit.fixed_clock = 2500;
SELECT allowed FROM rate_limit_take_all(ARRAY['full-start', 'earn'], ARRAY['g', 'g'], ARRAY[1, 0]);
SELECT name, tokens FROM ratelimit.buckets WHERE key = 'g' ORDER BY name;
SET ratelimit.fixed_clock = 2501;
SELECT allowed, remaining FROM rate_limit_take('earn', 'g', 0);

-- Sharded: the shards looked at are recorded, and the key earns.
SET ratelimit.fixed_clock = 3000;
SELECT rate_limit_define('earn-sharded', 10, '1 second', 100, initial => 0, shards => 2);
SELECT allowed, retry_after FROM rate_limit_take('earn-sharded', 's');
SELECT count(*) AS shard_rows, sum(tokens) AS tokens FROM ratelimit.buckets WHERE name = 'earn-sharded';
SET ratelimit.fixed_clock = 3000.1;
SELECT allowed FROM rate_limit_take('earn-sharded', 's');

SELECT rate_limit_drop('earn'), rate_limit_drop('full-start'), rate_limit_drop('earn-sharded');
RESET ratelimit.fixed_clock;

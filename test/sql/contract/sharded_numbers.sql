--
-- The numbers of a sharded key are honest: a take looks at two shards, and
-- when they cannot serve it, or hold less than its cost (or less than one
-- token) once it is done, at every shard.  So a call is denied only when the
-- shards together cannot serve it, its retry_after is the wait after which
-- they can, and remaining (the header's r) is never below the cost, or 0,
-- while the key can still serve the call.  Every state below is laid out so
-- that any two shards a call may pick show the same thing.
--
\set VERBOSITY terse

-- 8 a second, 80 at most, over 8 shards: 1 a second and 10 at most each.
SET ratelimit.fixed_clock = 1000;
SELECT rate_limit_define('sn', 8, '1 second', 80, shards => 8);

-- pg_temp.lay(key, tokens): shard s of `key` holds tokens[s + 1], stamped now.
CREATE FUNCTION pg_temp.lay(k text, tokens float8[]) RETURNS void
LANGUAGE sql AS $$
    DELETE FROM ratelimit.buckets WHERE name = 'sn' AND key LIKE k || E'\x1f%';
    INSERT INTO ratelimit.buckets (name, key, tokens, last_refill, full_at, blocked_until)
    SELECT 'sn', k || E'\x1f' || (s - 1), tokens[s],
           to_timestamp(pg_catalog.current_setting('ratelimit.fixed_clock')::float8), 'infinity',
           '-infinity'
      FROM pg_catalog.generate_subscripts(tokens, 1) AS s;
$$;
-- pg_temp.shards(key): what each shard of `key` holds, shard 0 first.
CREATE FUNCTION pg_temp.shards(k text) RETURNS float8[]
LANGUAGE sql AS $$
    SELECT array_agg(tokens ORDER BY pg_catalog.split_part(key, E'\x1f', 2)::int)
      FROM ratelimit.buckets WHERE name = 'sn' AND key LIKE k || E'\x1f%';
$$;

-- A fresh key: the take is served by one of the two shards it looked at,
-- which hold 9 + 10 afterwards.  remaining is at least what is left: 19 of
-- the 79 (the rest sits in shards it did not look at); reset_after is
-- theirs.
SELECT allowed, remaining, retry_after, reset_after FROM rate_limit_take('sn', 'fresh');

-- Every shard holds half a token: any two of them serve a take of 1, and
-- are empty afterwards, but 3 tokens are left in the others.  The check says
-- so, the take too, and so does the header's r.
SELECT pg_temp.lay('half', '{0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5}');
SELECT allowed, remaining, retry_after FROM rate_limit_check('sn', 'half');
SELECT d.allowed, d.remaining, h.ratelimit
  FROM rate_limit_take('sn', 'half') AS d, LATERAL rate_limit_headers(d, 'sn') AS h;
SELECT pg_temp.shards('half');

-- Every shard holds a quarter: no two of them can serve a take of 1, the
-- shards together can: it is served by the four richest (shard number breaks
-- ties), and 1 token is left.
SELECT pg_temp.lay('quarter', '{0.25,0.25,0.25,0.25,0.25,0.25,0.25,0.25}');
SELECT allowed, remaining FROM rate_limit_check('sn', 'quarter');
SELECT allowed, remaining, retry_after FROM rate_limit_take('sn', 'quarter');
SELECT pg_temp.shards('quarter');

-- A cost of 3 with 1 token in every shard: served by three of them, from as
-- few rows as can serve it.
SELECT pg_temp.lay('three', '{1,1,1,1,1,1,1,1}');
SELECT allowed, remaining FROM rate_limit_take('sn', 'three', 3);
SELECT pg_temp.shards('three');
-- unevenly spread: the richest shards serve it, whichever pair was seen
SELECT pg_temp.lay('uneven', '{0.5,2,0.5,0.5,1.5,0.5,0.5,0.5}');
SELECT allowed, remaining FROM rate_limit_take('sn', 'uneven', 3);
SELECT pg_temp.shards('uneven');

-- A sixteenth in every shard: half a token in all, so a take of 1 is denied,
-- remaining says the half token, and retry_after is the wait until the
-- shards together hold 1 (each earns 1 a second: 1/16 s), not until two of
-- them do.  A microsecond sooner the same take is still denied; then served.
SELECT pg_temp.lay('poor', '{0.0625,0.0625,0.0625,0.0625,0.0625,0.0625,0.0625,0.0625}');
SELECT allowed, remaining, retry_after FROM rate_limit_take('sn', 'poor');
SELECT d.allowed, h.ratelimit, h.retry_after
  FROM rate_limit_take('sn', 'poor') AS d, LATERAL rate_limit_headers(d, 'sn') AS h;
SELECT pg_temp.shards('poor');
SET ratelimit.fixed_clock = 1000.062499;
SELECT allowed, round(remaining::numeric, 6) AS remaining FROM rate_limit_take('sn', 'poor');
SET ratelimit.fixed_clock = 1000.0625;
SELECT allowed, remaining FROM rate_limit_take('sn', 'poor');
SELECT pg_temp.shards('poor');

-- A first sighting: shards never seen start at their share of `initial`
-- and earn from then on, all of them recorded by a denial.
SET ratelimit.fixed_clock = 2000;
SELECT rate_limit_define('sn', 8, '1 second', 80, initial => 0, shards => 8);
SELECT allowed, remaining, retry_after FROM rate_limit_take('sn', 'new');
SELECT pg_temp.shards('new');
SET ratelimit.fixed_clock = 2000.125;
SELECT allowed, remaining FROM rate_limit_take('sn', 'new');

SELECT rate_limit_drop('sn');
DELETE FROM ratelimit.buckets WHERE name = 'sn';
RESET ratelimit.fixed_clock;

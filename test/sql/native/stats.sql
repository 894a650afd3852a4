--
-- Counters of takes per limit.  Before PostgreSQL 17 they need the library
-- in shared_preload_libraries, which the suite's server does not load:
-- every read says so, and takes go on uncounted (expected/native/stats.out).
-- From 17 they count without it (stats_1.out).  test/cluster/stats.sh
-- counts with the library preloaded.
--
\set SHOW_CONTEXT never
SET ratelimit.fixed_clock = 1000;
SELECT (rate_limit_define('st-policy', 1, '1 hour', 3, max_reserved => 2)).name;
SELECT (rate_limit_define('st-other', 1, '1 hour', 3)).name;
SELECT rate_limit_stats_reset();

-- st-policy: two grants (3 tokens), a denial, a reservation of 1 token into
-- debt; a check, which is not counted; an all-or-nothing call denied by it,
-- which counts a denial for each limit it names.
SELECT allowed FROM rate_limit_take('st-policy', 'a', 1);
SELECT allowed FROM rate_limit_take('st-policy', 'a', 2);
SELECT allowed FROM rate_limit_take('st-policy', 'a', 1);
SELECT allowed, remaining FROM rate_limit_take('st-policy', 'a', 1, '2 hours');
SELECT allowed FROM rate_limit_check('st-policy', 'a', 1);
SELECT allowed FROM rate_limit_take_all(ARRAY['st-other', 'st-policy'], ARRAY['a', 'a'], NULL);
-- An explicit limit counts too; so does a grant rolled back.
BEGIN;
SELECT allowed FROM rate_limit_take_explicit('st-explicit', 'a', 1.5, 1, '1 hour', 5);
ROLLBACK;
SELECT name, grants, denials, tokens_granted, reservations, lock_wait_seconds
FROM rate_limit_stats WHERE name LIKE 'st-%' ORDER BY name;
SELECT dropped, stats_reset IS NOT NULL AS has_reset_time FROM rate_limit_stats_info;

-- One limit's counters reset; the others stay.
SELECT rate_limit_stats_reset('st-policy');
SELECT name, grants, denials FROM rate_limit_stats WHERE name LIKE 'st-%' ORDER BY name;

-- Not counted while ratelimit.track_stats is off.
SET ratelimit.track_stats = off;
SELECT allowed FROM rate_limit_take('st-other', 'b', 1);
RESET ratelimit.track_stats;
SELECT name, grants FROM rate_limit_stats WHERE name = 'st-other';

-- A report-only policy: its would-be denials count as denials (and take
-- nothing), its grants as grants; in rate_limit_take_all its would-be
-- denial is its own, and the enforced limit that granted counts a grant.
SELECT (rate_limit_define('st-shadow', 1, '1 hour', 2, enforce => false)).enforce;
SELECT rate_limit_stats_reset('st-other');
SELECT allowed, remaining FROM rate_limit_take('st-shadow', 'a', 2);
SELECT allowed, remaining FROM rate_limit_take('st-shadow', 'a', 1);
SELECT allowed, remaining FROM rate_limit_check('st-shadow', 'a', 1);
SELECT allowed, remaining FROM rate_limit_take_all(ARRAY['st-other', 'st-shadow'], ARRAY['c', 'a'], NULL);
SELECT name, grants, denials, tokens_granted FROM rate_limit_stats
 WHERE name IN ('st-other', 'st-shadow') ORDER BY name;

-- Readable by pg_read_all_stats; resetting is granted deliberately.
CREATE ROLE ratelimit_watcher NOLOGIN;
SET ROLE ratelimit_watcher;
SELECT count(*) FROM rate_limit_stats;
RESET ROLE;
GRANT pg_read_all_stats TO ratelimit_watcher;
SET ROLE ratelimit_watcher;
SELECT count(*) > 0 AS counted FROM rate_limit_stats;
SELECT rate_limit_stats_reset();
RESET ROLE;
DROP ROLE ratelimit_watcher;

DELETE FROM ratelimit.buckets WHERE name LIKE 'st-%';
SELECT rate_limit_drop(n) FROM unnest(ARRAY['st-policy', 'st-other', 'st-shadow']) AS n;
RESET ratelimit.fixed_clock;

--
-- rate_limit_reset_limit: every bucket of one limit starts afresh, whatever
-- its keys and shards; other limits are untouched.
--
\i test/sql/include/error_of.sql
SET ratelimit.fixed_clock = 1000;

SELECT (rate_limit_define('rl-policy', 1, '1 hour', 3)).name;
SELECT (rate_limit_define('rl-initial', 1, '1 hour', 3, initial => 1)).name;
SELECT (rate_limit_define('rl-sharded', 8, '1 hour', 8, shards => 4)).name;
-- More keys than one batch holds, so that the pass goes on from where the
-- last batch ended.
SELECT count(*) FILTER (WHERE (rate_limit_take('rl-policy', 'k' || g, 3)).allowed) AS taken
FROM generate_series(1, 2500) AS g;
SELECT (rate_limit_take('rl-initial', 'a', 1)).remaining;
SELECT (rate_limit_take('rl-sharded', 'a', 2)).allowed;
SELECT (rate_limit_take_explicit('rl-explicit', 'a', 5, 1, '1 hour', 5)).remaining;
SELECT (rate_limit_take_explicit('rl-other', 'a', 5, 1, '1 hour', 5)).remaining;

-- Not without a name.  (That it refuses to run inside a transaction block
-- or from a function is in state_guard.sql.)
CALL rate_limit_reset_limit(NULL);
CALL rate_limit_reset_limit('');

CALL rate_limit_reset_limit('rl-policy');
SELECT count(*) AS left FROM ratelimit.buckets WHERE name = 'rl-policy';
SELECT (rate_limit_take('rl-policy', 'k1', 3)).allowed AS full_again,
       (rate_limit_take('rl-policy', 'k2500', 3)).allowed AS last_full_again;

-- A policy's initial balance holds again; every shard goes; an explicit
-- limit's buckets too.  Another name keeps its state.
CALL rate_limit_reset_limit('rl-initial');
SELECT allowed, remaining FROM rate_limit_check('rl-initial', 'a', 1);
CALL rate_limit_reset_limit('rl-sharded');
CALL rate_limit_reset_limit('rl-explicit');
SELECT (rate_limit_check_explicit('rl-explicit', 'a', 5, 1, '1 hour', 5)).allowed AS explicit_full;
SELECT (rate_limit_check_explicit('rl-other', 'a', 5, 1, '1 hour', 5)).allowed AS other_untouched;
-- Nothing left: nothing to do.
CALL rate_limit_reset_limit('rl-explicit');

-- Only for the roles it is granted to, who need nothing on the table.
CREATE ROLE ratelimit_resetter NOLOGIN;
SET ROLE ratelimit_resetter;
CALL rate_limit_reset_limit('rl-other');
RESET ROLE;
GRANT EXECUTE ON PROCEDURE rate_limit_reset_limit(text, bigint) TO ratelimit_resetter;
SET ROLE ratelimit_resetter;
CALL rate_limit_reset_limit('rl-other');
RESET ROLE;
SET default_transaction_read_only = on;
CALL rate_limit_reset_limit('rl-other');
RESET default_transaction_read_only;

REVOKE EXECUTE ON PROCEDURE rate_limit_reset_limit(text, bigint) FROM ratelimit_resetter;
DROP ROLE ratelimit_resetter;
CALL rate_limit_reset_limit('rl-policy') \gset
CALL rate_limit_reset_limit('rl-initial') \gset
SELECT rate_limit_drop(n) FROM unnest(ARRAY['rl-policy', 'rl-initial', 'rl-sharded']) AS n;
RESET ratelimit.fixed_clock;

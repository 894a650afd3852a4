--
-- Parallel query.  Called directly, every function works with parallelism
-- forced: the writing ones are PARALLEL UNSAFE (the query then runs without
-- parallel workers), rate_limit_check is PARALLEL RESTRICTED (it runs in the
-- leader) and rate_limit_headers PARALLEL SAFE.  Only a function that calls
-- them and is marked PARALLEL SAFE or RESTRICTED runs them in parallel mode
-- (in a worker, or in the leader): then the writing ones raise 25000, and
-- rate_limit_check and rate_limit_headers still answer.
--
SET ratelimit.fixed_clock = 1000;
\i test/sql/include/error_of.sql
SELECT rate_limit_define('par', 1, '1 second', 5);
-- force_parallel_mode up to PostgreSQL 15, debug_parallel_query from 16
SELECT CASE WHEN current_setting('server_version_num')::int >= 160000
            THEN 'debug_parallel_query' ELSE 'force_parallel_mode' END AS parallel_setting \gset
SET :parallel_setting = on;

SELECT allowed, remaining FROM rate_limit_take('par-x', 'k', 1, 1, 5);
SELECT allowed, remaining FROM rate_limit_take('par', 'k');
SELECT allowed, remaining FROM rate_limit_check('par-x', 'k', 1, 1, 5);
SELECT allowed, remaining FROM rate_limit_check('par', 'k');
SELECT allowed, remaining FROM rate_limit_refund('par', 'k', 1);
SELECT allowed, remaining FROM rate_limit_refund('par-x', 'k', 1, 1, 5);
SELECT allowed, remaining FROM rate_limit_take_all(ARRAY['par'], ARRAY['k']);
SELECT h.ratelimit FROM rate_limit_check('par', 'k') AS d, LATERAL rate_limit_headers(d, 'par') AS h;
SELECT rate_limit_define('par-other', 1);
SELECT rate_limit_drop('par-other');
SELECT rate_limit_reset('par', 'k');

-- Wrapped in a function that claims to be parallel safe.
CREATE FUNCTION pg_temp.parallel_safe(statement text) RETURNS text
LANGUAGE plpgsql PARALLEL SAFE AS $$
DECLARE
    result text;
BEGIN
    EXECUTE statement INTO result;
    RETURN result;
END
$$;
EXPLAIN (COSTS OFF) SELECT pg_temp.parallel_safe('SELECT 1');
SELECT pg_temp.error_of($q$SELECT pg_temp.parallel_safe($$SELECT (rate_limit_take('par-x', 'k', 1, 1, 5)).allowed$$)$q$);
SELECT pg_temp.error_of($q$SELECT pg_temp.parallel_safe($$SELECT (rate_limit_take('par', 'k')).allowed$$)$q$);
SELECT pg_temp.error_of($q$SELECT pg_temp.parallel_safe($$SELECT (rate_limit_refund('par', 'k', 1)).allowed$$)$q$);
SELECT pg_temp.error_of($q$SELECT pg_temp.parallel_safe($$SELECT (rate_limit_refund('par-x', 'k', 1, 1, 5)).allowed$$)$q$);
SELECT pg_temp.error_of($q$SELECT pg_temp.parallel_safe($$SELECT (rate_limit_take_all(ARRAY['par'], ARRAY['k'])).allowed$$)$q$);
SELECT pg_temp.error_of($q$SELECT pg_temp.parallel_safe($$SELECT rate_limit_reset('par', 'k')$$)$q$);
-- (PostgreSQL raises this one, in words that differ by version.)
SELECT split_part(pg_temp.error_of($q$SELECT pg_temp.parallel_safe($$SELECT rate_limit_define('par-other', 1)$$)$q$), ':', 1) AS sqlstate;
SELECT pg_temp.error_of($q$SELECT pg_temp.parallel_safe($$SELECT rate_limit_drop('par')$$)$q$);
SELECT pg_temp.parallel_safe($$SELECT (rate_limit_check('par-x', 'k', 1, 1, 5)).remaining$$);
SELECT pg_temp.parallel_safe($$SELECT (rate_limit_check('par', 'k')).remaining$$);
SELECT pg_temp.parallel_safe($$SELECT (rate_limit_headers(rate_limit_check('par', 'k'), 'par')).ratelimit$$);

-- PARALLEL RESTRICTED is not enough: the leader of a query that runs in
-- parallel mode is in parallel mode too.
ALTER FUNCTION pg_temp.parallel_safe(text) PARALLEL RESTRICTED;
SELECT pg_temp.error_of($q$SELECT pg_temp.parallel_safe($$SELECT (rate_limit_take('par', 'k')).allowed$$)$q$);

RESET :parallel_setting;
SELECT rate_limit_drop('par');

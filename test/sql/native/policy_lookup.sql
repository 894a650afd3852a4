--
-- Policy lookups are cached per backend, the names that are not policies as
-- much as the policies: a miss reads ratelimit.policies once, not on every
-- call, and is forgotten as soon as a change to the table commits.
--
SET ratelimit.fixed_clock = 1000;
SELECT rate_limit_define('lookup-defined', 1, '1 second', 5);

-- Five calls for a name that is not a policy read the table (its primary
-- key) at most once; so do five calls for a policy.  (The counter holds
-- scans not yet reported, so only its increase within the transaction counts.)
BEGIN;
SELECT pg_stat_get_xact_numscans('ratelimit.policies_pkey'::regclass) AS scans \gset
SELECT count(*) FILTER (WHERE NOT rate_limit_reset('lookup-missing', 'k')) AS resets
  FROM generate_series(1, 5);
SELECT pg_stat_get_xact_numscans('ratelimit.policies_pkey'::regclass) - :scans AS table_reads;
SELECT pg_stat_get_xact_numscans('ratelimit.policies_pkey'::regclass) AS scans \gset
SELECT count(*) FILTER (WHERE allowed) AS checks
  FROM generate_series(1, 5), LATERAL rate_limit_check('lookup-defined', 'k');
SELECT pg_stat_get_xact_numscans('ratelimit.policies_pkey'::regclass) - :scans AS table_reads;
COMMIT;

-- A name cached as missing and then defined is a policy at once (here in
-- the same transaction; policy_invalidation tests other sessions).
BEGIN;
SELECT rate_limit_reset('lookup-late', 'k');
SELECT rate_limit_define('lookup-late', 1, '1 second', 3);
SELECT capacity FROM rate_limit_check('lookup-late', 'k');
SELECT rate_limit_drop('lookup-late');
ROLLBACK;
-- Rolled back: not a policy any more.
\set VERBOSITY terse
SELECT capacity FROM rate_limit_check('lookup-late', 'k');
\set VERBOSITY default

SELECT rate_limit_drop('lookup-defined');

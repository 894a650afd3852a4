-- sql/src/kind_check.sql
--
-- The constraint of ratelimit.policies that ties a policy's kind to its
-- other columns, written once for the table (policies_table.sql) and for
-- the upgrade that adds the columns (enforce_upgrade.sql).  A token bucket
-- has no lease; a concurrency limit holds burst places at once (a whole
-- number, at most :rl_max_held), refills nothing (rate 0) and keeps every
-- bucket option at its default; its lease, if any, lasts a microsecond or
-- more.  A sliding window (kind 'sliding') counts at most burst in any
-- window of per (rate equal to burst), keeps every bucket option at its
-- default and has no lease.
\ir limits.sql
\set rl_kind_check 'CONSTRAINT policies_kind_check CHECK ((kind OPERATOR(pg_catalog.=) ''bucket''::text AND lease IS NULL) OR (kind OPERATOR(pg_catalog.=) ''concurrency''::text AND rate OPERATOR(pg_catalog.=) ''0''::float8 AND burst OPERATOR(pg_catalog.=) pg_catalog.trunc(burst) AND burst OPERATOR(pg_catalog.<=) ''' :rl_max_held '''::float8 AND initial IS NULL AND jitter OPERATOR(pg_catalog.=) ''0''::float8 AND NOT fixed_window AND floor_rate OPERATOR(pg_catalog.=) ''0''::float8 AND shards OPERATOR(pg_catalog.=) 1 AND max_reserved OPERATOR(pg_catalog.=) ''0''::float8 AND penalty IS NULL AND (lease IS NULL OR lease_us OPERATOR(pg_catalog.>=) ''1''::bigint)) OR (kind OPERATOR(pg_catalog.=) ''sliding''::text AND rate OPERATOR(pg_catalog.=) burst AND initial IS NULL AND jitter OPERATOR(pg_catalog.=) ''0''::float8 AND NOT fixed_window AND window_start IS NULL AND floor_rate OPERATOR(pg_catalog.=) ''0''::float8 AND shards OPERATOR(pg_catalog.=) 1 AND max_reserved OPERATOR(pg_catalog.=) ''0''::float8 AND penalty IS NULL AND lease IS NULL))'

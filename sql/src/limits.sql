-- sql/src/limits.sql
--
-- The longest limit name and key, in bytes, everywhere: the native calls'
-- kMaxNameBytes and kMaxKeyBytes (src/pg/errors.hpp; the Makefile passes
-- these values), the policy table's constraint, rate_limit_define's check
-- and the portable limiter's calls.  psql variables, :rl_max_name_bytes
-- outside routine bodies and @rl_max_name_bytes@ inside them (see README).
\set rl_max_name_bytes 256
\set rl_max_key_bytes 1024
-- The most places a concurrency limit holds at once per key: each is an
-- entry of PostgreSQL's shared lock table while it is held.
\set rl_max_held 1000

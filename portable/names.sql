-- portable/names.sql: the names the shared sources (../sql/src/, see its
-- README) leave to the portable limiter.  Included by ratelimit.sql and by
-- the templates of the upgrade scripts (update--*.sql).
--
-- Everything is in the schema it is installed into (:rl_schema): the API,
-- and the helpers and tables, named rl_...; a policy is read as the calls
-- read it (rl_find_policy).
\set rl :"rl_schema" .rl_
\set rl_policies :"rl_schema" .rl_policies
\set rl_policy_source :rl find_policy(policy)
\ir ../sql/src/limits.sql

-- sql/names.sql: the names the shared sources (src/, see src/README) leave
-- to the native extension.  Included by ratelimit.sql and by the templates
-- of the upgrade scripts (update--*.sql).
--
-- The API is in the schema the extension is installed into; its state and
-- helpers are in the schema ratelimit, where calls read the policies in
-- their own way (src/pg/policies.cpp) and rate_limit_headers in the
-- caller's snapshot.
\set rl_schema @extschema@
\set rl ratelimit.
\set rl_policies ratelimit.policies
\set rl_policy_source :rl_policies
\ir src/limits.sql

-- sql/src/policies_view.sql
--
-- The view of the policies, after define.sql (it names rate_limit_define).

-- The policies, for whoever manages limits: rows show to the roles that may
-- execute rate_limit_define (and to superusers), no rows to anyone else.
-- security_barrier: no function in a caller's WHERE clause runs before the
-- privilege check and sees rows it should not.
CREATE VIEW :"rl_schema".rate_limit_policies WITH (security_barrier) AS
SELECT p.name, p.rate, p.per, p.burst, p.initial, p.jitter, p.fixed_window, p.window_start,
       p.floor_rate, p.shards, p.max_reserved, p.penalty, p.tokens_per_second, p.storage,
       p.enforce, p.kind, p.lease
  FROM :rl_policies AS p
 WHERE pg_catalog.has_function_privilege(
           :'rl_define'::pg_catalog.regprocedure,
           'EXECUTE');
COMMENT ON VIEW :"rl_schema".rate_limit_policies IS
    'the stored policies, shown to roles that may execute rate_limit_define';
GRANT SELECT ON :"rl_schema".rate_limit_policies TO PUBLIC;

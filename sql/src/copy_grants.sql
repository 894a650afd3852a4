-- sql/src/copy_grants.sql
--
-- Included by an upgrade that makes a routine anew under a new signature or
-- result type (enforce_upgrade.sql, buckets_upgrade.sql): whoever could
-- execute the old routine, :rl_grants_from (its signature), may execute
-- each of :rl_grants_to (signatures, comma-separated), with the same grant
-- option.  The routines made anew are withheld from PUBLIC first (their
-- "--upgrade: REVOKE" lines), so PUBLIC executes them only if it could
-- execute the old one.
DO $$
DECLARE
    g record;
BEGIN
    FOR g IN SELECT a.grantee, a.is_grantable
               FROM pg_catalog.pg_proc AS p,
                    LATERAL pg_catalog.aclexplode(p.proacl) AS a
              WHERE p.oid OPERATOR(pg_catalog.=) '@rl_grants_from@'::pg_catalog.regprocedure
                AND a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
                AND a.grantee OPERATOR(pg_catalog.<>) p.proowner LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s%s',
            '@rl_grants_to@',
            CASE WHEN g.grantee OPERATOR(pg_catalog.=) '0'::pg_catalog.oid THEN 'PUBLIC'
                 ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(g.grantee)) END,
            CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
END
$$;

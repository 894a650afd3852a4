-- portable/rights.sql: included by ratelimit.sql and by the upgrade scripts.
--
-- Least rights: of the helpers, PUBLIC executes only rl_purge_batch.
DO $rights$
DECLARE
    routine pg_catalog.regprocedure;
BEGIN
    FOR routine IN
        SELECT p.oid FROM pg_catalog.pg_proc AS p
         WHERE p.pronamespace OPERATOR(pg_catalog.=) (SELECT n.oid FROM pg_catalog.pg_namespace AS n
                                                       WHERE n.nspname OPERATOR(pg_catalog.=) pg_catalog.current_schema())
           AND p.proname OPERATOR(pg_catalog.~) '^rl_'::pg_catalog.text
           AND p.proname OPERATOR(pg_catalog.<>) 'rl_purge_batch'::pg_catalog.name
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON ROUTINE %s FROM PUBLIC', routine);
    END LOOP;
END
$rights$;

-- portable/qualify.sql
--
-- The limiter's routines name its own objects @extschema@.name (see
-- ratelimit.sql), which CREATE EXTENSION replaces by the extension's
-- schema.  A psql install (ratelimit.sql, and the router's
-- ratelimit_router.sql, which includes some of these files) creates them
-- with check_function_bodies off, then runs this: in every routine of the
-- current schema, the schema's name in place of @extschema@, and the
-- routine checked.
DO $names$
DECLARE
    routine pg_catalog.oid;
BEGIN
    PERFORM pg_catalog.set_config('check_function_bodies', 'on', true);
    FOR routine IN SELECT p.oid FROM pg_catalog.pg_proc AS p
                    WHERE p.pronamespace OPERATOR(pg_catalog.=) (SELECT n.oid FROM pg_catalog.pg_namespace AS n
                                                                  WHERE n.nspname OPERATOR(pg_catalog.=) pg_catalog.current_schema())
                    ORDER BY p.oid LOOP
        EXECUTE pg_catalog.replace(pg_catalog.pg_get_functiondef(routine), '@extschema@',
                                   pg_catalog.quote_ident(pg_catalog.current_schema()));
    END LOOP;
END
$names$;

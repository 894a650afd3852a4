-- portable/qualify.sql
--
-- The limiter's routines name its own objects @extschema@.name (see
-- ratelimit.sql), which CREATE EXTENSION replaces by the extension's
-- schema; the routines of the shared sources (../sql/src/) also name
-- @NAME@ the psql variables NAME that scripts/sql-script replaces in the
-- extension's script.  psql interpolates no variable in a routine's body.
-- A psql install (ratelimit.sql, and the router's ratelimit_router.sql,
-- which includes some of these files) creates them with
-- check_function_bodies off, then runs this: in every routine of the
-- current schema, the value of each variable its caller lists in
-- rl_body_values (a JSON object of names and values; none if unset) in
-- place of @NAME@, the schema's name in place of @extschema@, and the
-- routine checked.
\if :{?rl_body_values}
\else
\set rl_body_values '{}'
\endif
SELECT pg_catalog.set_config('rl.body_values', :'rl_body_values', true) AS rl_body_values_set \gset
DO $names$
DECLARE
    routine pg_catalog.oid;
    definition pg_catalog.text;
    variable record;
BEGIN
    PERFORM pg_catalog.set_config('check_function_bodies', 'on', true);
    FOR routine IN SELECT p.oid FROM pg_catalog.pg_proc AS p
                    WHERE p.pronamespace OPERATOR(pg_catalog.=) (SELECT n.oid FROM pg_catalog.pg_namespace AS n
                                                                  WHERE n.nspname OPERATOR(pg_catalog.=) pg_catalog.current_schema())
                    ORDER BY p.oid LOOP
        definition := pg_catalog.pg_get_functiondef(routine);
        FOR variable IN SELECT v.key, v.value
                          FROM pg_catalog.json_each_text(pg_catalog.current_setting('rl.body_values')::pg_catalog.json) AS v LOOP
            definition := pg_catalog.replace(definition, '@' OPERATOR(pg_catalog.||) variable.key OPERATOR(pg_catalog.||) '@',
                                             variable.value);
        END LOOP;
        EXECUTE pg_catalog.replace(definition, '@extschema@', pg_catalog.quote_ident(pg_catalog.current_schema()));
    END LOOP;
END
$names$;

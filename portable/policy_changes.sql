-- portable/policy_changes.sql
--
-- Counts the statements that write rl_policies (see rl_policy_changes),
-- before each writes anything: a plain UPDATE, which leaves no lock of its
-- own on the row it writes.  The trigger fires ALWAYS, also under
-- session_replication_role = replica, as the native extension's triggers
-- on its policy table do.  Included by policies.sql and by the upgrade
-- script to 0.4.0 (update--0.3.0--0.4.0.sql).
CREATE FUNCTION rl_policies_change() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    UPDATE @extschema@.rl_policy_changes AS c
       SET changes = c.changes OPERATOR(pg_catalog.+) '1'::bigint;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION rl_policies_change() IS
    'counts a statement that writes rl_policies in rl_policy_changes, before it writes';
CREATE TRIGGER rl_policies_change
    BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON :rl_policies
    FOR EACH STATEMENT EXECUTE FUNCTION rl_policies_change();
ALTER TABLE :rl_policies ENABLE ALWAYS TRIGGER rl_policies_change;

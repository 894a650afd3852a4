#!/usr/bin/env bash
# test/cluster/portable_install.sh
#
# The portable limiter installed as managed services let it be, by roles
# that are not superusers: portable/ratelimit.sql run with psql into a
# schema of the role's own, and the trusted extension ratelimit_portable
# created by a database's owner.  The script's objects all belong to that
# role; the extension's tables, view and SECURITY DEFINER routines do, and
# the routines that run with their caller's rights stay the superuser's, so
# that the installer cannot change them.  No SECURITY DEFINER function runs
# as a superuser.  An application role granted nothing but USAGE on the
# schema takes and checks, but cannot read or write the state, reset or
# define; the two installs answer alike.  Neither installs into a schema
# where every role may create objects.  The installer may run and grant
# the purge.  No routine of either runs code that the database's owner
# plants for a superuser who calls it.  Starts a cluster of its own and
# stops it.
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/lib.sh"

rl_require_install
cluster_start
RL_FAILURES=0
q() { psql -X -A -t -q -v ON_ERROR_STOP=1 "$@"; }
# How many objects of schema limits that FILTER admits (relations by
# relkind, routines by prosecdef; types: all or none) are not owned by
# limiter_owner.  FILTER: RELKINDS SECDEF_ONLY TYPES, e.g. "'r','v' true false".
foreign_objects() {
    printf "SELECT count(*) FROM (
        SELECT c.relowner AS owner FROM pg_class c WHERE c.relnamespace = 'limits'::regnamespace AND c.relkind IN (%s)
        UNION ALL SELECT p.proowner FROM pg_proc p WHERE p.pronamespace = 'limits'::regnamespace AND (p.prosecdef OR NOT %s)
        UNION ALL SELECT t.typowner FROM pg_type t WHERE t.typnamespace = 'limits'::regnamespace AND %s) AS o
     WHERE o.owner <> 'limiter_owner'::regrole" "$1" "$2" "$3"
}

q -c "CREATE ROLE limiter_owner LOGIN" -c "CREATE ROLE app LOGIN" \
  -c "CREATE DATABASE script_db OWNER limiter_owner" -c "CREATE DATABASE extension_db OWNER limiter_owner"

# Neither installs into a schema where every role may create objects.
q -d script_db -c "CREATE SCHEMA open" -c "GRANT ALL ON SCHEMA open TO PUBLIC"
rl_expect_sqlstate "script: refused in a schema every role may create objects in" 42501 \
    "SET search_path = open" -f "$RL_ROOT/portable/ratelimit.sql" -d script_db -U limiter_owner
rl_expect_sqlstate "extension: refused there too" 42501 \
    "CREATE EXTENSION ratelimit_portable SCHEMA open" -d script_db -U limiter_owner
rl_expect_value "and nothing was left behind" 0 \
    "SELECT count(*) FROM pg_class WHERE relnamespace = 'open'::regnamespace" -d script_db

# The psql script, by a role that owns its database and nothing else.
q -d script_db -U limiter_owner -c "CREATE SCHEMA limits" -c "GRANT USAGE ON SCHEMA limits TO app"
q -d script_db -U limiter_owner -c "SET search_path = limits" -f "$RL_ROOT/portable/ratelimit.sql" >/dev/null
rl_expect_value "script: every object belongs to its installer" 0 \
    "$(foreign_objects "'r', 'v', 'c', 'i'" false true)" -d script_db

# The extension, created by the database's owner: trusted, no superuser.
q -d extension_db -U limiter_owner -c "CREATE SCHEMA limits" -c "GRANT USAGE ON SCHEMA limits TO app" \
  -c "CREATE EXTENSION ratelimit_portable SCHEMA limits"
rl_expect_value "extension: created by a role that is not a superuser" f \
    "SELECT r.rolsuper FROM pg_extension e JOIN pg_roles r ON r.oid = e.extowner WHERE e.extname = 'ratelimit_portable'" \
    -d extension_db
rl_expect_value "extension: its tables, view and SECURITY DEFINER routines belong to its installer" 0 \
    "$(foreign_objects "'r', 'v'" true false)" -d extension_db
rl_expect_value "extension: the routines that run with their caller's rights stay a superuser's" 0 \
    "SELECT count(*) FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner
      WHERE p.pronamespace = 'limits'::regnamespace AND NOT p.prosecdef AND NOT r.rolsuper" -d extension_db
rl_expect_sqlstate "extension: which the installer cannot replace" 42501 \
    "CREATE OR REPLACE FUNCTION limits.rl_now() RETURNS bigint LANGUAGE sql AS 'SELECT 0::bigint'" \
    -d extension_db -U limiter_owner
rl_expect_value "extension: no SECURITY DEFINER function runs as a superuser" 0 \
    "SELECT count(*) FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner WHERE p.prosecdef AND r.rolsuper
        AND p.pronamespace = 'limits'::regnamespace" -d extension_db

for db in script_db extension_db; do
    q -d "$db" -U limiter_owner -c "SET search_path = limits" \
      -c "SELECT (rate_limit_define('api', 0, '1 minute', 3)).name" >/dev/null
    rl_expect_value "$db: the application takes by policy" "t|2" \
        "SET search_path = limits; SELECT allowed, remaining FROM rate_limit_take('api', 'user:1')" -d "$db" -U app
    rl_expect_value "$db: and with explicit parameters" "t|4" \
        "SET search_path = limits; SELECT allowed, remaining FROM rate_limit_take('other', 'k', 1, 1, 5)" -d "$db" -U app
    rl_expect_value "$db: the third take leaves nothing, the fourth is denied" "t|0
f|0" \
        "SET search_path = limits; SELECT allowed, remaining FROM rate_limit_take('api', 'user:1', 2)
         UNION ALL SELECT allowed, remaining FROM rate_limit_take('api', 'user:1')" -d "$db" -U app
    rl_expect_sqlstate "$db: the application cannot read the buckets" 42501 \
        "SET search_path = limits; SELECT * FROM rl_buckets" -d "$db" -U app
    rl_expect_sqlstate "$db: nor write them" 42501 \
        "SET search_path = limits; UPDATE rl_buckets SET tokens = 100" -d "$db" -U app
    rl_expect_sqlstate "$db: nor read the policies" 42501 \
        "SET search_path = limits; SELECT * FROM rl_policies" -d "$db" -U app
    rl_expect_sqlstate "$db: nor rewrite the row of policy changes" 42501 \
        "SET search_path = limits; UPDATE rl_policy_changes SET changes = 0" -d "$db" -U app
    rl_expect_sqlstate "$db: nor reset a bucket" 42501 \
        "SET search_path = limits; SELECT rate_limit_reset('api', 'user:1')" -d "$db" -U app
    rl_expect_sqlstate "$db: nor define a policy" 42501 \
        "SET search_path = limits; SELECT rate_limit_define('api', 1000)" -d "$db" -U app
    rl_expect_value "$db: the bucket is as the takes left it" "0" \
        "SET search_path = limits; SELECT tokens FROM rl_buckets WHERE name = 'api'" -d "$db" -U limiter_owner
    # Purging: the installer may run it and grant it.  A bucket of 5 tokens
    # refilling a million a second is full again a microsecond after a take.
    q -d "$db" -U app -c "SELECT allowed FROM limits.rate_limit_take('full', 'k', 1, 1e6, 5)" >/dev/null
    rl_expect_sqlstate "$db: the application cannot purge" 42501 \
        "CALL limits.rate_limit_purge('full')" -d "$db" -U app
    rl_expect_value "$db: the installer purges the full bucket" "1
0" \
        "SELECT count(*) FROM limits.rl_buckets WHERE name = 'full'" \
        -c "CALL limits.rate_limit_purge('full')" -d "$db" -U limiter_owner
    rl_expect_value "$db: the installer grants purging" "" \
        "GRANT EXECUTE ON PROCEDURE limits.rate_limit_purge(text, bigint) TO app" -d "$db" -U limiter_owner
    q -d "$db" -U app -c "SELECT allowed FROM limits.rate_limit_take('full', 'k', 1, 1e6, 5)" >/dev/null
    rl_expect_value "$db: and grants it to the application" "1" \
        "CALL limits.rate_limit_purge('full')" -d "$db" -U app
done



# Every routine of the install either has its search_path pinned to
# pg_catalog, pg_temp (a SET clause) or, written for speed without one,
# qualifies every operator, function, type and table it names; every
# routine names the limiter's own objects with its schema; and PUBLIC may
# execute no helper but rl_purge_batch, which rate_limit_purge calls with
# its caller's rights.  One line per finding.
lint_routines() {  # DATABASE
    psql -X -A -t -q -v ON_ERROR_STOP=1 -d "$1" <<'SQL'
WITH own AS (
    SELECT p.proname::text AS name FROM pg_catalog.pg_proc AS p
     WHERE p.pronamespace OPERATOR(pg_catalog.=) 'limits'::regnamespace
    UNION SELECT t.typname::text FROM pg_catalog.pg_type AS t
     WHERE t.typnamespace OPERATOR(pg_catalog.=) 'limits'::regnamespace
    UNION SELECT c.relname::text FROM pg_catalog.pg_class AS c
     WHERE c.relnamespace OPERATOR(pg_catalog.=) 'limits'::regnamespace
       AND c.relkind OPERATOR(pg_catalog.=) ANY (ARRAY['r', 'v', 'c'])),
routine AS (
    SELECT p.oid::regprocedure::text AS routine, p.prosecdef, p.proname, p.proacl,
           coalesce('search_path=pg_catalog, pg_temp' OPERATOR(pg_catalog.=) ANY (p.proconfig), false) AS pinned,
           pg_catalog.regexp_replace(p.prosrc, $re$--[^\n]*|'(?:[^']|'')*'$re$, ' ', 'g') AS src
      FROM pg_catalog.pg_proc AS p
     WHERE p.pronamespace OPERATOR(pg_catalog.=) 'limits'::regnamespace),
-- What the checks of an unpinned routine's body pass over: qualified
-- operators, PL/pgSQL's and SQL's own punctuation.
plain AS (
    SELECT r.routine, r.src,
           pg_catalog.regexp_replace(pg_catalog.regexp_replace(pg_catalog.regexp_replace(
           pg_catalog.regexp_replace(pg_catalog.regexp_replace(r.src,
               'OPERATOR\(pg_catalog\.[^)]+\)', ',', 'g'),
               '::|:=|=>|\.\.|\.\*|\(\*\)|#variable_conflict\s+\w+', ',', 'g'),
               '\m(ERRCODE|DETAIL|HINT|MESSAGE)\s*=|\mGET\s+DIAGNOSTICS\s+\w+\s*=|\mSET\s*\([^)]*\)\s*=', ',', 'gi'),
               '\mFOR\s+(NO\s+KEY\s+)?(UPDATE|SHARE)(\s+OF\s+\w+)?|\mDO\s+UPDATE\M|\mAS\s+\w+\s*\([^)]*\)', ' ', 'gi'),
               '\mON\s+CONFLICT\s+ON\s+CONSTRAINT\s+\w+', ' ', 'gi') AS code
      FROM routine AS r WHERE NOT r.pinned),
finding AS (
    -- The take by a policy's name runs on every request: it has no SET
    -- clause, and is checked as every routine without one (policy_take.sql).
    SELECT r.routine, 'SECURITY DEFINER without search_path = pg_catalog, pg_temp' AS what
      FROM routine AS r
     WHERE r.prosecdef AND NOT r.pinned
       AND r.routine OPERATOR(pg_catalog.<>) 'limits.rate_limit_take(text,text,double precision)'
    UNION ALL
    SELECT r.routine, 'executable by PUBLIC'
      FROM routine AS r
     WHERE r.proname OPERATOR(pg_catalog.~) '^rl_' AND r.proname OPERATOR(pg_catalog.<>) 'rl_purge_batch'
       AND (r.proacl IS NULL OR EXISTS (SELECT FROM pg_catalog.aclexplode(r.proacl) AS a
                                         WHERE a.grantee OPERATOR(pg_catalog.=) 0::oid
                                           AND a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'))
    UNION ALL
    SELECT DISTINCT r.routine, 'unqualified name ' OPERATOR(pg_catalog.||) m[2]
      FROM routine AS r, pg_catalog.regexp_matches(r.src, '(^|[^.\w"])([A-Za-z_]\w*)(?![\w.])', 'g') AS m
     WHERE pg_catalog.lower(m[2]) OPERATOR(pg_catalog.=) ANY (SELECT o.name FROM own AS o)
    UNION ALL
    SELECT DISTINCT p.routine, 'operator ' OPERATOR(pg_catalog.||) m[1]
      FROM plain AS p, pg_catalog.regexp_matches(p.code, '([-+*/<>=~!@#%^&|?]+)', 'g') AS m
    UNION ALL
    SELECT DISTINCT p.routine, 'implicit operator in ' OPERATOR(pg_catalog.||) pg_catalog.upper(m[1])
      FROM plain AS p,
           pg_catalog.regexp_matches(p.code, '\m(IN\s*\(|BETWEEN|NULLIF|I?LIKE|DISTINCT\s+FROM|CASE\s+(?!WHEN\M)\w)', 'gi') AS m
    UNION ALL
    SELECT DISTINCT p.routine, 'unqualified call ' OPERATOR(pg_catalog.||) m[2]
      FROM plain AS p, pg_catalog.regexp_matches(p.code, '(^|[^.\w"$])([A-Za-z_]\w*)\s*\(', 'g') AS m
     WHERE pg_catalog.lower(m[2]) OPERATOR(pg_catalog.<>) ALL (ARRAY[
               'and', 'or', 'not', 'in', 'exists', 'any', 'all', 'row', 'array', 'values', 'when', 'then',
               'else', 'elsif', 'if', 'return', 'select', 'from', 'where', 'on', 'case', 'coalesce',
               'greatest', 'least', 'filter', 'over', 'cast', 'while', 'perform', 'into', 'by', 'is', 'as',
               'limit', 'operator'])
    UNION ALL
    SELECT DISTINCT p.routine, 'unqualified type ' OPERATOR(pg_catalog.||) m[1]
      FROM plain AS p, pg_catalog.regexp_matches(p.src, '::\s*("?[A-Za-z_]\w*"?)(?!\w)(?!\s*\.)', 'g') AS m
     WHERE pg_catalog.lower(m[1]) OPERATOR(pg_catalog.<>) ALL (ARRAY[
               'bigint', 'integer', 'int', 'smallint', 'boolean', 'numeric', 'interval', 'real', 'double'])
    UNION ALL
    SELECT DISTINCT p.routine, 'unqualified relation ' OPERATOR(pg_catalog.||) m[2]
      FROM plain AS p,
           pg_catalog.regexp_matches(p.code, '\m(FROM|JOIN|UPDATE|INSERT\s+INTO)\s+("?[A-Za-z_]\w*"?)(?!\w)(?!\s*[.(])', 'gi') AS m
    UNION ALL
    SELECT DISTINCT p.routine, 'unqualified type ' OPERATOR(pg_catalog.||) m[2]
      FROM plain AS p, pg_catalog.regexp_matches(p.src, '\mDECLARE\M(.*?)\mBEGIN\M', 'gi') AS d,
           pg_catalog.regexp_split_to_table(d[1], ';') AS decl,
           pg_catalog.regexp_matches(decl, '^\s*\w+\s+(CONSTANT\s+)?(?!CONSTANT\M)("?[A-Za-z_]\w*"?)(?!\w)(?!\s*\.)', 'i') AS m
     WHERE pg_catalog.lower(m[2]) OPERATOR(pg_catalog.<>) ALL (ARRAY[
               'bigint', 'integer', 'int', 'smallint', 'boolean', 'numeric', 'interval', 'real', 'double', 'record'])
)
SELECT f.routine, f.what FROM finding AS f ORDER BY 1, 2;
SQL
}

# No routine resolves a name or an operator through its caller's
# search_path.  The database's owner, not a superuser (and the owner of
# both installs), plants in schema public, which it owns and which is on
# every role's search_path: a function of the name and argument types of
# each of the limiter's, and a type and a table of the name of each of its
# types and tables.  In public and in the install schema it plants an
# operator for each pair of number types without an exact match in
# pg_catalog, "=" and "<>" for each of the limiter's row types, and for
# each function overloads that take an integer, a numeric or anyelement
# where the limiter's function takes a float8 or a bigint.  Each counts in
# sequence public.captured when it runs.  A superuser then calls every
# routine of the install, with an argument of each type, and the API as an
# application calls it: nothing counts.
plant_traps() {  # DATABASE
    q -d "$1" -U limiter_owner <<'SQL'
CREATE SEQUENCE public.captured;
GRANT USAGE ON SEQUENCE public.captured TO PUBLIC;
CREATE FUNCTION public.captured(what text) RETURNS boolean
LANGUAGE plpgsql AS $f$
BEGIN
    PERFORM pg_catalog.nextval('public.captured');
    RAISE WARNING 'captured by %', what;
    RETURN true;
END
$f$;
DO $plant$
DECLARE
    f record;
    t record;
    op text;
    pair text[];
    types text[];
    variant text[];
    n integer := 0;
    sch text;
BEGIN
    FOREACH sch IN ARRAY ARRAY['public', 'limits'] LOOP
        FOREACH op IN ARRAY ARRAY['=', '<>', '<', '<=', '>', '>=', '+', '-', '*', '/', '%'] LOOP
            FOREACH pair SLICE 1 IN ARRAY ARRAY[['float8', 'int4'], ['float8', 'int8'], ['float8', 'numeric'],
                                                ['int4', 'float8'], ['int8', 'float8'], ['numeric', 'float8'],
                                                ['int8', 'numeric'], ['numeric', 'int8'], ['int4', 'numeric'],
                                                ['numeric', 'int4']] LOOP
                n := n OPERATOR(pg_catalog.+) 1;
                EXECUTE pg_catalog.format(
                    $c$CREATE FUNCTION %1$I.trap_op_%2$s(a %3$s, b %4$s) RETURNS %5$s
                       LANGUAGE sql AS $b$ SELECT NULL::%5$s WHERE public.captured('operator %6$s(%3$s, %4$s) in %1$s') $b$$c$,
                    sch, n, pair[1], pair[2],
                    CASE WHEN op OPERATOR(pg_catalog.=) ANY (ARRAY['+', '-', '*', '/', '%']) THEN 'float8' ELSE 'boolean' END,
                    op);
                EXECUTE pg_catalog.format('CREATE OPERATOR %I.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = %I.trap_op_%s)',
                                          sch, op, pair[1], pair[2], sch, n);
            END LOOP;
        END LOOP;
        FOREACH pair SLICE 1 IN ARRAY ARRAY[['text', 'int4'], ['text', 'int8'], ['text', 'float8'],
                                            ['int4', 'text'], ['int8', 'text'], ['float8', 'text']] LOOP
            n := n OPERATOR(pg_catalog.+) 1;
            EXECUTE pg_catalog.format(
                $c$CREATE FUNCTION %1$I.trap_op_%2$s(a %3$s, b %4$s) RETURNS text
                   LANGUAGE sql AS $b$ SELECT NULL::text WHERE public.captured('operator ||(%3$s, %4$s) in %1$s') $b$$c$,
                sch, n, pair[1], pair[2]);
            EXECUTE pg_catalog.format('CREATE OPERATOR %I.|| (LEFTARG = %s, RIGHTARG = %s, FUNCTION = %I.trap_op_%s)',
                                      sch, pair[1], pair[2], sch, n);
        END LOOP;
        FOR t IN SELECT ty.oid::regtype::text AS name FROM pg_catalog.pg_type AS ty
                  WHERE ty.typnamespace OPERATOR(pg_catalog.=) 'limits'::regnamespace
                    AND ty.typtype OPERATOR(pg_catalog.=) 'c' LOOP
            FOREACH op IN ARRAY ARRAY['=', '<>'] LOOP
                n := n OPERATOR(pg_catalog.+) 1;
                EXECUTE pg_catalog.format(
                    $c$CREATE FUNCTION %1$I.trap_op_%2$s(a %3$s, b %3$s) RETURNS boolean
                       LANGUAGE sql AS $b$ SELECT NULL::boolean WHERE public.captured('operator %4$s(%3$s) in %1$s') $b$$c$,
                    sch, n, t.name, op);
                EXECUTE pg_catalog.format('CREATE OPERATOR %I.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = %I.trap_op_%s)',
                                          sch, op, t.name, t.name, sch, n);
            END LOOP;
        END LOOP;
    END LOOP;
    FOR f IN SELECT p.proname, p.prokind, (p.proargtypes::regtype[]::text[])[:] AS args,
                    pg_catalog.pg_get_function_result(p.oid) AS result
               FROM pg_catalog.pg_proc AS p
              WHERE p.pronamespace OPERATOR(pg_catalog.=) 'limits'::regnamespace
                AND p.prosrc OPERATOR(pg_catalog.!~) 'public\.captured' LOOP
        types := coalesce(f.args, ARRAY[]::text[]);
        FOR i IN 0..pg_catalog.cardinality(types) LOOP
            FOREACH variant SLICE 1 IN ARRAY ARRAY[['', ''], ['double precision', 'integer'],
                                                   ['double precision', 'numeric'],
                                                   ['double precision', 'anyelement'],
                                                   ['bigint', 'integer'], ['bigint', 'anyelement']] LOOP
                CONTINUE WHEN (i OPERATOR(pg_catalog.=) 0) OPERATOR(pg_catalog.<>) (variant[1] OPERATOR(pg_catalog.=) '');
                CONTINUE WHEN i OPERATOR(pg_catalog.>) 0 AND types[i] OPERATOR(pg_catalog.<>) variant[1];
                FOREACH sch IN ARRAY CASE WHEN i OPERATOR(pg_catalog.=) 0 THEN ARRAY['public']
                                          ELSE ARRAY['public', 'limits'] END LOOP
                    BEGIN
                        EXECUTE pg_catalog.format(
                            $c$CREATE %1$s %2$I.%3$I(%4$s) %5$s LANGUAGE plpgsql
                               AS $b$ BEGIN PERFORM public.captured('%1$s %2$s.%3$s(%4$s)'); %6$s END $b$$c$,
                            CASE WHEN f.prokind OPERATOR(pg_catalog.=) 'p' THEN 'PROCEDURE' ELSE 'FUNCTION' END,
                            sch, f.proname,
                            pg_catalog.array_to_string(
                                CASE WHEN i OPERATOR(pg_catalog.=) 0 THEN types
                                     ELSE types[:i OPERATOR(pg_catalog.-) 1] OPERATOR(pg_catalog.||) variant[2]
                                          OPERATOR(pg_catalog.||) types[i OPERATOR(pg_catalog.+) 1:] END, ', '),
                            CASE WHEN f.prokind OPERATOR(pg_catalog.=) 'p' THEN ''
                                 WHEN f.result OPERATOR(pg_catalog.~) '^(TABLE|SETOF)' THEN 'RETURNS SETOF record'
                                 WHEN f.result OPERATOR(pg_catalog.~) '^(record|anyelement)$' THEN 'RETURNS record'
                                 ELSE 'RETURNS ' OPERATOR(pg_catalog.||) f.result END,
                            CASE WHEN f.prokind OPERATOR(pg_catalog.=) 'p' THEN ''
                                 WHEN f.result OPERATOR(pg_catalog.~) '^(TABLE|SETOF)' THEN 'RETURN;'
                                 ELSE 'RETURN NULL;' END);
                    EXCEPTION WHEN duplicate_function OR invalid_function_definition OR datatype_mismatch THEN
                        NULL; -- that signature is taken, or cannot be declared so
                    END;
                END LOOP;
            END LOOP;
        END LOOP;
    END LOOP;
    FOR t IN SELECT ty.typname FROM pg_catalog.pg_type AS ty
              WHERE ty.typnamespace OPERATOR(pg_catalog.=) 'limits'::regnamespace
                AND ty.typtype OPERATOR(pg_catalog.=) 'c'
                AND NOT EXISTS (SELECT FROM pg_catalog.pg_class AS c
                                 WHERE c.oid OPERATOR(pg_catalog.=) ty.typrelid
                                   AND c.relkind OPERATOR(pg_catalog.<>) 'c') LOOP
        EXECUTE pg_catalog.format('CREATE DOMAIN public.%1$I AS limits.%1$I CHECK (public.captured(''type %1$s''))',
                                  t.typname);
    END LOOP;
    FOR t IN SELECT c.relname FROM pg_catalog.pg_class AS c
              WHERE c.relnamespace OPERATOR(pg_catalog.=) 'limits'::regnamespace
                AND c.relkind OPERATOR(pg_catalog.=) ANY (ARRAY['r', 'v']) LOOP
        EXECUTE pg_catalog.format('CREATE VIEW public.%1$I AS SELECT * FROM limits.%1$I WHERE public.captured(''table %1$s'') WITH CHECK OPTION',
                                  t.relname);
    END LOOP;
END
$plant$;
SQL
}

# Every routine of the install, called by a superuser with an argument of
# each type (text chosen by the argument's name), each in a subtransaction
# of its own (many refuse such arguments, once they have resolved what
# they use); then the API as an application calls it.
call_every_routine() {  # DATABASE (what it prints goes to calls_DATABASE.out)
    q -d "$1" >"$RL_CLUSTER_DIR/calls_$1.out" 2>&1 <<'SQL'
CREATE FUNCTION pg_temp.define_traps() RETURNS bigint
LANGUAGE sql
AS $$ SELECT count(*) FROM limits.rate_limit_define('trap', 10::float8, '1 minute'::interval, 20::float8,
                                                   max_reserved => 5::float8) AS a,
                          limits.rate_limit_define('trap-sharded', 60::float8, '1 minute'::interval, 40::float8,
                                                   shards => 4) AS b,
                          limits.rate_limit_define('trap-window', 10::float8, '1 minute'::interval, 10::float8,
                                                   fixed_window => true) AS c $$;
SELECT pg_temp.define_traps();
DO $calls$
DECLARE
    f record;
    args text[];
BEGIN
    FOR f IN SELECT p.proname, p.prokind, (p.proargtypes::regtype[]::text[])[:] AS types,
                    coalesce(p.proargnames, ARRAY[]::text[]) AS names
               FROM pg_catalog.pg_proc AS p
              WHERE p.pronamespace OPERATOR(pg_catalog.=) 'limits'::regnamespace
                AND p.prosrc OPERATOR(pg_catalog.!~) 'public\.captured'
              ORDER BY p.proname LOOP
        args := ARRAY[]::text[];
        FOR i IN 1..coalesce(pg_catalog.cardinality(f.types), 0) LOOP
            args := args OPERATOR(pg_catalog.||) CASE f.types[i]
                WHEN 'text' THEN pg_catalog.quote_literal(CASE f.names[i]
                    WHEN 'op' THEN 'take' WHEN 'function_name' THEN 'rate_limit_take'
                    WHEN 'form' THEN 'policy' WHEN 'status' THEN 'cost_exceeds_debt_cap'
                    WHEN 'what' THEN 'grants' WHEN 'p_key' THEN 'k' WHEN 'key' THEN 'k'
                    WHEN 'row_key' THEN 'k' ELSE 'trap' END)
                WHEN 'double precision' THEN '''1.5''::float8'
                WHEN 'bigint' THEN '''946684900000000''::int8'
                WHEN 'integer' THEN '2'
                WHEN 'boolean' THEN 'false'
                WHEN 'interval' THEN '''90 seconds''::interval'
                WHEN 'xid' THEN '''1''::xid'
                WHEN 'text[]' THEN '''{trap,trap-window}''::text[]'
                WHEN 'double precision[]' THEN '''{1,2}''::float8[]'
                WHEN 'anyarray' THEN '''{1}''::int4[]'
                WHEN 'limits.rl_limit' THEN 'ROW(1, 10, 0, 0, 0, 0)::limits.rl_limit'
                WHEN 'limits.rl_limit[]' THEN 'ARRAY[ROW(1, 10, 0, 0, 0, 0), ROW(1, 10, 60000000, 7, 0, 0)]::limits.rl_limit[]'
                WHEN 'limits.rl_request' THEN 'ROW(12, true, false, 0, 60)::limits.rl_request'
                WHEN 'limits.rl_request[]' THEN 'ARRAY[ROW(1, false, false, 0, ''Infinity''), ROW(12, true, false, 0, 60)]::limits.rl_request[]'
                WHEN 'limits.rl_bucket' THEN 'ROW(5, 946684800000000, -9223372036854775808)::limits.rl_bucket'
                WHEN 'limits.rl_bucket[]' THEN 'ARRAY[ROW(5, 946684800000000, -9223372036854775808), ROW(-1, 946684900000000, 946684999000000)]::limits.rl_bucket[]'
                WHEN 'limits.rl_decision' THEN 'ROW(false, true, 5, 1, 1, 1, ROW(5, 946684800000000, 946684999000000), 0)::limits.rl_decision'
                WHEN 'limits.rl_policies' THEN '(SELECT p FROM limits.rl_policies AS p WHERE p.name OPERATOR(pg_catalog.=) ''trap'')'
                WHEN 'limits.rate_limit_decision' THEN 'ROW(false, 5, 1, 1, 20, ''trap'', 10, ''1 minute'', 1)::limits.rate_limit_decision'
                WHEN 'limits.rate_limit_all_decision' THEN '(SELECT limits.rate_limit_take_all(''{trap}'', ''{k}''))'
                ELSE 'NULL' END;
        END LOOP;
        BEGIN
            EXECUTE pg_catalog.format(CASE WHEN f.prokind OPERATOR(pg_catalog.=) 'p' THEN 'CALL limits.%I(%s)'
                                           ELSE 'SELECT limits.%I(%s)' END,
                                      f.proname, pg_catalog.array_to_string(args, ', '));
        EXCEPTION WHEN OTHERS THEN
            NULL;
        END;
    END LOOP;
END
$calls$;
-- The policies as they were: the calls above dropped one.
SELECT pg_temp.define_traps();
-- (Arguments of the parameters' own types: a caller's own call with an
-- integer for a float8 reaches an overload, as test/sql/capture.sql shows.)
SELECT count(*) FROM limits.rate_limit_take('trap', 'k', 3::float8) AS a,
                     limits.rate_limit_check('trap', 'k', 24::float8, '1 minute'::interval) AS b,
                     limits.rate_limit_take('trap', 'k', 21::float8, '1 minute'::interval) AS c,
                     limits.rate_limit_refund('trap', 'k', 1::float8) AS d,
                     limits.rate_limit_take('trap-sharded', 'k', 3::float8) AS e,
                     limits.rate_limit_take('trap-sharded', 'k', 15::float8) AS f,
                     limits.rate_limit_refund('trap-sharded', 'k', 1::float8) AS g,
                     limits.rate_limit_take('trap-window', 'k', 10::float8) AS h,
                     limits.rate_limit_take('trap-window', 'k', 1::float8) AS i,
                     limits.rate_limit_take_all('{trap,trap-window}', '{k,j}', '{1,1}', '1 minute'::interval) AS j,
                     limits.rate_limit_take_explicit('trap-x', 'k', 2::float8, 10::float8, '1 minute'::interval,
                                                     5::float8, '1 minute'::interval, 3::float8) AS k,
                     limits.rate_limit_check_explicit('trap-x', 'k', 7::float8, 10::float8, '1 minute'::interval,
                                                      5::float8, '1 minute'::interval, 3::float8) AS l,
                     limits.rate_limit_refund_explicit('trap-x', 'k', 1::float8, 10::float8, '1 minute'::interval) AS m,
                     limits.rate_limit_take('trap-s', 'k', 1::float8, 1::float8, 5::float8, true, 3::float8) AS n,
                     limits.rate_limit_refund('trap-s', 'k', 1::float8, 1::float8, 5::float8) AS o,
                     limits.rate_limit_headers(limits.rate_limit_take('trap', 'k')) AS p,
                     limits.rate_limit_headers(limits.rate_limit_take('trap', 'k'), 'trap') AS q,
                     limits.rate_limit_headers(limits.rate_limit_take_all('{trap}', '{k}')) AS r,
                     limits.rate_limit_buckets('trap-sharded') AS s, limits.rate_limit_reset('trap-sharded', 'k') AS t,
                     limits.rate_limit_reset('trap-x', 'k') AS u;
CALL limits.rate_limit_purge();
CALL limits.rate_limit_reset_limit('trap');
SELECT limits.rate_limit_drop('trap-window');
SQL
}

for db in script_db extension_db; do
    findings=$(lint_routines "$db" 2>&1 || true)
    rl__expect_got "$db: every routine is pinned or qualified, and least privileged" "" \
        "$(printf '%s\n' "$findings" | head -n 30)${findings:+ (and $(printf '%s\n' "$findings" | wc -l) in all)}"
    plant_traps "$db"
    rl_expect_value "$db: the traps are live" "t
1" \
        "SELECT last_value FROM public.captured" -c "SET client_min_messages = error" \
        -c "SELECT (2::float8 >= 1) IS NULL" -d "$db"
    q -d "$db" -c "SELECT pg_catalog.setval('public.captured', 1, false)" >/dev/null
    rl_expect "$db: a superuser calls every routine, and the API" call_every_routine "$db"
    rl_expect_value "$db: no routine runs a trap for a superuser" "0" \
        "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM public.captured" -d "$db"
    { grep -o 'captured by .*\|ERROR: .*' "$RL_CLUSTER_DIR/calls_$db.out" || true; } | sort | uniq -c | sort -rn | head -n 20
done

rl_verdict portable_install

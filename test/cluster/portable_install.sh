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
# where every role may create objects.  Starts a cluster of its own and
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

rl_verdict portable_install

#!/usr/bin/env bash
# test/cluster/signatures.sh
#
# One API, four installs: the native extension, the portable limiter as an
# extension and as a psql script, and the PL/Proxy router, each in a
# database of its own.  From the catalogs of each: every function of the API
# (rate_limit_*) with its identity arguments (pg_get_function_identity_
# arguments), its arguments with their names and defaults (pg_get_function_
# arguments) and its result, a row type spelt out column by column (so that
# rate_limit_define's stored policy, ratelimit.policies, rl_policies and
# the router's rate_limit_policy, compare); and the columns of every
# composite type of the API (pg_attribute; the row types of views and
# tables are not).  The portable installs have exactly the native
# extension's functions and types but those of NATIVE_ONLY; every function
# the router has is the native one but the router's own and the documented
# differences below, and its types are the native ones.  Starts a cluster of
# its own and stops it.
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/lib.sh"

rl_require_install
cluster_start
RL_FAILURES=0
q() { psql -X -A -t -q -v ON_ERROR_STOP=1 "$@"; }
work=$RL_CLUSTER_DIR/signatures
mkdir -p "$work"

# What only the native extension has: the take counters, and the memory
# engine's, live in the C module's shared memory (README, "what differs").
NATIVE_ONLY='rate_limit_stats rate_limit_stats_info rate_limit_stats_reset rate_limit_memory_stats'
# What only the router has: the hash that places a bucket, and the release
# of a lease on every partition.
ROUTER_ONLY='rate_limit_route_hash rl_release_everywhere'

for db in native portable portable_psql router; do
    q -c "CREATE DATABASE $db"
    q -d "$db" -c "REVOKE CREATE ON SCHEMA public FROM PUBLIC"
done
q -d native -c "CREATE EXTENSION ratelimit"
q -d portable -c "CREATE EXTENSION ratelimit_portable"
q -d portable_psql -f "$RL_ROOT/portable/ratelimit.sql" >/dev/null
# The router needs no partition to install: none is reached here.
q -d router -c "CREATE EXTENSION plproxy" \
  -c "CREATE SERVER ratelimit FOREIGN DATA WRAPPER plproxy OPTIONS (p0 'dbname=native')" \
  -c "CREATE USER MAPPING FOR PUBLIC SERVER ratelimit"
q -d router -f "$RL_ROOT/router/ratelimit_router.sql" >/dev/null

# One line per function of the API in schema public: name(identity
# arguments), then its arguments with defaults, then its result; and one
# per type of the API: its columns.  A row type, as a result or a column, is
# shown as its columns.
catalog_sql="
SELECT line FROM (
WITH types AS (
    SELECT t.oid,
           '(' || string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', '
                             ORDER BY a.attnum) || ')' AS columns
      FROM pg_type AS t
      JOIN pg_attribute AS a ON a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped
     WHERE t.typtype = 'c'
     GROUP BY t.oid)
SELECT 'function ' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')'
       || ' | ' || pg_get_function_arguments(p.oid)
       || ' | ' || CASE WHEN p.proretset THEN 'SETOF ' ELSE '' END
       || coalesce(r.columns, format_type(p.prorettype, NULL)) AS line
  FROM pg_proc AS p LEFT JOIN types AS r ON r.oid = p.prorettype
 WHERE p.pronamespace = 'public'::regnamespace AND p.proname LIKE 'rate\_limit\_%'
UNION ALL
SELECT 'type ' || t.typname || ' | ' || c.columns
  FROM pg_type AS t JOIN types AS c ON c.oid = t.oid
 WHERE t.typnamespace = 'public'::regnamespace AND t.typname LIKE 'rate\_limit\_%'
   AND t.typname <> 'rate_limit_policy'
   AND (SELECT c.relkind FROM pg_class AS c WHERE c.oid = t.typrelid) = 'c') AS l
ORDER BY line COLLATE \"C\""
for db in native portable portable_psql router; do
    q -d "$db" -c "$catalog_sql" >"$work/$db"
done
printf '%s functions and %s types in the native extension\n' \
    "$(grep -c '^function ' "$work/native")" "$(grep -c '^type ' "$work/native")"

# differences FILE... : the lines of the first file and of the second that
# the other has not, marked < and >.
differences() { diff "$1" "$2" | grep '^[<>]' || true; }
# without NAMES FILE: FILE without the functions named.
without() {
    local pattern
    pattern="^function ($(tr ' ' '|' <<<"$1"))\\("
    grep -Ev "$pattern" "$2" || true
}

# The portable limiter, either way it is installed: the native extension's
# functions and types, with the same arguments, defaults and results.
for db in portable portable_psql; do
    got=$(differences <(without "$NATIVE_ONLY" "$work/native") "$work/$db")
    if [ -z "$got" ]; then
        printf 'ok: %s: %s functions and types as the native extension has them\n' "$db" "$(wc -l <"$work/$db")"
    else
        printf 'FAILED: %s differs from the native extension (<: native, >: %s):\n%s\n' "$db" "$db" "$got"
        RL_FAILURES=$((RL_FAILURES + 1))
    fi
done
rl_expect_value "native only: $NATIVE_ONLY" "$(wc -w <<<"$NATIVE_ONLY")" \
    "SELECT count(DISTINCT proname) FROM pg_proc WHERE proname = ANY (string_to_array('$NATIVE_ONLY', ' '))" -d native

# The router: each function it has is the native one, but for what it
# does differently by design, which the lines are read through first:
# - rate_limit_define, rate_limit_define_sliding_window,
#   rate_limit_define_concurrency and rate_limit_drop run on every
#   partition: a set of answers, one per partition;
# - rate_limit_take_all is one function, whose costs and max_wait default
#   to NULL, in the place of the two forms (rl_take_all_route routes
#   either): the form with max_wait.
router_as_native() {
    sed -E -e 's/^(function rate_limit_(define|define_sliding_window|define_concurrency|drop)\(.*\| )SETOF /\1/' \
        -e '/^function rate_limit_take_all\(/s/ DEFAULT NULL::(double precision\[\]|interval)//g' "$1"
}
got=$(comm -13 <(LC_ALL=C sort "$work/native") <(without "$ROUTER_ONLY" <(router_as_native "$work/router") | LC_ALL=C sort))
if [ -z "$got" ]; then
    printf 'ok: router: %s functions and types as the native extension has them\n' \
        "$(without "$ROUTER_ONLY" "$work/router" | wc -l)"
else
    printf 'FAILED: the router has what the native extension has not:\n%s\n' "$got"
    RL_FAILURES=$((RL_FAILURES + 1))
fi
# Every type of the API, the functions a caller of one bucket uses and
# those that define a policy are the router's too.
for object in 'type rate_limit_decision ' 'type rate_limit_all_decision ' 'function rate_limit_define(' \
              'function rate_limit_define_sliding_window(' 'function rate_limit_define_concurrency(' \
              'function rate_limit_take(' 'function rate_limit_check('; do
    rl__expect_got "router: has the native extension's $object..." \
        "$(grep -cF "$object" "$work/native" | sed 's/^0$/none/')" \
        "$(grep -cF "$object" <(router_as_native "$work/router"))"
done

rl_verdict signatures

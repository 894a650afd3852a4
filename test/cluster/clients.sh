#!/usr/bin/env bash
# The client packages (clients/node, clients/python), installed as users
# install them, in real apps driven over HTTP on 127.0.0.1:
#
#   - clients/node: npm ci from its lockfile, its own tests (against the
#     portable limiter's current extension script, loaded into PGlite), npm pack; the tarball is installed into
#     an app directory whose Express, Fastify and pg come from
#     test/cluster/clients/package-lock.json;
#   - clients/python: a wheel built offline (pip wheel --no-build-isolation,
#     Debian's setuptools), installed with pip --no-index into a venv over
#     Debian's FastAPI, uvicorn, Django and psycopg; its own tests run there,
#     against a database with the extension and one with the portable limiter;
#   - a concurrency limit through the Node package on a pg Pool, on both
#     (test/cluster/clients/node_concurrency.js): waits nobody can know are
#     null, a denial by a held place has no Retry-After, and on the
#     extension a take in autocommit is refused with 25P01, raised as is;
#     leases: an id and an expiry an hour ahead, a denial while both places
#     are leased, a release true, then false, and false for null;
#   - four apps (test/cluster/clients/): Express and FastAPI against the
#     extension, Fastify and Django against the portable limiter
#     (ratelimit_portable in schema "limits"), each in a database of its own:
#     200 with RateLimit-Policy and RateLimit, then 429 with Retry-After; a
#     cost from the request; keys by account and by address (IPv6 by /64,
#     X-Forwarded-For from the trusted proxy); report-only; take_all; an
#     order that fails rolls its take back; a pool whose connections are all
#     held answers 503 even on a route that fails open; the database stopped:
#     a fail-open route serves unlimited, a fail-closed one answers 503; and
#     started again, limits come back.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
# shellcheck source=test/cluster/clients/lib.sh
. test/cluster/clients/lib.sh

rl_require_install
clients_packages python3-django python3-psycopg2 python3-pytest

work=$(mktemp -d /tmp/ratelimit-clients.XXXXXX)
chmod 755 "$work"
rl_at_exit "rm -rf '$work'"
started=$SECONDS

# ---------------------------------------------------------------------------
# The packages, built and installed from the checkout

rl_log "clients/node: npm ci, tests against PGlite, npm pack"
clients_node_copy "$work/node-pkg"
t0=$SECONDS
# The portable limiter's extension script as make built it.
if (export RL_PORTABLE_SCRIPT=$RL_BUILD_DIR/portable/ratelimit_portable--$(rl_version).sql &&
        cd "$work/node-pkg" && npm test) \
        >"$work/node-test.log" 2>&1; then
    grep -E '^# (tests|pass|fail)' "$work/node-test.log" | tr '\n' ' '
    echo "($((SECONDS - t0)) s)"
else
    grep -vE '^\s*(duration_ms|\.\.\.|---)' "$work/node-test.log" | tail -60
    rl_expect "clients/node: npm test failed" false
fi
mkdir "$work/app"
cp test/cluster/clients/package.json test/cluster/clients/package-lock.json test/cluster/clients/node_app.js \
    test/cluster/clients/node_concurrency.js "$work/app/"
clients_node_install "$work/node-pkg" "$work/app"

rl_log "clients/python: a wheel, installed offline into a venv"
clients_python_venv "$work"
py=$CLIENTS_PY

# ---------------------------------------------------------------------------
# The apps

cluster_start

HOLDER_PID=
stop_holder() {
    if [ -n "$HOLDER_PID" ]; then
        exec 9>&- 2>/dev/null || true
        kill "$HOLDER_PID" 2>/dev/null || true
        wait "$HOLDER_PID" 2>/dev/null || true
        HOLDER_PID=
    fi
}
rl_at_exit stop_holder

# start_app APP [VAR=VALUE...]: the app, with these settings, in the background.
start_app() {
    local app=$1
    shift
    case $app in
        express|fastify) app_start "$app" sh -c 'cd "$1" && shift && exec env "$@" node node_app.js' - \
                             "$work/app" "$@" FRAMEWORK="$app" NODE_ENV=production ;;
        fastapi|django) app_start "$app" sh -c 'cd "$1" && shift && exec env "$@"' - \
                            test/cluster/clients "$@" "$py" "${app}_app.py" ;;
    esac
}

sql() { psql -X -A -t -q -v ON_ERROR_STOP=1 -d "$db" -c "$1"; }

# The policies refill so slowly ("api" a token every 720 s, "orders" every
# 1800 s, "bytes" every 86.4 s) that no delay changes how many whole tokens
# remain: r is exact. Waits are not: at a bucket's first take the wait for
# its next token (t, rounded up) is a whole interval, and every second since
# shortens it by a second.
#
#   first_take NAME       the time now, under NAME: call it before the
#                         request that takes first from a bucket
#   waited NOMINAL NAME   an extended regular expression of the whole
#                         seconds from NOMINAL - ceil(s) to NOMINAL, s the
#                         seconds since first_take NAME: a wait that was
#                         NOMINAL at that take. Call it after the request
#                         whose answer it checks (the arguments of expect
#                         expand left to right: after "$(request ...)").
declare -A FIRST_TAKE=()
usecs() { local now=${EPOCHREALTIME/[.,]/}; echo "$((10#$now))"; }
first_take() { FIRST_TAKE[$1]=$(usecs); }
waited() {
    local nominal=$1 since=${FIRST_TAKE[$2]:?first_take $2 was not called} s n alternatives
    s=$((($(usecs) - since + 999999) / 1000000))
    alternatives=$nominal
    for ((n = nominal - 1; n >= nominal - s && n >= 0; n--)); do alternatives+="|$n"; done
    echo "($alternatives)"
}

# until_sql WHAT SQL: waits (at most 20 s) until SQL answers t.
until_sql() {
    local tries=0
    until [ "$(sql "$2")" = t ]; do
        tries=$((tries + 1))
        if [ "$tries" -gt 200 ]; then
            rl_expect "$1: not seen within 20 s" false
            return 1
        fi
        sleep 0.1
    done
}

server_stop() { rl_as_owner "$RL_PG_BINDIR/pg_ctl" -D "$RL_CLUSTER_DATA" -m fast -w -t 60 stop >/dev/null; }
server_start() {
    rl_as_owner "$RL_PG_BINDIR/pg_ctl" -D "$RL_CLUSTER_DATA" -l "$RL_CLUSTER_DIR/server.log" -w -t 60 start \
        >/dev/null
}

# create_database DB SCHEMA: DB with the extension (no SCHEMA) or the
# portable limiter (in SCHEMA), the policies ("exports": one place at once;
# "calls": two at once, as leases of an hour) and the orders table.
create_database() {
    db=$1 schema=$2
    q=${schema:+$schema.}
    psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE DATABASE $db"
    if [ -n "$schema" ]; then
        sql "CREATE SCHEMA $schema; CREATE EXTENSION ratelimit_portable SCHEMA $schema"
    else
        sql "CREATE EXTENSION ratelimit"
    fi
    sql "SELECT ${q}rate_limit_define('api', 5, '1 hour', burst => 3);
         SELECT ${q}rate_limit_define('orders', 2, '1 hour');
         SELECT ${q}rate_limit_define('bytes', 1000, '1 day');
         SELECT ${q}rate_limit_define_concurrency('exports', 1);
         SELECT ${q}rate_limit_define_concurrency('calls', 2, lease => '1 hour');
         CREATE TABLE orders (id bigserial PRIMARY KEY, item text NOT NULL CHECK (item <> ''))" >/dev/null
}

# The Python package's tests, without and with a database of each kind.
for schema in '' limits; do
    create_database "client_tests${schema:+_$schema}" "$schema"
    log=$work/py-test${schema:+-$schema}.log
    if (cd "$work" && RL_TEST_DSN="dbname=$db" RL_TEST_SCHEMA=$schema \
            "$py" -m pytest -q -p no:cacheprovider "$work/py-src/tests") >"$log" 2>&1; then
        echo "clients/python on ${schema:+the portable limiter in }${schema:-the extension}: $(tail -n 1 "$log")"
    else
        cat "$log"
        rl_expect "clients/python: pytest failed on ${schema:-the extension}" false
    fi
    # The same databases, through the Node package.
    got=$(cd "$work/app" && PGDATABASE=$db RL_SCHEMA=$schema node node_concurrency.js 2>&1 | tr '\n' ';') || true
    if [ -n "$schema" ]; then autocommit='autocommit: granted true 0'; else autocommit='autocommit: 25P01 error'; fi
    leases='lease: true 1 true true;lease denied: false null null true;release: true false false;'
    expect "clients/node: a concurrency limit on ${schema:+the portable limiter in }${schema:-the extension}" "$got" \
        "$autocommit;granted: true 0 null null undefined;denied: RateLimitedError 429 null undefined;free: 0;$leases"
done

for app in express fastify fastapi django; do
    echo "== $app"
    case $app in
        express|fastapi) create_database "app_$app" '' ;;
        *) create_database "app_$app" limits ;;
    esac

    start_app "$app" PGDATABASE="$db" RL_SCHEMA="$schema"
    # "api": 5 an hour, burst 3; r is what remains, t the seconds until more.
    first_take ip
    expect "$app: GET /api 1" "$(request GET /api)" '200\|"api";q=5;w=3600\|"api";r=2;t=720\|\|served'
    for i in 2 3; do
        expect "$app: GET /api $i" "$(request GET /api)" \
            "200\|\"api\";q=5;w=3600\|\"api\";r=$((3 - i));t=$(waited 720 ip)\|\|served"
    done
    expect "$app: GET /api 4: denied" "$(request GET /api)" \
        "429\|\"api\";q=5;w=3600\|\"api\";r=0;t=$(waited 720 ip)\|$(waited 720 ip)\|.*"

    # The cost from the request (?cost=N), per account (X-User).
    u=(-H 'X-User: coster')
    first_take coster
    expect "$app: cost 2" "$(request GET '/api?cost=2' "${u[@]}")" '200\|.*\|"api";r=1;t=720\|\|served'
    expect "$app: cost 2 again: denied" "$(request GET '/api?cost=2' "${u[@]}")" \
        "429\|.*\|\"api\";r=1;t=$(waited 720 coster)\|$(waited 720 coster)\|.*"
    expect "$app: cost 1" "$(request GET '/api?cost=1' "${u[@]}")" \
        "200\|.*\|\"api\";r=0;t=$(waited 720 coster)\|\|served"

    # An account is one bucket, whatever its address.
    first_take user42
    expect "$app: user 42 from 192.0.2.50" \
        "$(request GET /api -H 'X-User: 42' -H 'X-Forwarded-For: 192.0.2.50')" '200\|.*\|"api";r=2;t=720\|\|served'
    expect "$app: user 42 from 192.0.2.51" \
        "$(request GET /api -H 'X-User: 42' -H 'X-Forwarded-For: 192.0.2.51')" \
        "200\|.*\|\"api\";r=1;t=$(waited 720 user42)\|\|served"

    # From the trusted proxy (127.0.0.1), the last X-Forwarded-For entry;
    # IPv6 by /64.
    xff() { request GET /api -H "X-Forwarded-For: $1"; }
    first_take v6
    expect "$app: 2001:db8:1:2::1 (after 203.0.113.7)" "$(xff '203.0.113.7, 2001:db8:1:2::1')" '200\|.*\|"api";r=2;t=720\|\|served'
    expect "$app: 2001:db8:1:2::ffff, same /64" "$(xff 2001:db8:1:2::ffff)" \
        "200\|.*\|\"api\";r=1;t=$(waited 720 v6)\|\|served"
    expect "$app: 2001:db8:1:3::1, another /64" "$(xff 2001:db8:1:3::1)" '200\|.*\|"api";r=2;t=720\|\|served'
    expect "$app: the buckets' keys" \
        "$(sql "SELECT string_agg(key, ' ' ORDER BY key) FROM ${q}rate_limit_buckets('api') WHERE key NOT LIKE 'user:c%'")" \
        'ip:127\.0\.0\.1 ip:2001:db8:1:2::/64 ip:2001:db8:1:3::/64 user:42'

    # Report-only: counted, never refused.
    r=(-H 'X-User: reporter')
    first_take reporter
    expect "$app: report-only 1" "$(request GET /report "${r[@]}")" '200\|.*\|"api";r=2;t=720\|\|served'
    for i in 2 3; do
        expect "$app: report-only $i" "$(request GET /report "${r[@]}")" \
            "200\|.*\|\"api\";r=$((3 - i));t=$(waited 720 reporter)\|\|served"
    done
    expect "$app: report-only 4: served, reported" "$(request GET /report "${r[@]}")" \
        "200\|.*\|\"api\";r=0;t=$(waited 720 reporter)\|\|served, would refuse"
    expect "$app: then the limited route: denied" "$(request GET /api "${r[@]}")" \
        "429\|.*\|\"api\";r=0;t=$(waited 720 reporter)\|$(waited 720 reporter)\|.*"

    # take_all: both limits or neither.
    b=(-H 'X-Forwarded-For: 192.0.2.77')
    first_take both
    expect "$app: take_all api + 600 bytes" "$(request GET '/both?bytes=600' "${b[@]}")" \
        '200\|"api";q=5;w=3600, "bytes";q=1000;w=86400\|"api";r=2;t=720, "bytes";r=400;t=87\|\|served'
    # Denied: 200 more bytes, at 86.4 s each.
    expect "$app: take_all api + 600 bytes again: denied by bytes" "$(request GET '/both?bytes=600' "${b[@]}")" \
        "429\|.*\|\"api\";r=2;t=$(waited 720 both), \"bytes\";r=400;t=$(waited 87 both)\|$(waited 17280 both)\|denied by bytes"
    expect "$app: the denied take_all took nothing from api" "$(request GET /api "${b[@]}")" \
        "200\|.*\|\"api\";r=1;t=$(waited 720 both)\|\|served"

    # "orders": 2 an hour, taken inside the order's transaction.
    for i in 1 2 3; do
        expect "$app: order $i without an item: 400, take rolled back" "$(request POST /orders)" '400\|\|\|\|.*'
    done
    first_take orders
    expect "$app: order with an item" "$(request POST '/orders?item=book')" '201\|"orders";q=2;w=3600\|"orders";r=1;t=1800\|\|ordered'
    expect "$app: second order" "$(request POST '/orders?item=pen')" \
        "201\|.*\|\"orders\";r=0;t=$(waited 1800 orders)\|\|ordered"
    expect "$app: third order: denied" "$(request POST '/orders?item=ink')" \
        "429\|\"orders\";q=2;w=3600\|\"orders\";r=0;t=$(waited 1800 orders)\|$(waited 1800 orders)\|.*"
    expect "$app: orders stored" "$(sql "SELECT string_agg(item, ',' ORDER BY id) FROM orders")" 'book,pen'

    # A saturated pool (2 connections): a transaction holds the bucket of
    # user:held, two requests of that user wait for it, each on a connection
    # of the pool; a third request finds none in time.
    rm -f "$work/hold"
    mkfifo "$work/hold"
    psql -X -q -v ON_ERROR_STOP=1 -d "$db" <"$work/hold" >/dev/null &
    HOLDER_PID=$!
    exec 9>"$work/hold"
    first_take held
    echo "BEGIN; SELECT allowed FROM ${q}rate_limit_take('api', 'user:held');" >&9
    until_sql "$app: the holder's take" \
        "SELECT count(*) = 1 FROM pg_stat_activity WHERE datname = '$db' AND state = 'idle in transaction'" || true
    request GET /open -H 'X-User: held' >"$work/held1" &
    w1=$!
    request GET /open -H 'X-User: held' >"$work/held2" &
    w2=$!
    until_sql "$app: two requests waiting for the held bucket" \
        "SELECT count(*) = 2 FROM pg_stat_activity WHERE datname = '$db' AND wait_event_type = 'Lock'" || true
    expect "$app: pool saturated, fail-open route: 503, not served" \
        "$(request GET /open -H 'X-User: other')" '503\|\|\|1\|.*'
    echo "COMMIT;" >&9
    exec 9>&-
    wait "$HOLDER_PID" || true
    HOLDER_PID=
    wait "$w1" "$w2" || true
    expect "$app: the waiting requests, once the holder committed" \
        "$(sort "$work/held1" "$work/held2" | cut -d'|' -f1,3 | tr '\n' ' ')" \
        "200\|\"api\";r=0;t=$(waited 720 held) 200\|\"api\";r=1;t=$(waited 720 held) "

    # The database stopped, then started again.
    server_stop
    expect "$app: database stopped, fail-open route: served unlimited" \
        "$(request GET /open -H 'X-User: outage')" '200\|\|\|\|served'
    expect "$app: database stopped, fail-closed route: 503" \
        "$(request GET /api -H 'X-User: outage')" '503\|\|\|1\|.*'
    server_start
    tries=0
    until got=$(request GET /api -H 'X-User: back') && [ "${got%%|*}" != 503 ] || [ "$tries" -ge 60 ]; do
        tries=$((tries + 1))
        sleep 0.5
    done
    expect "$app: database started again: limited again (after $tries tries)" "$got" \
        '200\|"api";q=5;w=3600\|"api";r=2;t=720\|\|served'
    app_stop
done

echo "clients.sh: $((SECONDS - started)) s"
rl_verdict clients

#!/usr/bin/env bash
# The application examples (examples/node: Express, examples/python:
# FastAPI, each on the client package of clients/, installed from the
# checkout as users install it), each started against a database of its own
# on the throwaway cluster and driven over real HTTP on 127.0.0.1:
#
#   - GET /api: 200s while the burst lasts, with the RateLimit-Policy and
#     RateLimit values the decision gives, then 429 with Retry-After;
#   - X-Forwarded-For counts only from the trusted proxy, its last entry
#     across every line of the header; IPv6 clients are limited by /64;
#   - POST /orders: a failed order rolls its take back (the client keeps the
#     token), a good one is counted, the limit holds, and exactly the good
#     orders are stored;
#   - the database unreachable: 503 by default, 200 unlimited when told to
#     fail open.
#
# The limiter's clock is fixed in each example's database
# (ratelimit.fixed_clock), so that every wait in the answers is exact
# however long the requests take.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
# shellcheck source=test/cluster/clients/lib.sh
. test/cluster/clients/lib.sh

rl_require_install
clients_packages

work=$(mktemp -d /tmp/ratelimit-apps.XXXXXX)
chmod 755 "$work"
rl_at_exit "rm -rf '$work'"

# Express and node-postgres at the versions package-lock.json pins, and
# pg-ratelimit from its packed tarball, outside the checkout.
clients_node_copy "$work/node-pkg"
mkdir "$work/node-app"
cp examples/node/package.json examples/node/package-lock.json examples/node/server.js "$work/node-app/"
clients_node_install "$work/node-pkg" "$work/node-app"
# pg_ratelimit from its wheel, in a venv over Debian's FastAPI and psycopg.
clients_python_venv "$work"

cluster_start

# start_app LANGUAGE [VAR=VALUE...]: the example, with these settings, in the
# background, on a port the system picks (it prints it).
start_app() {
    local language=$1
    shift
    case $language in
        node) app_start "$language" env "$@" HOST=127.0.0.1 PORT=0 node "$work/node-app/server.js" ;;
        python) app_start "$language" env "$@" HOST=127.0.0.1 PORT=0 "$CLIENTS_PY" examples/python/server.py ;;
    esac
}

# head_of METHOD PATH [CURL ARGS...]: "STATUS|RateLimit-Policy|RateLimit|Retry-After".
head_of() { request "$@" | cut -d'|' -f1-4; }

for language in node python; do
    echo "== examples/$language"
    db=app_$language
    psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE DATABASE $db"
    psql -X -q -v ON_ERROR_STOP=1 -d "$db" -c "CREATE EXTENSION ratelimit" -f examples/setup.sql \
        -c "ALTER DATABASE $db SET ratelimit.fixed_clock = 1700000000" >/dev/null

    start_app "$language" PGDATABASE="$db"
    # "api": 5 a minute, burst 3.  r is what remains; t the seconds until
    # more: a token every 12 s, and the clock stands still.
    expect "$language: 1st GET /api" "$(head_of GET /api)" '200\|"api";q=5;w=60\|"api";r=2;t=12\|'
    expect "$language: 2nd GET /api" "$(head_of GET /api)" '200\|"api";q=5;w=60\|"api";r=1;t=12\|'
    expect "$language: 3rd GET /api" "$(head_of GET /api)" '200\|"api";q=5;w=60\|"api";r=0;t=12\|'
    expect "$language: 4th GET /api: denied" "$(head_of GET /api)" '429\|"api";q=5;w=60\|"api";r=0;t=12\|12'

    # With no proxy trusted, X-Forwarded-For changes nothing: still denied.
    expect "$language: X-Forwarded-For from an untrusted peer" \
        "$(head_of GET /api -H "X-Forwarded-For: 2001:db8:9::1")" '429\|"api";q=5;w=60\|"api";r=0;t=12\|12'
    app_stop

    # Behind a trusted proxy: its last entry counts, one bucket per IPv6 /64.
    start_app "$language" PGDATABASE="$db" TRUST_PROXY=127.0.0.1
    xff() { head_of GET /api -H "X-Forwarded-For: 203.0.113.7, $1"; }
    expect "$language: 2001:db8:1:2::1" "$(xff 2001:db8:1:2::1)" '200\|.*\|"api";r=2;t=12\|'
    expect "$language: 2001:db8:1:2::ffff, same /64" "$(xff 2001:db8:1:2::ffff)" '200\|.*\|"api";r=1;t=12\|'
    expect "$language: 2001:db8:1:3::1, another /64" "$(xff 2001:db8:1:3::1)" '200\|.*\|"api";r=2;t=12\|'
    expect "$language: two X-Forwarded-For lines: the last entry" \
        "$(head_of GET /api -H "X-Forwarded-For: 2001:db8:1:3::9" -H "X-Forwarded-For: 2001:db8:1:4::1")" \
        '200\|.*\|"api";r=2;t=12\|'

    # "orders": 2 a minute, burst 2, taken inside the order's transaction.
    for i in 1 2 3; do
        expect "$language: order $i without an item: refused, take rolled back" \
            "$(head_of POST /orders)" '400\|\|\|'
    done
    expect "$language: order with an item" "$(head_of POST '/orders?item=book')" '201\|"orders";q=2;w=60\|"orders";r=1;t=30\|'
    expect "$language: second order" "$(head_of POST '/orders?item=pen')" '201\|"orders";q=2;w=60\|"orders";r=0;t=30\|'
    expect "$language: third order: denied" "$(head_of POST '/orders?item=ink')" '429\|"orders";q=2;w=60\|"orders";r=0;t=30\|30'
    stored=$(psql -X -A -t -d "$db" -c "SELECT string_agg(client || ' ' || item, ',' ORDER BY id) FROM orders")
    expect "$language: orders stored, with the client's key" "$stored" 'ip:127\.0\.0\.1 book,ip:127\.0\.0\.1 pen'
    expect "$language: every bucket stamped by the fixed clock" "$(psql -X -A -t -d "$db" -c "
        SELECT count(*) || ' ' || bool_and(last_refill = pg_catalog.to_timestamp(1700000000))
          FROM (SELECT last_refill FROM rate_limit_buckets('api')
                UNION ALL SELECT last_refill FROM rate_limit_buckets('orders')) AS b")" '5 true'
    app_stop

    # The database unreachable (a port nothing listens on).
    dead_port=$(rl_pick_port)
    start_app "$language" PGDATABASE="$db" PGPORT="$dead_port"
    expect "$language: unreachable, failing closed" "$(head_of GET /api)" '503\|\|\|1'
    app_stop
    start_app "$language" PGDATABASE="$db" PGPORT="$dead_port" RATELIMIT_FAIL=open
    expect "$language: unreachable, failing open" "$(head_of GET /api)" '200\|\|\|'
    app_stop
done

rl_verdict app_examples

#!/usr/bin/env bash
# test/cluster/router.sh
#
# Limits spread over two partition servers by a PL/Proxy router
# (router/ratelimit_router.sql): one router and two partitions, each its
# own throwaway cluster on a unix socket; eight logical partitions, the
# even ones on the first server, the odd ones on the second.  Checks that
# the install refuses a server whose connection strings name a user, that
# every bucket lives where rate_limit_route_hash() puts it, that the route
# of non-ASCII keys is the same in UTF-8, LATIN1 and SQL_ASCII databases
# and the md5 of the text in UTF-8, that a NULL name or key is refused
# (22004) and bytes that are not UTF-8 too (22021), that a policy of each
# kind (a token bucket, a sliding window, a concurrency limit with a lease
# and without) is defined everywhere by one call and then works through the
# router, that a routed take commits on its
# partition whatever the caller's transaction does, that rate_limit_take_all
# is routed within one partition and refused across two with nothing taken,
# that 8 clients at READ COMMITTED through the router stay within every
# key's bound with no error and that the partitions together hold exactly
# what the clients were granted, and that with one partition stopped its
# keys fail with PL/Proxy's error naming it while the other's keep working,
# and all work again once it is back; and that every routed function
# reaches its partition as the calling role, whose grants there decide.
# Starts its three clusters and stops them.
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/lib.sh"

rl_require_install
make -s -C "$RL_ROOT" load >/dev/null
cluster_start # the router
RL_FAILURES=0
q() { psql -X -A -t -q -v ON_ERROR_STOP=1 "$@"; }
# error_of SQL [psql options]: SQLSTATE: message|detail|hint of its error.
error_of() {
    psql -X -q -v VERBOSITY=verbose -v SHOW_CONTEXT=never -c "$1" "${@:2}" 2>&1 |
        sed -n 's/^ERROR:  //p; s/^DETAIL:  //p; s/^HINT:  //p' | paste -sd '|'
}

# partition_start N: a cluster of its own for partition server N, in
# $RL_CLUSTER_DIR/partN; its port into PART_PORT[N].
declare -A PART_PORT
partition_start() {
    local dir=$RL_CLUSTER_DIR/part$1 port
    port=$(rl_pick_port)
    rl_as_owner mkdir "$dir"
    rl_as_owner "$RL_PG_BINDIR/initdb" -D "$dir/data" -A trust -U postgres --no-sync -E UTF8 \
        --locale=C.UTF-8 >/dev/null
    rl_as_owner tee -a "$dir/data/postgresql.conf" >/dev/null <<EOF
listen_addresses = ''
unix_socket_directories = '$dir'
port = $port
fsync = off
max_connections = 50
EOF
    rl_as_owner "$RL_PG_BINDIR/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null
    rl_at_exit "rl_as_owner '$RL_PG_BINDIR/pg_ctl' -D '$dir/data' -m immediate -w -t 30 stop >/dev/null 2>&1 || true"
    PART_PORT[$1]=$port
}
part() { local n=$1; shift; q -h "$RL_CLUSTER_DIR/part$n" -p "${PART_PORT[$n]}" "$@"; }

partition_start 1
partition_start 2
for n in 1 2; do part "$n" -c "CREATE EXTENSION ratelimit" >/dev/null; done

conninfo() { printf 'host=%s port=%s dbname=postgres' "$RL_CLUSTER_DIR/part$1" "${PART_PORT[$1]}"; }
# A connection string that names a user would make PL/Proxy connect every
# caller as that user, ignoring the user mappings: the install refuses it.
q -c "CREATE EXTENSION plproxy" \
  -c "CREATE SERVER ratelimit FOREIGN DATA WRAPPER plproxy OPTIONS (
          p0 '$(conninfo 1)', p1 '$(conninfo 2) user=postgres')"
rl_expect_sqlstate "install: refused when a partition's connection string names a user" 22023 \
    "" -f "$RL_ROOT/router/ratelimit_router.sql"
rl_expect_value "install: refused, nothing installed" "|" \
    "SELECT to_regtype('rate_limit_decision'), to_regprocedure('rate_limit_route_hash(text, text)')"
q -c "DROP SERVER ratelimit"
q -c "CREATE SERVER ratelimit FOREIGN DATA WRAPPER plproxy OPTIONS (
          p0 '$(conninfo 1)', p1 '$(conninfo 2)', p2 '$(conninfo 1)', p3 '$(conninfo 2)',
          p4 '$(conninfo 1)', p5 '$(conninfo 2)', p6 '$(conninfo 1)', p7 '$(conninfo 2)')" \
  -c "CREATE USER MAPPING FOR PUBLIC SERVER ratelimit"
q -f "$RL_ROOT/router/ratelimit_router.sql" >/dev/null

# What the partitions revoke from PUBLIC (refunds, resets and what
# defines, drops or lists policies and buckets), the router revokes too.
revoked_sql="SELECT string_agg(DISTINCT proname, ' ' ORDER BY proname) FROM pg_proc
              WHERE pronamespace = 'public'::regnamespace AND proname LIKE 'rate\_limit\_%'
                AND NOT has_function_privilege('public', oid, 'EXECUTE')"
router_functions=$(q -c "SELECT string_agg(DISTINCT proname, ',') FROM pg_proc
                          WHERE pronamespace = 'public'::regnamespace")
rl_expect_value "install: revoked from PUBLIC as on the partitions" \
    "$(part 1 -c "$revoked_sql AND proname = ANY ('{$router_functions}')")" "$revoked_sql"

# One call defines a policy on every partition server (PL/Proxy runs RUN ON
# ALL once per connection string).
rl_expect_value "define: one stored policy per partition server" 2 \
    "SELECT count(*) FROM rate_limit_define('api', 0, '1 second', 5)"
for n in 1 2; do
    rl_expect_value "define: server $n holds the policy" "api|5" \
        "SELECT name, burst FROM ratelimit.policies" -h "$RL_CLUSTER_DIR/part$n" -p "${PART_PORT[$n]}"
done

# Every bucket lives on the server its hash names: even logical partitions
# on server 1, odd ones on server 2; twenty keys reach both.
q -c "SELECT count(*) FROM generate_series(1, 20) AS g, LATERAL rate_limit_take('api', 'k' || g) AS d" >/dev/null
for n in 1 2; do
    parity=$((n - 1))
    rl_expect_value "take: server $n holds exactly the keys routed to it" "$(q -c "
        SELECT string_agg('k' || g, ',' ORDER BY 'k' || g) FROM generate_series(1, 20) AS g
         WHERE (rate_limit_route_hash('api', 'k' || g) & 7) % 2 = $parity")" \
        "SELECT string_agg(key, ',' ORDER BY key) FROM ratelimit.buckets WHERE name = 'api'" \
        -h "$RL_CLUSTER_DIR/part$n" -p "${PART_PORT[$n]}"
done
rl_expect_value "take: the keys reach both servers" 2 \
    "SELECT count(DISTINCT (rate_limit_route_hash('api', 'k' || g) & 7) % 2) FROM generate_series(1, 20) AS g"

# The route is one function of (name, key) as text in every database,
# whatever its encoding: the same on the router (UTF-8), in a LATIN1 and a
# SQL_ASCII database with router/route_hash.sql, as a source partition uses
# it to move a partition, and on partition server 1.  1000 keys of two
# Latin-1 letters each (code points 160 to 255: one byte in LATIN1, two in
# UTF-8), built from their UTF-8 bytes so that every database reads the
# same characters, under a name with one too.
export PGCLIENTENCODING=UTF8
q -c "CREATE DATABASE latin1 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0" \
  -c "CREATE DATABASE sql_ascii ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
for db in latin1 sql_ascii; do q -d "$db" -f "$RL_ROOT/router/route_hash.sql" >/dev/null; done
part 1 -f "$RL_ROOT/router/route_hash.sql" >/dev/null
utf8_letter() { # the letter of code point $1 (160 to 255), from its UTF-8 bytes
    printf "convert_from(decode(to_hex(192 + (%s) / 64) || to_hex(128 + (%s) %% 64), 'hex'), 'UTF8')" "$1" "$1"
}
latin_keys="SELECT g, 'clé ' || $(utf8_letter '160 + g % 96') || $(utf8_letter '160 + g / 96') || g AS key
              FROM generate_series(1, 1000) AS g"
routes_sql="SELECT rate_limit_route_hash('débit', key) FROM ($latin_keys) AS k ORDER BY g"
q -c "$routes_sql" >"$RL_CLUSTER_DIR/routes.utf8"
# route_differences FILE: keys whose hash, and whose partition of 8, differ from the router's.
route_differences() {
    paste -d ' ' "$RL_CLUSTER_DIR/routes.utf8" "$1" |
        awk '$1 != $2 { h++ } ($1 % 8 + 8) % 8 != ($2 % 8 + 8) % 8 { p++ } END { printf "%d|%d", h, p }'
}
rl_expect_value "routes: 1000 keys, none ASCII" "1000|1000" \
    "SELECT count(*), count(*) FILTER (WHERE key !~ '^[ -~]*$') FROM ($latin_keys) AS k"
rl_expect_value "routes: LATIN1 stores their 3000 non-ASCII letters in one byte each" 3000 \
    "SELECT sum(octet_length(convert_to(key, 'UTF8')) - octet_length(key)) FROM ($latin_keys) AS k" -d latin1
for db in latin1 sql_ascii; do
    q -d "$db" -c "$routes_sql" >"$RL_CLUSTER_DIR/routes.$db"
    rl__expect_got "routes: a $db database routes every key as the router (differing hashes|partitions)" \
        "0|0" "$(route_differences "$RL_CLUSTER_DIR/routes.$db")"
done
part 1 -c "$routes_sql" >"$RL_CLUSTER_DIR/routes.part1"
rl__expect_got "routes: route_hash.sql on partition server 1 routes every key as the router" \
    "0|0" "$(route_differences "$RL_CLUSTER_DIR/routes.part1")"
# Stable: in a UTF-8 database the hash is the md5 of the text itself, as it
# always was there, for ASCII and non-ASCII names and keys alike.
old_hash="('x' || substr(md5(length(name)::text || ':' || name || key), 1, 8))::bit(32)::integer"
rl_expect_value "routes: the same hashes as the md5 of the text in a UTF-8 database" "3000|0" \
    "SELECT count(*), count(*) FILTER (WHERE rate_limit_route_hash(name, key) <> $old_hash)
       FROM (SELECT 'débit' AS name, key FROM ($latin_keys) AS k
             UNION ALL SELECT 'api', 'k' || g FROM generate_series(1, 1000) AS g
             UNION ALL SELECT 'ünïcode ' || g, 'ключ ' || g || ' 鍵 😀' FROM generate_series(1, 1000) AS g) AS t"
# What has no UTF-8 form is refused: a byte that is not UTF-8 in SQL_ASCII.
rl__expect_got "routes: SQL_ASCII refuses a key that is not UTF-8" \
    "22021: key has no UTF-8 form|Converting it to UTF-8 failed: invalid byte sequence for encoding \"UTF8\": 0xe9. A bucket is routed by a hash of the UTF-8 form of its name and key, the same in a database of any encoding.|Pass a name and key that UTF-8 can represent, for example the md5() of the value." \
    "$(error_of "SELECT rate_limit_route_hash('api', 'caf' || chr(233))" -d sql_ascii)"
# A NULL name or key names no bucket: 22004 from the hash, on the router too.
null_name="22004: name must not be null|A bucket is routed by a hash of its name and key; a NULL name names no bucket.|Pass the name of the limit, such as 'api'."
null_key="22004: key must not be null|A bucket is routed by a hash of its name and key; a NULL key names no bucket.|Use key '' for a limit shared by every caller."
rl__expect_got "routes: NULL name" "$null_name" "$(error_of "SELECT rate_limit_route_hash(NULL, 'k1')")"
rl__expect_got "routes: NULL key" "$null_key" "$(error_of "SELECT rate_limit_route_hash('api', NULL)")"
rl__expect_got "routes: NULL name, LATIN1" "$null_name" "$(error_of "SELECT rate_limit_route_hash(NULL, 'k1')" -d latin1)"
rl__expect_got "routes: a routed take of a NULL name" "$null_name" \
    "$(error_of "SELECT * FROM rate_limit_take(NULL, 'k1')")"
rl__expect_got "routes: a routed check of a NULL key" "$null_key" \
    "$(error_of "SELECT * FROM rate_limit_check('api', NULL, 0)")"
unset PGCLIENTENCODING

# A routed take commits on its partition: the caller's rollback does not
# give its token back.
q -c "BEGIN" -c "SELECT remaining FROM rate_limit_take('api', 'k1')" -c "ROLLBACK" >/dev/null
rl_expect_value "rollback on the router: the partition kept the take" 3 \
    "SELECT remaining FROM rate_limit_check('api', 'k1', 0)"

# A sliding window defined by one call on the router: stored on every
# partition server, then taken through the router on its key's partition.
# (A window of 1000 years, aligned on the Unix epoch: no take here crosses
# one's end.)
rl_expect_value "define_sliding_window: one stored policy per partition server" 2 \
    "SELECT count(*) FROM rate_limit_define_sliding_window('slide', 3, '1000 years')"
for n in 1 2; do
    rl_expect_value "define_sliding_window: server $n holds the policy" "slide|sliding|3|3" \
        "SELECT name, kind, rate, burst FROM ratelimit.policies WHERE name = 'slide'" \
        -h "$RL_CLUSTER_DIR/part$n" -p "${PART_PORT[$n]}"
done
for expected in 't|2' 't|1' 't|0' 'f|0'; do
    rl_expect_value "sliding window: a routed take, at most max_count in the window" "$expected" \
        "SELECT allowed, remaining FROM rate_limit_take('slide', 's1')"
done
slide_server=$(( $(q -c "SELECT (rate_limit_route_hash('slide', 's1') & 7) % 2") + 1 ))
for n in 1 2; do
    rl_expect_value "sliding window: server $n holds the key's window if it is the key's ($slide_server)" \
        "$([ "$n" = "$slide_server" ] && echo s1)" \
        "SELECT string_agg(key, ',') FROM ratelimit.buckets WHERE name = 'slide'" \
        -h "$RL_CLUSTER_DIR/part$n" -p "${PART_PORT[$n]}"
done
rl_expect_value "sliding window: a routed refund gives one back" "t|1" \
    "SELECT allowed, remaining FROM rate_limit_refund('slide', 's1', 1)"
rl_expect_value "sliding window: which a routed take then takes" "t|0" \
    "SELECT allowed, remaining FROM rate_limit_take('slide', 's1')"

# A concurrency limit defined by one call on the router, on every
# partition server.  Its place would be held by the partition's own
# transaction, which PL/Proxy ends with the call: a routed take is refused
# by the partition, inside the caller's transaction block or not, and
# holds nothing there.
rl_expect_value "define_concurrency: one stored policy per partition server" 2 \
    "SELECT count(*) FROM rate_limit_define_concurrency('held', 1)"
for n in 1 2; do
    rl_expect_value "define_concurrency: server $n holds the policy" "held|concurrency|1|" \
        "SELECT name, kind, burst, lease FROM ratelimit.policies WHERE name = 'held'" \
        -h "$RL_CLUSTER_DIR/part$n" -p "${PART_PORT[$n]}"
done
rl_expect_sqlstate "concurrency limit: a routed take is refused" 25P01 \
    "SELECT * FROM rate_limit_take('held', 'k1')"
rl__expect_got "concurrency limit: refused within the router's transaction block too" \
    "25P01: public.rate_limit_take(3): [postgres] REMOTE ERROR: rate_limit_take() of a concurrency limit can only be used in transaction blocks" \
    "$(error_of "BEGIN; SELECT * FROM rate_limit_take('held', 'k1'); COMMIT" | cut -d '|' -f 1)"
rl_expect_value "concurrency limit: a routed check answers, every place free" "t|1" \
    "SELECT allowed, remaining FROM rate_limit_check('held', 'k1', 0)"
rl_expect_sqlstate "concurrency limit: a routed take_all is refused" 25P01 \
    "SELECT * FROM rate_limit_take_all(ARRAY['held'], ARRAY['k1'])"

# A lease policy defined by one call on the router: a lease is taken on the
# partition of (name, key) and committed there with the call: it outlives
# the caller's rollback on the router, and a release through the router
# (tried on every partition) gives it back once.
rl_expect_value "define_concurrency with a lease: one stored policy per partition server" "2|1" \
    "SELECT count(*), count(DISTINCT (name, kind, burst, lease))
       FROM rate_limit_define_concurrency('leased', 1, lease => '1 hour')"
for n in 1 2; do
    rl_expect_value "define_concurrency with a lease: server $n holds the policy" "leased|concurrency|1|01:00:00" \
        "SELECT name, kind, burst, lease FROM ratelimit.policies WHERE name = 'leased'" \
        -h "$RL_CLUSTER_DIR/part$n" -p "${PART_PORT[$n]}"
done
lease=$(q -c "BEGIN" -c "SELECT lease FROM rate_limit_lease('leased', 'k1')" -c "ROLLBACK")
rl_expect_value "lease: routed, granted with an id" "t" "SELECT '$lease'::uuid IS NOT NULL"
rl_expect_value "lease: the caller's rollback does not give it back" "f|0|t" \
    "SELECT allowed, remaining, retry_after > 0 FROM rate_limit_lease('leased', 'k1')"
rl_expect_value "lease: a take of a lease policy is routed too (no 25P01)" "f" \
    "SELECT allowed FROM rate_limit_take('leased', 'k1')"
rl_expect_value "lease: released through the router, once" "t|f" \
    "SELECT rate_limit_release('$lease'), rate_limit_release('$lease')"
rl_expect_value "lease: its place is free again" "t|1" \
    "SELECT allowed, remaining FROM rate_limit_check('leased', 'k1', 0)"
rl_expect_value "lease: headers of a routed lease" '"leased";q=1|"leased";r=0;t=3600' \
    "SELECT h.ratelimit_policy, h.ratelimit FROM rate_limit_lease('leased', 'k1') AS d, rate_limit_headers(d) AS h"

# take_all: within one partition it is routed; across two it is refused,
# and nothing is taken.
same=$(q -c "SELECT 'k' || g FROM generate_series(100, 400) AS g
             WHERE rate_limit_route_hash('api', 'k' || g) & 7 = rate_limit_route_hash('api', 'k1') & 7 LIMIT 1")
other=$(q -c "SELECT 'k' || g FROM generate_series(100, 400) AS g
              WHERE (rate_limit_route_hash('api', 'k' || g) & 7) % 2 <> (rate_limit_route_hash('api', 'k1') & 7) % 2 LIMIT 1")
rl_expect_value "take_all within one partition: routed" "t|{2,4}" \
    "SELECT allowed, remaining FROM rate_limit_take_all(ARRAY['api', 'api'], ARRAY['k1', '$same'])"
rl_expect_sqlstate "take_all across partitions: refused" 0A000 \
    "SELECT * FROM rate_limit_take_all(ARRAY['api', 'api'], ARRAY['k1', '$other'])"
rl_expect_value "take_all across partitions: nothing taken" "2|5" \
    "SELECT (rate_limit_check('api', 'k1', 0)).remaining, (rate_limit_check('api', '$other', 0)).remaining"
# A list the partition refuses whatever its buckets goes to one, which
# says what is wrong.
rl__expect_got "take_all with a NULL name: the partition says which" \
    "22004: public.rate_limit_take_all(4): [postgres] REMOTE ERROR: names[2] must not be null" \
    "$(error_of "SELECT * FROM rate_limit_take_all(ARRAY['api', NULL], ARRAY['k1', '$other'])" | cut -d '|' -f 1)"
rl__expect_got "take_all with more keys than names: the partition refuses it" \
    "22023: public.rate_limit_take_all(4): [postgres] REMOTE ERROR: invalid list of limits" \
    "$(error_of "SELECT * FROM rate_limit_take_all(ARRAY['api'], ARRAY['k1', '$other'])" | cut -d '|' -f 1)"

# 8 clients through the router, 40 keys that never refill (rate 0, burst
# 25): every key within its bound, no error, and the two servers together
# took exactly what the clients were granted.
load=$("$RL_ROOT/test/load/ratelimit_load" --clients 8 --seconds 3 --keys 40 --name routed \
           --rate 0 --burst 25 --rollback 0) || true
printf '%s\n' "$load"
case $load in
    *" PASS"*) printf 'ok: load through the router: within every bound, no error\n' ;;
    *) printf 'FAILED: load through the router\n'; RL_FAILURES=$((RL_FAILURES + 1)) ;;
esac
granted=$(printf '%s\n' "$load" | sed -n 's/.* grants=\([0-9]*\) .*/\1/p' | head -n 1)
taken=0
for n in 1 2; do
    t=$(part "$n" -c "SELECT coalesce(sum(25 - tokens), 0)::bigint FROM ratelimit.buckets WHERE name = 'routed'")
    printf 'server %s: %s tokens taken\n' "$n" "$t"
    taken=$((taken + t))
done
rl_check "${granted:-0} == $taken && $taken > 0" \
    "the servers took $taken tokens, the clients were granted ${granted:-?}"
printf 'routed load: %s grants, %s tokens taken over the two servers\n' "${granted:-?}" "$taken"

# One partition server stopped: its keys fail, the other's keep working.
down_key=$(q -c "SELECT 'k' || g FROM generate_series(1, 200) AS g
                 WHERE (rate_limit_route_hash('api', 'k' || g) & 7) % 2 = 1 LIMIT 1")
up_key=$(q -c "SELECT 'k' || g FROM generate_series(1, 200) AS g
               WHERE (rate_limit_route_hash('api', 'k' || g) & 7) % 2 = 0 LIMIT 1")
rl_as_owner "$RL_PG_BINDIR/pg_ctl" -D "$RL_CLUSTER_DIR/part2/data" -m fast -w -t 60 stop >/dev/null
# (PL/Proxy's own error: XX000, naming the function and the connection.)
down_error=$(psql -X -q -c "SELECT * FROM rate_limit_check('api', '$down_key', 0)" 2>&1 || true)
printf '%s\n' "$down_error" | head -n 1
case $down_error in
    *"PL/Proxy function"*"rate_limit_check"*"part2"*) printf 'ok: server 2 down: its keys fail, naming it\n' ;;
    *) printf 'FAILED: server 2 down: got %s\n' "$down_error"; RL_FAILURES=$((RL_FAILURES + 1)) ;;
esac
rl_expect_sqlstate "server 2 down: the error is PL/Proxy's" XX000 \
    "SELECT * FROM rate_limit_take('api', '$down_key')"
rl_expect_value "server 2 down: server 1's keys work" t \
    "SELECT (rate_limit_check('api', '$up_key', 0)).allowed"
rl_as_owner "$RL_PG_BINDIR/pg_ctl" -D "$RL_CLUSTER_DIR/part2/data" -l "$RL_CLUSTER_DIR/part2/server.log" \
    -w -t 60 start >/dev/null
rl_expect_value "server 2 back: its keys work again" t \
    "SELECT (rate_limit_check('api', '$down_key', 0)).allowed"

# Grants: every routed call reaches its partition as the calling role,
# through that role's user mapping, so that the partition's grants decide.
# On the router app and svc may call everything; on the partitions only
# svc (a member of limiter) may.
q -c "CREATE ROLE app LOGIN" -c "CREATE ROLE svc LOGIN" \
  -c "GRANT USAGE ON FOREIGN SERVER ratelimit TO app, svc" \
  -c "GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO app, svc"
for n in 1 2; do
    part "$n" -c "CREATE ROLE app LOGIN" -c "CREATE ROLE svc LOGIN" -c "CREATE ROLE limiter" \
              -c "GRANT limiter TO svc" \
              -c "REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA public FROM PUBLIC" \
              -c "GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO limiter"
done
# A call of each routed function, by its signature on the router.
declare -A ROUTED=(
    ['rate_limit_take(text,text,double precision)']="rate_limit_take('api', 'g1')"
    ['rate_limit_take(text,text,double precision,interval)']="rate_limit_take('api', 'g1', 1, '1 second')"
    ['rate_limit_check(text,text,double precision)']="rate_limit_check('api', 'g1')"
    ['rate_limit_check(text,text,double precision,interval)']="rate_limit_check('api', 'g1', 1, '1 second')"
    ['rate_limit_take(text,text,double precision,double precision,double precision,boolean,double precision)']="rate_limit_take('free', 'g1', 1, 1, 5)"
    ['rate_limit_check(text,text,double precision,double precision,double precision,boolean,double precision)']="rate_limit_check('free', 'g1', 1, 1, 5)"
    ['rate_limit_take_explicit(text,text,double precision,double precision,interval,double precision,interval,double precision)']="rate_limit_take_explicit('free', 'g1', 1, 1, '1 second')"
    ['rate_limit_check_explicit(text,text,double precision,double precision,interval,double precision,interval,double precision)']="rate_limit_check_explicit('free', 'g1', 1, 1, '1 second')"
    ['rate_limit_refund(text,text,double precision)']="rate_limit_refund('api', 'g1', 1)"
    ['rate_limit_refund(text,text,double precision,double precision,double precision)']="rate_limit_refund('free', 'g1', 1, 1, 5)"
    ['rate_limit_refund_explicit(text,text,double precision,double precision,interval,double precision)']="rate_limit_refund_explicit('free', 'g1', 1, 1, '1 second')"
    ['rate_limit_reset(text,text)']="rate_limit_reset('api', 'g1')"
    ['rate_limit_define(text,double precision,interval,double precision,double precision,double precision,boolean,interval,double precision,integer,double precision,interval,text,boolean)']="rate_limit_define('granted', 1)"
    ['rate_limit_define_sliding_window(text,double precision,interval,text,boolean)']="rate_limit_define_sliding_window('granted_window', 1, '1 minute')"
    ['rate_limit_define_concurrency(text,integer,interval,text,boolean)']="rate_limit_define_concurrency('granted_held', 1)"
    ['rate_limit_drop(text)']="rate_limit_drop('granted')"
    ['rate_limit_buckets(text)']="rate_limit_buckets('api')"
    ['rate_limit_take_all(text[],text[],double precision[],interval)']="rate_limit_take_all(ARRAY['api', 'api'], ARRAY['k1', '$same'])"
    ['rate_limit_lease(text,text,double precision)']="rate_limit_lease('leased', 'g1')"
    ['rate_limit_release(uuid)']="rate_limit_release('00000000-0000-4000-8000-000000000000')"
)
# Every function of the router that calls a partition is in the list.
rl_expect_value "grants: every routed function is checked" \
    "$(printf '%s\n' "${!ROUTED[@]}" | LC_ALL=C sort | paste -sd ' ')" \
    "SELECT string_agg(p.oid::regprocedure::text, ' ' ORDER BY p.oid::regprocedure::text COLLATE \"C\")
       FROM pg_proc AS p
      WHERE p.pronamespace = 'public'::regnamespace AND p.proname LIKE 'rate\_limit\_%'
        AND p.proname NOT IN ('rate_limit_headers', 'rate_limit_route_hash')"
rl_expect_value "grants: no function of the router runs as its owner" 0 \
    "SELECT count(*) FROM pg_proc WHERE pronamespace = 'public'::regnamespace AND prosecdef"
# routed_as ROLE FUNCTION SQL: "ok", or the SQLSTATE SQL fails with and
# "remote" when the partition refused the role FUNCTION.
routed_as() {
    local out
    if out=$(psql -X -A -t -q -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -U "$1" -c "$3" 2>&1 >/dev/null); then
        echo ok
    else
        printf '%s %s\n' "$(printf '%s\n' "$out" | sed -n 's/^ERROR:  \([0-9A-Z]\{5\}\): .*$/\1/p' | head -n 1)" \
            "$(case $out in *"REMOTE ERROR: permission denied for function $2"*) echo remote ;;
                            *) printf '%s\n' "$out" | head -n 1 ;; esac)"
    fi
}
for signature in $(printf '%s\n' "${!ROUTED[@]}" | LC_ALL=C sort | tr ' ' '~'); do
    signature=${signature//\~/ }
    function=${signature%%(*}
    call="SELECT * FROM ${ROUTED[$signature]}"
    rl__expect_got "grants: $function refused to app by the partition: ${ROUTED[$signature]}" \
        "42501 remote" "$(routed_as app "$function" "$call")"
    rl__expect_got "grants: $function served to svc: ${ROUTED[$signature]}" ok \
        "$(routed_as svc "$function" "$call")"
done

rl_verdict router

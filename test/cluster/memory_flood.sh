#!/usr/bin/env bash
# test/cluster/memory_flood.sh
#
# The memory engine under floods, with the library preloaded and its
# default room (ratelimit.memory_buckets = 10000), two databases with the
# extension and a role with only the default grants (app) taking through
# policies, its clock fixed (ALTER ROLE ... SET ratelimit.fixed_clock), so
# that no bucket refills while the test runs:
# - app takes from 15,000 distinct keys of a policy of 10 an hour, each in
#   a transaction of its own: every take is granted, none fails, and the
#   policy holds no more than its share of the engine (half), the other
#   keys kept in the table;
# - afterwards, in both databases, 200 new keys of that policy and 200 of
#   another are each served exactly (a burst less one token, one token,
#   then a denial) with no error, and those of the other policy nearly all
#   find places in memory;
# - one open transaction of app's holds takes from 12,000 distinct keys of
#   a policy of 1000 a second: all granted, none fails, within its share
#   of the engine, and while it is open 200 new keys of that policy and of
#   another, in both databases, are served exactly with no error, those of
#   the other policy nearly all in memory;
# - rate_limit_memory_stats is readable by pg_read_all_stats, not by app.
# Starts and stops a cluster of its own.
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/lib.sh"

rl_require_install
RL_CLUSTER_CONF="shared_preload_libraries = 'ratelimit'" cluster_start
RL_FAILURES=0
q() { psql -X -A -t -q -v ON_ERROR_STOP=1 "$@"; }

q -c "CREATE ROLE app LOGIN" -c "ALTER ROLE app SET ratelimit.fixed_clock = 2000000000"
for db in flood_a flood_b; do
    q -c "CREATE DATABASE $db"
    q -d "$db" -c "CREATE EXTENSION ratelimit" \
      -c "SELECT rate_limit_define('flood', 10, '1 hour', storage => 'memory')" \
      -c "SELECT rate_limit_define('fast', 1000, '1 second', storage => 'memory')" \
      -c "SELECT rate_limit_define('other', 10, '1 hour', storage => 'memory')" >/dev/null
    # Helpers app calls with its own rights: one take, its outcome or the
    # SQLSTATE of its error; keys taken one transaction each; keys served
    # exactly (a burst less one, one, then a denial).
    q -d "$db" <<'EOF'
CREATE FUNCTION try_take(policy text, key text, cost float8) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    RETURN CASE WHEN (rate_limit_take(policy, key, cost)).allowed THEN 'granted' ELSE 'denied' END;
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END $$;
CREATE PROCEDURE take_keys(policy text, prefix text, n int, INOUT result text DEFAULT NULL)
LANGUAGE plpgsql AS $$
DECLARE
    outcome text;
    granted int := 0;
    denied int := 0;
    errors int := 0;
BEGIN
    FOR i IN 1..n LOOP
        outcome := try_take(policy, prefix || i, 1);
        granted := granted + (outcome = 'granted')::int;
        denied := denied + (outcome = 'denied')::int;
        errors := errors + (outcome NOT IN ('granted', 'denied'))::int;
        COMMIT;
    END LOOP;
    result := granted || ' granted, ' || denied || ' denied, ' || errors || ' errors';
END $$;
CREATE PROCEDURE serve_keys(policy text, burst float8, prefix text, n int,
                           INOUT result text DEFAULT NULL)
LANGUAGE plpgsql AS $$
DECLARE
    outcomes text;
    exact int := 0;
    errors int := 0;
    other int := 0;
BEGIN
    FOR i IN 1..n LOOP
        outcomes := try_take(policy, prefix || i, burst - 1);
        COMMIT;
        outcomes := outcomes || ' ' || try_take(policy, prefix || i, 1);
        COMMIT;
        outcomes := outcomes || ' ' || try_take(policy, prefix || i, 1);
        COMMIT;
        IF outcomes = 'granted granted denied' THEN
            exact := exact + 1;
        ELSIF outcomes ~ '[0-9A-Z]{5}' THEN
            errors := errors + 1;
        ELSE
            other := other + 1;
        END IF;
    END LOOP;
    result := exact || ' exact, ' || errors || ' with errors, ' || other || ' otherwise';
END $$;
EOF
done

# serve PREFIX POLICY:BURST...: 200 new keys of each policy in each
# database, each served exactly and without error.
serve() {
    local prefix=$1 db policy
    shift
    for db in flood_a flood_b; do
        for policy in "$@"; do
            rl_expect_value "$db: 200 new keys of ${policy%:*} served exactly" \
                "200 exact, 0 with errors, 0 otherwise" \
                "CALL serve_keys('${policy%:*}', ${policy#*:}, '$prefix', 200)" -U app -d "$db"
        done
    done
}

# 15,000 distinct keys of a policy of 10 an hour, each in a transaction of
# its own, then everyone else.
rl_expect_value "app takes from 15,000 distinct keys of flood" "15000 granted, 0 denied, 0 errors" \
    "CALL take_keys('flood', 'k', 15000)" -U app -d flood_a
serve after-keys flood:10 other:10
# places DATABASE POLICY: the memory engine's places that POLICY holds.
places() {
    q -d flood_a -c "SELECT coalesce(sum(buckets), 0) FROM rate_limit_memory_stats WHERE datname = '$1' AND name = '$2'"
}
shares() {  # POLICY: the flooded policy's places; the other policy's in both databases
    local flooded other_a other_b overflows
    flooded=$(places flood_a "$1")
    overflows=$(q -d flood_a -c "SELECT overflows FROM rate_limit_memory_stats WHERE datname = 'flood_a' AND name = '$1'")
    other_a=$(places flood_a other)
    other_b=$(places flood_b other)
    rl_log "$1 holds $flooded places ($overflows keys kept in the table); other holds $other_a in flood_a, $other_b in flood_b"
    rl_check "$flooded <= 5000" "$1 holds $flooded places, more than half of the engine's 10000"
    rl_check "$overflows >= $2 - 5000" "$1 kept $overflows keys in the table, fewer than its $2 keys less its share"
    rl_check "$other_a >= 190 && $other_b >= 190" \
        "the other policy's 200 new keys found only $other_a (flood_a) and $other_b (flood_b) places in memory"
}
shares flood 15000

# One open transaction holding takes from 12,000 distinct keys of a policy
# of 1000 a second; everyone else while it is open.
q -d flood_a -c "CALL rate_limit_reset_limit('flood')" >/dev/null
held=$RL_CLUSTER_DIR/held.out
rm -f "$RL_CLUSTER_DIR/release"
( { printf 'BEGIN;\n'
    printf "SELECT count(*) FILTER (WHERE r = 'granted') || ' granted, ' ||
                   count(*) FILTER (WHERE r = 'denied') || ' denied, ' ||
                   count(*) FILTER (WHERE r NOT IN ('granted', 'denied')) || ' errors' AS held_takes
              FROM generate_series(1, 12000) AS g, try_take('fast', 'h' || g, 1) AS r;\n"
    while [ ! -e "$RL_CLUSTER_DIR/release" ]; do sleep 0.05; done
    printf 'ROLLBACK;\n'; } | q -U app -d flood_a >"$held" 2>&1 ) &
for _ in $(seq 1 1200); do
    [ -s "$held" ] && break
    sleep 0.05
done
rl_expect_value "one open transaction takes from 12,000 distinct keys of fast" \
    "12000 granted, 0 denied, 0 errors" "SELECT '$(head -n 1 "$held")'"
rl_expect_value "and is still open" 1 \
    "SELECT count(*) FROM pg_stat_activity WHERE usename = 'app' AND state = 'idle in transaction'"
q -d flood_a -c "CALL rate_limit_reset_limit('other')" >/dev/null
q -d flood_b -c "CALL rate_limit_reset_limit('other')" >/dev/null
serve while-held fast:1000 other:10
shares fast 12000
touch "$RL_CLUSTER_DIR/release"
wait

# The engine's counters name every database's policies: readable by
# pg_read_all_stats, not by app.
rl_expect_sqlstate "app may not read rate_limit_memory_stats" 42501 \
    "SELECT count(*) FROM rate_limit_memory_stats" -U app -d flood_a
q -c "CREATE ROLE watcher LOGIN IN ROLE pg_read_all_stats"
rl_expect_value "a member of pg_read_all_stats sees both databases' policies" \
    "flood_a fast,flood_a flood,flood_a other,flood_b fast,flood_b flood,flood_b other" \
    "SELECT string_agg(datname || ' ' || name, ',' ORDER BY datname, name) FROM rate_limit_memory_stats
      WHERE datname LIKE 'flood_%'" -U watcher -d flood_b

rl_verdict memory_flood

#!/usr/bin/env bash
# test/cluster/hot_updates.sh
#
# Storage stays small under a hot key: 1,000,000 takes on one key (8 clients)
# must leave the state table under 200 heap pages with at least 99% of the
# updates HOT (no index entry, prunable in place).  Starts and stops a cluster
# of its own.
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/lib.sh"

TAKES=1000000
CLIENTS=8

rl_require_install
cluster_start
psql -X -q -v ON_ERROR_STOP=1 -c "CREATE EXTENSION ratelimit"
script=$RL_CLUSTER_DIR/hot_take.sql
printf "SELECT allowed FROM rate_limit_take('hot', 'one key', 1, 1e9, 1e9);\n" >"$script"
pgbench -n -M prepared -c "$CLIENTS" -j 2 -t $((TAKES / CLIENTS)) -f "$script" >"$RL_CLUSTER_DIR/pgbench.log" 2>&1 ||
    { cat "$RL_CLUSTER_DIR/pgbench.log"; rl_die "pgbench failed"; }

read -r updates hot heap_pages index_pages < <(psql -X -A -t -F ' ' -c "
    SELECT pg_stat_force_next_flush();
    SELECT s.n_tup_upd, s.n_tup_hot_upd,
           pg_relation_size('ratelimit.buckets') / 8192,
           pg_relation_size('ratelimit.buckets_pkey') / 8192
      FROM pg_stat_user_tables s WHERE s.relid = 'ratelimit.buckets'::regclass" | tail -n 1)

hot_pct=$(awk -v h="$hot" -v u="$updates" 'BEGIN { printf "%.3f", (u > 0 ? 100 * h / u : 0) }')
printf 'hot_updates: takes=%d updates=%s hot=%s (%s%%) heap_pages=%s index_pages=%s\n' \
    "$TAKES" "$updates" "$hot" "$hot_pct" "$heap_pages" "$index_pages"

failures=0
# The first take inserts the row; every later one updates it.
if [ "$updates" -ne $((TAKES - 1)) ]; then
    printf 'FAILED: %s updates counted, expected %d\n' "$updates" $((TAKES - 1))
    failures=$((failures + 1))
fi
if ! awk -v p="$hot_pct" 'BEGIN { exit !(p >= 99) }'; then
    printf 'FAILED: only %s%% of the updates were HOT (at least 99%% expected)\n' "$hot_pct"
    failures=$((failures + 1))
fi
if [ "$heap_pages" -ge 200 ]; then
    printf 'FAILED: the heap grew to %s pages (under 200 expected)\n' "$heap_pages"
    failures=$((failures + 1))
fi
if [ "$failures" -eq 0 ]; then
    printf 'hot_updates: PASS\n'
else
    printf 'hot_updates: FAIL\n'
    exit 1
fi

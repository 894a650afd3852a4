#!/usr/bin/env bash
# test/cluster/shard_load.sh
#
# A hot key split over 8 shards, under real concurrency at SERIALIZABLE:
# 8 pgbench clients for 5 s on one global key, 10% of transactions rolled
# back, every committed grant recorded.
#   phase 1 (refilling): no failed transaction, grants within the admission
#     bound of the whole limit and, under overload, at least 90% of its rate
#     over the span in which grants were recorded;
#   phase 2 (never refilling, exact accounting): the tokens the shards lost
#     add up to the grants recorded, and every token is granted in the end.
# Starts and stops its own cluster.
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/lib.sh"

SECONDS_TO_RUN=5
RATE=200
BURST=100

rl_require_install
cluster_start
psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
CREATE EXTENSION ratelimit;
SELECT rate_limit_define('signups', $RATE, '1 second', $BURST, shards => 8);
CREATE TABLE grants (n int NOT NULL, granted_at timestamptz NOT NULL DEFAULT clock_timestamp());
SQL

script=$RL_CLUSTER_DIR/shard.sql
cat >"$script" <<'SQL'
\set rollback random(1, 10)
BEGIN;
INSERT INTO grants (n) SELECT 1 FROM rate_limit_take('signups', '') AS d WHERE d.allowed;
\if :rollback = 1
ROLLBACK;
\else
COMMIT;
\endif
SQL

run() {
    PGOPTIONS="-c default_transaction_isolation=serializable" \
        pgbench -n -c 8 -j 2 -T "$SECONDS_TO_RUN" -f "$script" 2>&1
}


start=$(date +%s.%N)
out=$(run) || { printf '%s\n' "$out"; rl_die "pgbench failed"; }
end=$(date +%s.%N)
elapsed=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }')
transactions=$(awk '/^number of transactions actually processed:/ { print $NF }' <<<"$out")
failed=$(awk '/^number of failed transactions:/ { print $5 }' <<<"$out")
failed=${failed:-0}
grants=$(psql -X -A -t -c "SELECT count(*) FROM grants")
bound=$(awk -v b="$BURST" -v r="$RATE" -v t="$elapsed" 'BEGIN { printf "%.1f", b + r * t + 1 }')
printf 'shard_load: serializable clients=8 shards=8 seconds=%s transactions=%s failed=%s grants=%s bound=%s\n' \
    "$elapsed" "$transactions" "$failed" "$grants" "$bound"
rl_check "$failed == 0" "$failed transactions failed"
rl_check "$grants <= $bound" "$grants grants, above the bound $bound"
rl_check_overload shard_load "$RATE" "$grants"

# Phase 2: shards that never refill, 50 tokens each.
psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
SELECT rate_limit_define('signups', 0, '1 second', 400, shards => 8);
SELECT rate_limit_reset('signups', '');
TRUNCATE grants;
SQL
out=$(run) || { printf '%s\n' "$out"; rl_die "pgbench failed"; }
failed=$(awk '/^number of failed transactions:/ { print $5 }' <<<"$out")
failed=${failed:-0}
read -r grants consumed < <(psql -X -A -t -F ' ' -c "
    SELECT (SELECT count(*) FROM grants),
           400 - (SELECT coalesce(sum(tokens), 0) + 50 * (8 - count(*))
                    FROM ratelimit.buckets WHERE name = 'signups')")
printf 'shard_load: exact accounting: grants=%s consumed=%s failed=%s\n' "$grants" "$consumed" "$failed"
rl_check "$failed == 0" "$failed transactions failed in the accounting phase"
rl_check "$consumed == $grants" "the shards lost $consumed tokens for $grants grants"
rl_check "$grants == 400" "$grants of the 400 tokens were granted"

rl_verdict shard_load

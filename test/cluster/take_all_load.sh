#!/usr/bin/env bash
# test/cluster/take_all_load.sh
#
# rate_limit_take_all under real concurrency at SERIALIZABLE: 8 pgbench
# clients for 5 s, each transaction taking one token from a per-client bucket
# (10 clients' keys) and one from a global bucket, all or nothing, with 10% of
# transactions rolled back.  Every committed grant is recorded.
#   phase 1 (refilling buckets): no failed transaction (no 40001, 23505 or
#     40P01), every bucket within its admission bound, and under overload the
#     global bucket grants at least 90% of its rate over the span of its grants;
#   phase 2 (buckets that never refill, exact accounting): each client
#     bucket's consumed tokens equal its recorded grants, and the global
#     bucket's equal their total: no take paid in one bucket and not the other.
# Starts and stops its own cluster.
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/lib.sh"

SECONDS_TO_RUN=5
CLIENT_RATE=5    # tokens per second per client key
CLIENT_BURST=5
GLOBAL_RATE=20   # tokens per second for everyone together
GLOBAL_BURST=10

rl_require_install
cluster_start
psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
CREATE EXTENSION ratelimit;
SELECT rate_limit_define('per-client', $CLIENT_RATE, '1 second', $CLIENT_BURST);
SELECT rate_limit_define('global', $GLOBAL_RATE, '1 second', $GLOBAL_BURST);
CREATE TABLE grants (client int NOT NULL, granted_at timestamptz NOT NULL DEFAULT clock_timestamp());
SQL

script=$RL_CLUSTER_DIR/take_all.sql
cat >"$script" <<'SQL'
\set client random(1, 10)
\set rollback random(1, 10)
BEGIN;
INSERT INTO grants (client) SELECT :client
  FROM rate_limit_take_all(ARRAY['per-client', 'global'], ARRAY['c' || :client, '']) AS d
 WHERE d.allowed;
\if :rollback = 1
ROLLBACK;
\else
COMMIT;
\endif
SQL

start=$(date +%s.%N)
out=$(PGOPTIONS="-c default_transaction_isolation=serializable" \
    pgbench -n -c 8 -j 2 -T "$SECONDS_TO_RUN" -f "$script" 2>&1) || {
    printf '%s\n' "$out"
    rl_die "pgbench failed"
}
end=$(date +%s.%N)
elapsed=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }')
transactions=$(awk '/^number of transactions actually processed:/ { print $NF }' <<<"$out")
failed=$(awk '/^number of failed transactions:/ { print $5 }' <<<"$out")
failed=${failed:-0}

read -r total max_client clients < <(psql -X -A -t -F ' ' -c \
    "SELECT count(*), coalesce(max(n), 0), count(DISTINCT client) FROM
       (SELECT client, count(*) OVER (PARTITION BY client) AS n FROM grants) AS g")

global_bound=$(awk -v b="$GLOBAL_BURST" -v r="$GLOBAL_RATE" -v t="$elapsed" 'BEGIN { printf "%.1f", b + r * t + 1 }')
client_bound=$(awk -v b="$CLIENT_BURST" -v r="$CLIENT_RATE" -v t="$elapsed" 'BEGIN { printf "%.1f", b + r * t + 1 }')
printf 'take_all_load: serializable clients=8 seconds=%s transactions=%s failed=%s grants=%s (bound %s) max_per_client=%s (bound %s) clients_granted=%s\n' \
    "$elapsed" "$transactions" "$failed" "$total" "$global_bound" "$max_client" "$client_bound" "$clients"

rl_check "$failed == 0" "$failed transactions failed (serialization failure, unique violation or deadlock)"
rl_check "$transactions > 0" "no transaction ran"
rl_check "$total <= $global_bound" "the global bucket granted $total tokens, above its bound $global_bound"
rl_check "$max_client <= $client_bound" "a client bucket granted $max_client tokens, above its bound $client_bound"
# The global bucket binds: it refills at GLOBAL_RATE and is drained at once.
rl_check_overload take_all_load "$GLOBAL_RATE" "$total"
# Phase 2: exact accounting on buckets that never refill.  The clients'
# buckets (10 x 40 tokens) run dry before the global one (500).
psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
SELECT rate_limit_define('per-client', 0, '1 second', 40);
SELECT rate_limit_define('global', 0, '1 second', 500);
SELECT rate_limit_reset(name, key) FROM ratelimit.buckets;
TRUNCATE grants;
SQL
out=$(PGOPTIONS="-c default_transaction_isolation=serializable" \
    pgbench -n -c 8 -j 2 -T "$SECONDS_TO_RUN" -f "$script" 2>&1) || {
    printf '%s\n' "$out"
    rl_die "pgbench failed"
}
failed=$(awk '/^number of failed transactions:/ { print $5 }' <<<"$out")
failed=${failed:-0}
read -r total global_consumed mismatched < <(psql -X -A -t -F ' ' -c "
    SELECT (SELECT count(*) FROM grants),
           (SELECT 500 - remaining FROM rate_limit_check('global', '', 0)),
           (SELECT count(*) FROM generate_series(1, 10) AS c
             WHERE (SELECT 40 - remaining FROM rate_limit_check('per-client', 'c' || c, 0))
                   IS DISTINCT FROM (SELECT count(*) FROM grants AS g WHERE g.client = c))")
printf 'take_all_load: exact accounting: grants=%s global_consumed=%s clients_mismatched=%s failed=%s\n' \
    "$total" "$global_consumed" "$mismatched" "$failed"
rl_check "$failed == 0" "$failed transactions failed in the accounting phase"
rl_check "$total == 400" "$total grants, expected all 400 client tokens to be granted"
rl_check "$global_consumed == $total" "the global bucket lost $global_consumed tokens for $total grants"
rl_check "$mismatched == 0" "$mismatched client buckets lost a different number of tokens than they granted"
rl_verdict take_all_load

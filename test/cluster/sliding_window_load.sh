#!/usr/bin/env bash
# test/cluster/sliding_window_load.sh
#
# A sliding window under real concurrency, at read committed, repeatable
# read and serializable: 8 pgbench clients for 4 s each, every transaction
# taking 1 from one key of "at most 40 in any 1 s" (table engine), 10% of
# them rolled back.  Each committed grant records the window it was counted
# in: the bucket's last_refill, read back in the same transaction with
# rate_limit_buckets (the instant the take decided at, under its row lock;
# reading ratelimit.buckets itself at serializable would take predicate
# locks the limiter's own writes then conflict with).  Checks: no failed
# transaction (no 40001, 23505 or 40P01), never more than 40 grants in one
# aligned window, under this overload grants in at least 3 windows, and
# rate_limit_stats counting every take: grants and denials add up to the
# transactions run, its grants no fewer than the committed ones.  Then the
# memory engine, at a fixed clock per phase (below): at most 40 in each of
# the two windows its phases fall in, no failed transaction.
# With the argument "portable", the same against the portable limiter (the
# extension ratelimit_portable in schema limits, portable/sliding.sql),
# table only, without rate_limit_stats (it has none): at repeatable read
# and serializable a take that races another on the key fails with 40001
# (docs/portable.md), so pgbench retries those (--max-tries=0) and none may
# fail in the end; read committed retries nothing.
# Starts and stops its own cluster.
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/lib.sh"

SECONDS_TO_RUN=4
MAX_COUNT=40
WINDOW_US=1000000
LIMITER=${1:-native}

rl_require_install
# Preloaded, for the take counters (rate_limit_stats) before PostgreSQL 17.
RL_CLUSTER_CONF="shared_preload_libraries = 'ratelimit'" cluster_start
if [ "$LIMITER" = portable ]; then
    API=limits.
    psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
CREATE SCHEMA limits;
CREATE EXTENSION ratelimit_portable SCHEMA limits;
SELECT limits.rate_limit_define_sliding_window('sw', $MAX_COUNT, '$WINDOW_US microseconds');
CREATE TABLE grants (level text NOT NULL, win bigint NOT NULL);
SQL
else
    API=
    psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
CREATE EXTENSION ratelimit;
SELECT rate_limit_define_sliding_window('sw', $MAX_COUNT, '$WINDOW_US microseconds');
CREATE TABLE grants (level text NOT NULL, win bigint NOT NULL);
SQL
fi

script=$RL_CLUSTER_DIR/sliding.sql
cat >"$script" <<SQL
\\set rollback random(1, 10)
BEGIN;
SELECT allowed::int AS ok FROM ${API}rate_limit_take('sw', 'k') \\gset
\\if :ok
INSERT INTO grants (level, win)
SELECT current_setting('transaction_isolation'),
       floor((extract(epoch FROM last_refill) * 1000000)::numeric / $WINDOW_US)::bigint
  FROM ${API}rate_limit_buckets('sw') WHERE key = 'k';
\\endif
\\if :rollback = 1
ROLLBACK;
\\else
COMMIT;
\\endif
SQL

for level in 'read committed' 'repeatable read' 'serializable'; do
    tries=
    if [ "$LIMITER" = portable ] && [ "$level" != 'read committed' ]; then
        tries=--max-tries=0
    fi
    out=$(PGOPTIONS="-c default_transaction_isolation=${level// /\\ }" \
        pgbench -n -c 8 -j 2 -T "$SECONDS_TO_RUN" $tries -f "$script" 2>&1) || {
        printf '%s\n' "$out"
        rl_die "pgbench failed at $level"
    }
    transactions=$(awk '/^number of transactions actually processed:/ { print $NF }' <<<"$out")
    failed=$(awk '/^number of failed transactions:/ { print $5 }' <<<"$out")
    failed=${failed:-0}
    retried=$(awk '/^number of transactions retried:/ { print $5 }' <<<"$out")
    read -r grants windows most full < <(psql -X -A -t -F ' ' -c "
        SELECT coalesce(sum(n), 0), count(*), coalesce(max(n), 0), count(*) FILTER (WHERE n = $MAX_COUNT)
          FROM (SELECT win, count(*) AS n FROM grants WHERE level = '$level' GROUP BY win) AS w")
    printf 'sliding_window_load: %s %s clients=8 transactions=%s failed=%s retried=%s grants=%s windows=%s most_in_a_window=%s (bound %s) windows_at_bound=%s\n' \
        "$LIMITER" "$level" "$transactions" "$failed" "${retried:-0}" "$grants" "$windows" "$most" "$MAX_COUNT" "$full"
    rl_check "$failed == 0" "$level: $failed transactions failed (serialization failure, unique violation or deadlock)"
    rl_check "$transactions > 0" "$level: no transaction ran"
    rl_check "$most <= $MAX_COUNT" "$level: $most grants in one aligned window, above $MAX_COUNT"
    rl_check "$windows >= 3" "$level: grants in only $windows windows"
    if [ "$LIMITER" = portable ]; then
        psql -X -q -v ON_ERROR_STOP=1 -c "SELECT limits.rate_limit_reset('sw', 'k')" >/dev/null
        continue
    fi
    read -r stats_grants stats_denials < <(psql -X -A -t -F ' ' -c \
        "SELECT grants, denials FROM rate_limit_stats WHERE name = 'sw'")
    printf 'sliding_window_load: %s rate_limit_stats grants=%s denials=%s\n' "$level" "$stats_grants" "$stats_denials"
    rl_check "$stats_grants + $stats_denials == $transactions" \
        "$level: rate_limit_stats counted $stats_grants grants and $stats_denials denials for $transactions takes"
    rl_check "$stats_grants >= $grants" "$level: rate_limit_stats counted $stats_grants grants, fewer than the $grants committed"
    psql -X -q -v ON_ERROR_STOP=1 -c "SELECT rate_limit_stats_reset('sw')" >/dev/null
    psql -X -q -v ON_ERROR_STOP=1 -c "SELECT rate_limit_reset('sw', 'k')" >/dev/null
done
if [ "$LIMITER" = portable ]; then
    rl_verdict sliding_window_load
    exit
fi
# The memory engine: no row lock to read an instant back from, so the
# clock is fixed per phase (PGOPTIONS), the phases run one after another
# and each grant is logged with its phase's window.  Windows of 10 s, at
# most 40 in any; phases at 0, 3.3, 6.6 and 9.9 s into two windows, 1 s of
# pgbench each.
psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
SELECT rate_limit_define_sliding_window('sw-memory', $MAX_COUNT, '10 seconds', storage => 'memory');
CREATE TABLE memory_grants (level text NOT NULL, win bigint NOT NULL);
SQL
memory_script=$RL_CLUSTER_DIR/sliding_memory.sql
cat >"$memory_script" <<SQL
\\set rollback random(1, 10)
BEGIN;
SELECT allowed::int AS ok FROM rate_limit_take('sw-memory', 'k') \\gset
\\if :ok
INSERT INTO memory_grants (level, win)
SELECT current_setting('transaction_isolation'),
       floor(current_setting('ratelimit.fixed_clock')::numeric / 10)::bigint;
\\endif
\\if :rollback = 1
ROLLBACK;
\\else
COMMIT;
\\endif
SQL
for level in 'read committed' 'repeatable read' 'serializable'; do
    failed_total=0
    for clock in 1000 1003.3 1006.6 1009.9 1010 1013.3 1016.6 1019.9; do
        out=$(PGOPTIONS="-c default_transaction_isolation=${level// /\\ } -c ratelimit.fixed_clock=$clock" \
            pgbench -n -c 8 -j 2 -T 1 -f "$memory_script" 2>&1) || {
            printf '%s\n' "$out"
            rl_die "pgbench failed at $level, clock $clock"
        }
        failed=$(awk '/^number of failed transactions:/ { print $5 }' <<<"$out")
        failed_total=$((failed_total + ${failed:-0}))
    done
    read -r grants windows most < <(psql -X -A -t -F ' ' -c "
        SELECT coalesce(sum(n), 0), count(*), coalesce(max(n), 0)
          FROM (SELECT win, count(*) AS n FROM memory_grants WHERE level = '$level' GROUP BY win) AS w")
    printf 'sliding_window_load: memory engine, %s clients=8 failed=%s grants=%s windows=%s most_in_a_window=%s (bound %s)\n' \
        "$level" "$failed_total" "$grants" "$windows" "$most" "$MAX_COUNT"
    rl_check "$failed_total == 0" "memory, $level: $failed_total transactions failed"
    rl_check "$windows == 2" "memory, $level: grants in $windows windows, not 2"
    rl_check "$most <= $MAX_COUNT" "memory, $level: $most grants in one aligned window, above $MAX_COUNT"
    psql -X -q -v ON_ERROR_STOP=1 -c "SELECT rate_limit_reset('sw-memory', 'k')" >/dev/null
done
rl_verdict sliding_window_load

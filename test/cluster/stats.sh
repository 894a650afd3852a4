#!/usr/bin/env bash
# test/cluster/stats.sh
#
# The per-limit counters of takes, with ratelimit in shared_preload_libraries
# (what PostgreSQL before 17 needs for them) and room for 5 limits:
# - test/sql/native/stats.sql, through pg_regress, must give the counting
#   answers (expected/native/stats_1.out), not the refusal the suite's
#   server gives;
# - 8 clients' concurrent takes are all counted, none twice;
# - a take that waited for another transaction's row lock counts the wait;
# - a sixth limit finds no room: its takes count as dropped; each database
#   lists its own limits.
# Starts and stops a cluster of its own.
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/lib.sh"

rl_require_install
RL_CLUSTER_CONF="shared_preload_libraries = 'ratelimit'
ratelimit.stats_limits = 5" cluster_start
RL_FAILURES=0
q() { psql -X -A -t -q -v ON_ERROR_STOP=1 "$@"; }

# The regression test's counting answers.
pgxs=$(dirname "$("$PG_CONFIG" --pgxs)")/../..
mkdir -p "$RL_CLUSTER_DIR/regress/results/native"
if "$pgxs/src/test/regress/pg_regress" --bindir="$RL_PG_BINDIR" --inputdir="$RL_ROOT/test" \
        --outputdir="$RL_CLUSTER_DIR/regress" --dbname=stats_regress --load-extension=ratelimit \
        native/stats >"$RL_CLUSTER_DIR/regress.log" 2>&1 &&
   [ -f "$RL_ROOT/expected/native/stats_1.out" ] &&
   cmp -s "$RL_CLUSTER_DIR/regress/results/native/stats.out" "$RL_ROOT/expected/native/stats_1.out"; then
    printf 'ok: test/sql/native/stats.sql counts as expected/native/stats_1.out says\n'
else
    printf 'FAILED: test/sql/native/stats.sql with the library preloaded\n'
    cat "$RL_CLUSTER_DIR/regress.log"
    diff "$RL_ROOT/expected/native/stats_1.out" "$RL_CLUSTER_DIR/regress/results/native/stats.out" || true
    RL_FAILURES=$((RL_FAILURES + 1))
fi
q -c "DROP DATABASE stats_regress"

q -c "CREATE EXTENSION ratelimit" \
  -c "SELECT (rate_limit_define('busy', 1000, '1 second', 1000)).name" \
  -c "SELECT rate_limit_stats_reset()" >/dev/null

# Concurrent takes: every one counted once.
script=$RL_CLUSTER_DIR/take.sql
printf "\\\\set k random(1, 20)\nSELECT allowed FROM rate_limit_take('busy', 'k' || :k, 30);\n" >"$script"
pgbench -n -M prepared -c 8 -j 2 -t 2000 -f "$script" >"$RL_CLUSTER_DIR/pgbench.log" 2>&1 ||
    { cat "$RL_CLUSTER_DIR/pgbench.log"; rl_die "pgbench failed"; }
# (No row, when busy found no room among the counters: said below, not a
# silent exit of read.)
read -r calls grants tokens < <(q -F ' ' -c "
    SELECT grants + denials, grants, tokens_granted FROM rate_limit_stats WHERE name = 'busy'") || true
calls=${calls:-0} grants=${grants:-0} tokens=${tokens:-0}
rl_log "busy: $calls takes counted, $grants granted, $tokens tokens"
rl_check "$calls == 16000" "$calls takes counted, 16000 made"
rl_check "$tokens == $grants * 30" "tokens granted $tokens, expected $grants * 30"

# A take that waits for another transaction's row lock counts the wait.
q -c "SELECT rate_limit_take('busy', 'held', 1)" >/dev/null
(q -c "BEGIN" -c "SELECT rate_limit_take('busy', 'held', 1)" -c "SELECT pg_sleep(1)" -c "COMMIT" >/dev/null) &
holder=$!
for _ in $(seq 1 100); do
    [ "$(q -c "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep%' AND state = 'active'")" = 1 ] && break
    sleep 0.05
done
waited_before=$(q -c "SELECT lock_wait_seconds FROM rate_limit_stats WHERE name = 'busy'")
q -c "SELECT rate_limit_take('busy', 'held', 1)" >/dev/null
wait "$holder"
waited=$(q -c "SELECT lock_wait_seconds - $waited_before FROM rate_limit_stats WHERE name = 'busy'")
rl_log "busy: a take behind a held row waited $waited s"
rl_check "$waited >= 0.5 && $waited < 5" "the wait counted was $waited s, expected about 1 s"

# Room for 5 limits, taken by the four of stats.sql (in another database)
# and "busy" (a reset zeroes counters, it does not free places): the next
# four are dropped.  Each database sees its own limits only.
q -c "SELECT rate_limit_stats_reset()" \
  -c "SELECT count(*) FROM unnest(ARRAY['l1', 'l2', 'l3', 'l4']) AS n,
             rate_limit_take_explicit(n, 'k', 1, 1, '1 second', 5)" >/dev/null
read -r limits dropped < <(q -F ' ' -c "
    SELECT (SELECT string_agg(name, ',') FROM rate_limit_stats), dropped FROM rate_limit_stats_info")
rl_check "\"$limits\" == \"busy\" && $dropped == 4" \
    "with room for 5 limits: '$limits' listed here, $dropped dropped (expected busy and 4)"

rl_verdict stats

#!/usr/bin/env bash
# test/cluster/memory_sliding_restart.sh
#
# Sliding windows in the memory engine across a clean restart: the file the
# shutdown saves keeps each window's counts (this one's and the one
# before), so a key that took max_count in a window takes nothing more in
# it after the restart, as a token bucket keeps its balance.
# - "now": windows of 100 days at the server's clock: a key that took 5 of
#   5 is denied after the restart, one that took 2 has 3 left (a boundary
#   crossed meanwhile would leave the count of before at almost full
#   weight: the same answers);
# - "later": windows of 10 s at a fixed clock ahead of the server's (so
#   that the estimate is not 0 at the shutdown): 5 taken in one window, 1
#   two seconds into the next (5 * 0.8 + 1 = 5); after the restart nothing
#   is left, where a key starting afresh would have all 5;
# - "boxed": a token bucket's penalty box, kept in the word where a
#   sliding window keeps its previous count, still holds after the restart.
# Starts and stops a cluster of its own.
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/lib.sh"

rl_require_install
RL_CLUSTER_CONF="shared_preload_libraries = 'ratelimit'" cluster_start
RL_FAILURES=0
q() { psql -X -A -t -q -v ON_ERROR_STOP=1 "$@"; }

later=4000000000
q -c "CREATE EXTENSION ratelimit" \
  -c "SELECT rate_limit_define_sliding_window('now', 5, '100 days', storage => 'memory')" \
  -c "SELECT rate_limit_define_sliding_window('later', 5, '10 seconds', storage => 'memory')" \
  -c "SELECT rate_limit_define('boxed', 1, '1 hour', penalty => '1 day', storage => 'memory')" \
  -c "SELECT rate_limit_take('boxed', 'k', 1)" \
  -c "SELECT rate_limit_take('boxed', 'k', 1)" \
  -c "SELECT rate_limit_take('now', 'full', 5)" \
  -c "SELECT rate_limit_take('now', 'some', 2)" \
  -c "SET ratelimit.fixed_clock = $((later + 5))" \
  -c "SELECT rate_limit_take('later', 'k', 5)" \
  -c "SET ratelimit.fixed_clock = $((later + 12))" \
  -c "SELECT rate_limit_take('later', 'k', 1)" >/dev/null
rl_expect_value "before the restart: later's window is full" "f|0" \
    "SELECT allowed, remaining FROM rate_limit_check('later', 'k', 1)" \
    -c "SET ratelimit.fixed_clock = $((later + 12))"

rl_as_owner "$RL_PG_BINDIR/pg_ctl" -D "$RL_CLUSTER_DATA" -m fast -w -t 60 stop >/dev/null
rl_as_owner "$RL_PG_BINDIR/pg_ctl" -D "$RL_CLUSTER_DATA" -l "$RL_CLUSTER_DIR/server.log" \
    -w -t 60 start >/dev/null

rl_expect_value "a clean restart keeps a full window full" "f" \
    "SELECT allowed FROM rate_limit_take('now', 'full', 1)"
rl_expect_value "a clean restart keeps a window's count" "3" \
    "SELECT floor(remaining) FROM rate_limit_check('now', 'some', 0)"
rl_expect_value "a clean restart keeps the count of the window before" "f|0" \
    "SELECT allowed, remaining FROM rate_limit_check('later', 'k', 1)" \
    -c "SET ratelimit.fixed_clock = $((later + 12))"
rl_expect_value "the windows are listed after the restart" "full,some|k" \
    "SELECT (SELECT string_agg(key, ',' ORDER BY key) FROM rate_limit_buckets('now')),
            (SELECT string_agg(key, ',' ORDER BY key) FROM rate_limit_buckets('later'))"
rl_expect_value "a clean restart keeps a token bucket's penalty box" "t" \
    "SELECT blocked_until > now() + interval '23 hours' FROM rate_limit_buckets('boxed')"

rl_verdict memory_sliding_restart

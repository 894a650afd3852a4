#!/usr/bin/env bash
# test/cluster/logged_state.sh
#
# Bucket state that survives: with the default unlogged table a crash empties
# it (every bucket starts full again); after rate_limit_set_logged(true) a
# crash and restart keeps every balance, a streaming standby holds the state
# (rate_limit_check and rate_limit_buckets answer there, takes are refused
# with 25006) and, once promoted, carries the limits on.  Policy "dur" never
# refills (rate 0, burst 10), so balances do not depend on the clock.
# Starts a primary and a standby of its own and stops both.
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/lib.sh"

rl_require_install
# Commits reach the WAL before they return, so that an immediate stop (a
# crash of the server, not of the machine) loses none of them.
RL_CLUSTER_CONF="wal_level = replica
max_wal_senders = 4
synchronous_commit = on" cluster_start
RL_FAILURES=0
q() { psql -X -A -t -q -v ON_ERROR_STOP=1 "$@"; }
crash_and_restart() {
    rl_as_owner pg_ctl -D "$RL_CLUSTER_DATA" -m immediate -w -t 60 stop >/dev/null
    rl_as_owner pg_ctl -D "$RL_CLUSTER_DATA" -l "$RL_CLUSTER_DIR/server.log" -w -t 60 start >/dev/null
}

q -c "CREATE EXTENSION ratelimit" -c "SELECT (rate_limit_define('dur', 0, '1 second', 10)).name" >/dev/null

# The default: unlogged, emptied by a crash.
rl_expect_value "unlogged: a take leaves 7" 7 "SELECT remaining FROM rate_limit_take('dur', 'k', 3)"
crash_and_restart
rl_expect_value "unlogged: after a crash the bucket is full again" 10 \
    "SELECT remaining FROM rate_limit_check('dur', 'k', 0)"

# Logged: kept across a crash.
rl_expect_value "switched to a logged table" t "SELECT rate_limit_set_logged(true)"
rl_expect_value "logged: a take leaves 7" 7 "SELECT remaining FROM rate_limit_take('dur', 'k', 3)"
q -c "BEGIN" -c "SELECT remaining FROM rate_limit_take('dur', 'k', 5)" -c "ROLLBACK" >/dev/null
rl_expect_value "logged: a take rolled back leaves nothing" 7 \
    "SELECT remaining FROM rate_limit_check('dur', 'k', 0)"
crash_and_restart
rl_expect_value "logged: after a crash the balance is kept" 7 \
    "SELECT remaining FROM rate_limit_check('dur', 'k', 0)"

# A streaming standby holds the state.
standby=$RL_CLUSTER_DIR/standby
standby_port=$(rl_pick_port)
rl_as_owner pg_basebackup -D "$standby" -R -X stream -h "$PGHOST" -p "$PGPORT" -U postgres
printf "\nport = %s\nhot_standby = on\n" "$standby_port" |
    rl_as_owner tee -a "$standby/postgresql.conf" >/dev/null
rl_at_exit "rl_as_owner pg_ctl -D '$standby' -m immediate -w -t 30 stop >/dev/null 2>&1"
rl_as_owner pg_ctl -D "$standby" -l "$RL_CLUSTER_DIR/standby.log" -w -t 60 start >/dev/null
rl_expect_value "the standby is in recovery" t "SELECT pg_is_in_recovery()" -p "$standby_port"
rl_expect_value "standby: rate_limit_check answers" "t|6" \
    "SELECT allowed, remaining FROM rate_limit_check('dur', 'k', 1)" -p "$standby_port"
rl_expect_value "standby: rate_limit_buckets answers" "k|7" \
    "SELECT key, balance FROM rate_limit_buckets('dur')" -p "$standby_port"
refusal=$(q -p "$standby_port" -v VERBOSITY=verbose -c "SELECT * FROM rate_limit_take('dur', 'k', 1)" 2>&1 || true)
if grep -q 'ERROR:  25006: cannot execute rate_limit_take() during recovery' <<<"$refusal" &&
   grep -q 'holds bucket state but cannot change it' <<<"$refusal"; then
    printf 'ok: standby: a take is refused with 25006\n'
else
    printf 'FAILED: standby: a take answered\n%s\n' "$refusal"
    RL_FAILURES=$((RL_FAILURES + 1))
fi

# What the primary takes next reaches the standby.
rl_expect_value "primary: a take leaves 5" 5 "SELECT remaining FROM rate_limit_take('dur', 'k', 2)"
replayed=
for _ in $(seq 1 300); do
    replayed=$(q -p "$standby_port" -c "SELECT remaining FROM rate_limit_check('dur', 'k', 0)")
    [ "$replayed" = 5 ] && break
    sleep 0.1
done
rl_check "\"$replayed\" == \"5\"" "the standby did not replay the primary's take (it shows $replayed)"

# Promoted, the standby carries the limits on.
q -c "SELECT remaining FROM rate_limit_take('dur', 'other', 4)" >/dev/null
for _ in $(seq 1 300); do
    [ "$(q -p "$standby_port" -c "SELECT count(*) FROM rate_limit_buckets('dur')")" = 2 ] && break
    sleep 0.1
done
rl_as_owner pg_ctl -D "$RL_CLUSTER_DATA" -m fast -w -t 60 stop >/dev/null
rl_as_owner pg_ctl -D "$standby" -w -t 60 promote >/dev/null
rl_expect_value "promoted: a take leaves 1" 1 "SELECT remaining FROM rate_limit_take('dur', 'k', 4)" \
    -p "$standby_port"
rl_expect_value "promoted: the next take of 2 is denied" f \
    "SELECT allowed FROM rate_limit_take('dur', 'k', 2)" -p "$standby_port"
rl_expect_value "promoted: the other key kept its balance" 6 \
    "SELECT remaining FROM rate_limit_check('dur', 'other', 0)" -p "$standby_port"
rl_expect_value "promoted: a new key starts full" 9 \
    "SELECT remaining FROM rate_limit_take('dur', 'new', 1)" -p "$standby_port"

rl_verdict logged_state

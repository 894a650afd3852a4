#!/usr/bin/env bash
# test/cluster/standby.sh
#
# On a hot standby the state table has no data (it is unlogged) and no
# transaction can write: every function must refuse with SQLSTATE 25006 and
# a clear message, never fail obscurely or return a made-up answer.  A
# concurrency limit's places are held in the server's lock table, which a
# standby's is not the primary's: takes and checks of one refuse with 25006
# too, in the native extension and in the portable limiter, and so do
# calls of a concurrency limit with a lease, whose leases are rows of an
# unlogged table, and releases.  Starts a
# primary and a streaming standby of its own and stops both.
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/lib.sh"

rl_require_install
cluster_start
psql -X -q -v ON_ERROR_STOP=1 \
    -c "CREATE EXTENSION ratelimit" \
    -c "SELECT allowed FROM rate_limit_take('standby', 'k', 1, 1, 5)" \
    -c "SELECT name FROM rate_limit_define_concurrency('held', 2)" \
    -c "CREATE SCHEMA limits" -c "CREATE EXTENSION ratelimit_portable SCHEMA limits" \
    -c "SELECT name FROM limits.rate_limit_define_concurrency('held', 2)" \
    -c "SELECT name FROM rate_limit_define_concurrency('leased', 2, lease => '1 minute')" \
    -c "SELECT name FROM limits.rate_limit_define_concurrency('leased', 2, lease => '1 minute')" >/dev/null

standby=$RL_CLUSTER_DIR/standby
standby_port=$(rl_pick_port)
rl_as_owner pg_basebackup -D "$standby" -R -X stream -h "$PGHOST" -p "$PGPORT" -U postgres
printf "\nport = %s\nhot_standby = on\n" "$standby_port" |
    rl_as_owner tee -a "$standby/postgresql.conf" >/dev/null
rl_at_exit "rl_as_owner pg_ctl -D '$standby' -m immediate -w -t 30 stop >/dev/null 2>&1"
rl_as_owner pg_ctl -D "$standby" -l "$RL_CLUSTER_DIR/standby.log" -w -t 60 start >/dev/null

in_recovery=$(psql -X -A -t -p "$standby_port" -c "SELECT pg_is_in_recovery()")
[ "$in_recovery" = t ] || rl_die "the standby is not in recovery"

failures=0
# expect_25006 SQL MESSAGE DETAIL: SQL fails on the standby with 25006, a
# message matching MESSAGE (a grep pattern) and DETAIL in its detail.
expect_25006() {
    local sql=$1 out
    out=$(psql -X -A -t -p "$standby_port" -v VERBOSITY=verbose -c "$sql" 2>&1 || true)
    if grep -q "^ERROR:  25006: $2" <<<"$out" && grep -qF "$3" <<<"$out"; then
        printf 'ok: %s\n' "$sql"
    else
        printf 'FAILED: %s\n%s\n' "$sql" "$out"
        failures=$((failures + 1))
    fi
}
expect_refusal() {
    expect_25006 "$1" 'cannot execute rate_limit_[a-z]*() during recovery' 'standby servers do not have'
}
expect_refusal "SELECT * FROM rate_limit_take('standby', 'k', 1, 1, 5)"
expect_refusal "SELECT * FROM rate_limit_check('standby', 'k', 1, 1, 5)"
expect_refusal "SELECT rate_limit_reset('standby', 'k')"
expect_hold_refusal() {
    expect_25006 "$1" 'cannot execute rate_limit_[a-z_]*() of a concurrency limit during recovery' \
        "a standby server's lock table is not the primary's"
}
for api in '' limits.; do
    expect_hold_refusal "SELECT * FROM ${api}rate_limit_take('held', 'k')"
    expect_hold_refusal "SELECT * FROM ${api}rate_limit_check('held', 'k')"
    expect_hold_refusal "SELECT * FROM ${api}rate_limit_take_all(ARRAY['held'], ARRAY['k'])"
done

# Leases live in an unlogged table, which a standby does not have: every
# call of a lease policy refuses, and so does a release.
expect_lease_refusal() {
    expect_25006 "$1" 'cannot execute rate_limit_[a-z_]*() of a concurrency limit with a lease during recovery' \
        'Leases are kept in an unlogged table, which standby servers do not have'
}
for api in '' limits.; do
    expect_lease_refusal "SELECT * FROM ${api}rate_limit_lease('leased', 'k')"
    expect_lease_refusal "SELECT * FROM ${api}rate_limit_take('leased', 'k')"
    expect_lease_refusal "SELECT * FROM ${api}rate_limit_check('leased', 'k')"
    expect_lease_refusal "SELECT * FROM ${api}rate_limit_take_all(ARRAY['leased'], ARRAY['k'])"
    expect_lease_refusal "SELECT ${api}rate_limit_release('00000000-0000-4000-8000-000000000000')"
done

# The primary is unaffected.
remaining=$(psql -X -A -t -c "SELECT remaining FROM rate_limit_take('standby', 'k', 1, 0, 5)")
if [ "$remaining" = 3 ]; then
    printf 'ok: the primary still takes (remaining %s)\n' "$remaining"
else
    printf 'FAILED: the primary answered remaining=%s, expected 3\n' "$remaining"
    failures=$((failures + 1))
fi

if [ "$failures" -eq 0 ]; then
    printf 'standby: PASS\n'
else
    printf 'standby: FAIL (%d checks failed)\n' "$failures"
    exit 1
fi

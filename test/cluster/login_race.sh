#!/usr/bin/env bash
# test/cluster/login_race.sh
#
# The README's failed-login recipe under a race: 30 login attempts with a
# wrong password for one account, all in flight at once (held at a gate, an
# advisory lock, until every one is waiting there), against a policy of 5
# failures per 15 minutes.  Each attempt is one transaction, with pg_sleep
# standing in for verifying the password:
#   safe recipe (take; if granted, verify; COMMIT on a wrong password, ROLLBACK
#     on a right one): at most 5 attempts reach the password check, and exactly
#     5 failures are recorded;
#   unsafe recipe (check; if allowed, verify; take after a wrong password), in
#     the same harness: how many attempts reach the password check is printed,
#     to show that the race is real (most of them get through);
#   a right password consumes nothing: after 4 failures, 10 successful logins
#     in a row, then the 5th failure is still admitted and a 6th refused;
#   under the savepoint form, ROLLBACK TO SAVEPOINT after a right password
#     lets the next attempt on the account in at once, while the login's
#     transaction goes on (and RELEASE SAVEPOINT, which keeps the take, does
#     not: the check can tell waiting from not).
# The limiter's clock is fixed, so no token refills during the test and the
# counts are exact.  Starts and stops its own cluster.
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/lib.sh"

ATTEMPTS=30
LIMIT=5
VERIFY_SECONDS=0.05
GATE=764195   # advisory lock key of the gate

rl_require_install
cluster_start
export PGOPTIONS="-c ratelimit.fixed_clock=1000"
psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
CREATE EXTENSION ratelimit;
SELECT rate_limit_define('login-failures', $LIMIT, '15 minutes');
-- One row per attempt, written after its transaction: did it reach the
-- password check, and how many seconds did its first call wait?
CREATE TABLE attempts (phase text NOT NULL, admitted boolean NOT NULL, waited float8 NOT NULL);
SQL

# Both recipes as pgbench scripts; variables: phase, account, right (whether
# the password is right).  The gate is a shared advisory lock: free unless
# close_gate_until_waiting holds it.
safe=$RL_CLUSTER_DIR/safe.sql
cat >"$safe" <<SQL
BEGIN;
SELECT pg_advisory_xact_lock_shared($GATE);
SELECT allowed AS admitted, extract(epoch FROM clock_timestamp() - statement_timestamp()) AS waited
  FROM rate_limit_take('login-failures', ':account') \gset
\if :admitted
SELECT pg_sleep($VERIFY_SECONDS);   -- verifying the password
\endif
\if :admitted and not :right
COMMIT;     -- a wrong password: the failure counts
\else
ROLLBACK;   -- refused, or a right password: nothing is counted
\endif
INSERT INTO attempts VALUES (':phase', ':admitted', :waited);
SQL
unsafe=$RL_CLUSTER_DIR/unsafe.sql
cat >"$unsafe" <<SQL
BEGIN;
SELECT pg_advisory_xact_lock_shared($GATE);
SELECT allowed AS admitted, extract(epoch FROM clock_timestamp() - statement_timestamp()) AS waited
  FROM rate_limit_check('login-failures', ':account') \gset
\if :admitted
SELECT pg_sleep($VERIFY_SECONDS);   -- verifying the password
SELECT allowed FROM rate_limit_take('login-failures', ':account');   -- after a wrong password
\endif
COMMIT;
INSERT INTO attempts VALUES (':phase', ':admitted', :waited);
SQL

# Holds the gate until N transactions wait on it, then opens it; fails if
# they are not all waiting within 60 s.  Returns once the gate is held.
GATE_PID=
close_gate_until_waiting() {
    local n=$1 tries=0
    psql -X -q -v ON_ERROR_STOP=1 >/dev/null \
        -c "SELECT pg_advisory_lock($GATE)" \
        -c "DO \$\$
            BEGIN
                FOR i IN 1 .. 6000 LOOP
                    IF (SELECT count(*) FROM pg_catalog.pg_locks
                         WHERE locktype = 'advisory' AND objid = $GATE AND NOT granted) >= $n THEN
                        RETURN;
                    END IF;
                    PERFORM pg_catalog.pg_sleep(0.01);
                END LOOP;
                RAISE EXCEPTION 'fewer than $n attempts reached the gate in 60 s';
            END \$\$" \
        -c "SELECT pg_advisory_unlock($GATE)" &
    GATE_PID=$!
    until [ "$(psql -X -A -t -c "SELECT count(*) FROM pg_catalog.pg_locks
                                  WHERE locktype = 'advisory' AND objid = $GATE AND granted")" = 1 ]; do
        tries=$((tries + 1))
        [ "$tries" -lt 600 ] || rl_die "the gate was not closed within 60 s"
        sleep 0.1
    done
}

attempts() {  # SCRIPT PHASE ACCOUNT RIGHT CLIENTS
    local out
    out=$(pgbench -n -c "$5" -j 2 -t 1 -f "$1" -D phase="$2" -D account="$3" -D right="$4" 2>&1) || {
        printf '%s\n' "$out"
        rl_die "pgbench failed in phase $2"
    }
}

RACE_SECONDS=
race() {  # SCRIPT PHASE ACCOUNT: ATTEMPTS wrong passwords at once; sets RACE_SECONDS
    local start end
    close_gate_until_waiting "$ATTEMPTS"
    start=$(date +%s.%N)
    attempts "$1" "$2" "$3" false "$ATTEMPTS"
    end=$(date +%s.%N)
    wait "$GATE_PID" || rl_die "the $ATTEMPTS attempts of phase $2 were not all in flight at once"
    RACE_SECONDS=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }')
}

# PHASE ACCOUNT: attempts, admitted, failures recorded in the bucket, and the
# longest wait of an admitted and of a refused attempt (seconds)
counts() {
    psql -X -A -t -F ' ' -c "
        SELECT count(*), count(*) FILTER (WHERE admitted),
               (SELECT $LIMIT - remaining FROM rate_limit_check('login-failures', '$2', 0)),
               round(coalesce(max(waited) FILTER (WHERE admitted), 0)::numeric, 3),
               round(coalesce(max(waited) FILTER (WHERE NOT admitted), 0)::numeric, 3)
          FROM attempts WHERE phase = '$1'"
}

failures=0
check() { if ! awk "BEGIN { exit !($1) }"; then printf 'FAILED: %s\n' "$2"; failures=$((failures + 1)); fi; }

# 1. The safe recipe.
race "$safe" safe alice
read -r total admitted recorded wait_admitted wait_refused < <(counts safe alice)
printf 'login_race: safe recipe: %s wrong passwords at once, limit %s: %s reached the password check, %s failures recorded (%s s)\n' \
    "$total" "$LIMIT" "$admitted" "$recorded" "$RACE_SECONDS"
printf 'login_race: safe recipe: longest wait in the take: %s s admitted, %s s refused (verifying takes %s s)\n' \
    "$wait_admitted" "$wait_refused" "$VERIFY_SECONDS"
check "$total == $ATTEMPTS" "$total attempts ran, not $ATTEMPTS"
check "$admitted <= $LIMIT" "$admitted attempts reached the password check, above the limit of $LIMIT"
check "$recorded == $LIMIT" "$recorded failures recorded, not $LIMIT"
check "$admitted == $recorded" "$admitted attempts reached the password check but $recorded failures were recorded"

# 2. The unsafe recipe in the same harness: a demonstration, not a pass/fail.
race "$unsafe" unsafe bob
read -r total admitted recorded _ < <(counts unsafe bob)
printf 'login_race: unsafe recipe (check, then take): %s wrong passwords at once, limit %s: %s reached the password check, %s failures recorded (%s s)\n' \
    "$total" "$LIMIT" "$admitted" "$recorded" "$RACE_SECONDS"
[ "$admitted" -gt "$LIMIT" ] ||
    rl_warn "the unsafe recipe let only $admitted attempts through: the attempts did not overlap this time"

# 3. A right password consumes nothing.
attempts "$safe" failures carol false 1
attempts "$safe" failures carol false 1
attempts "$safe" failures carol false 1
attempts "$safe" failures carol false 1
for _ in $(seq 10); do attempts "$safe" successes carol true 1; done
attempts "$safe" fifth-failure carol false 1
attempts "$safe" sixth-failure carol false 1
read -r _ four _ < <(counts failures carol)
read -r _ successes _ < <(counts successes carol)
read -r _ fifth _ < <(counts fifth-failure carol)
read -r _ sixth recorded _ < <(counts sixth-failure carol)
printf 'login_race: sequential: %s of 4 failures, %s of 10 successes, %s 5th and %s 6th failure admitted; %s failures recorded\n' \
    "$four" "$successes" "$fifth" "$sixth" "$recorded"
check "$four == 4" "only $four of the first 4 failures were admitted"
check "$successes == 10" "only $successes of 10 successful logins after 4 failures were admitted"
check "$fifth == 1" "the 5th failure after 10 successful logins was refused: successes were counted"
check "$sixth == 0" "a 6th failure was admitted"
check "$recorded == $LIMIT" "$recorded failures recorded, not $LIMIT"

# 4. Under the savepoint form, a right password frees the account at once
#    (ROLLBACK TO SAVEPOINT) while the rest of the login's transaction goes
#    on; a kept take (RELEASE SAVEPOINT) holds it until that transaction ends.
HOLDER_PID=
hold_after() {  # END: an attempt ends its savepoint with END, then stays in its transaction
    local tries=0
    PGAPPNAME=login_race_holder psql -X -q -v ON_ERROR_STOP=1 -c BEGIN -c "SAVEPOINT attempt" \
        -c "SELECT rate_limit_take('login-failures', 'dave')" -c "$1" \
        -c "SELECT pg_sleep(60)" -c COMMIT >/dev/null 2>&1 &
    HOLDER_PID=$!
    until [ "$(psql -X -A -t -c "SELECT count(*) FROM pg_catalog.pg_stat_activity
                                  WHERE application_name = 'login_race_holder' AND wait_event = 'PgSleep'")" = 1 ]; do
        tries=$((tries + 1))
        [ "$tries" -lt 600 ] || rl_die "the holding attempt did not reach its pg_sleep within 60 s"
        sleep 0.1
    done
}
end_holder() {
    psql -X -q -c "SELECT pg_catalog.pg_cancel_backend(pid) FROM pg_catalog.pg_stat_activity
                    WHERE application_name = 'login_race_holder'" >/dev/null
    wait "$HOLDER_PID" || true
}
# lock_timeout counts only time spent waiting for a lock.
other_attempt() {
    psql -X -q -A -t -c "SET lock_timeout = '2s'" \
        -c "SELECT allowed FROM rate_limit_take('login-failures', 'dave')" 2>&1 | head -n 1 || true
}
hold_after "ROLLBACK TO SAVEPOINT attempt"
after_rollback=$(other_attempt)
end_holder
hold_after "RELEASE SAVEPOINT attempt"
after_release=$(other_attempt)
end_holder
printf 'login_race: another attempt while the first login transaction goes on: after ROLLBACK TO SAVEPOINT "%s", after RELEASE SAVEPOINT "%s"\n' \
    "$after_rollback" "$after_release"
[ "$after_rollback" = t ] ||
    { printf 'FAILED: an attempt after a right password rolled back to its savepoint was not granted at once\n'; failures=$((failures + 1)); }
case $after_release in
    *"lock timeout"*) ;;
    *) printf 'FAILED: an attempt did not wait for a take kept by RELEASE SAVEPOINT: the test cannot tell waiting from not\n'
       failures=$((failures + 1)) ;;
esac

if [ "$failures" -eq 0 ]; then
    printf 'login_race: PASS\n'
else
    printf 'login_race: FAIL\n'
    exit 1
fi

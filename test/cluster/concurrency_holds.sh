#!/usr/bin/env bash
# test/cluster/concurrency_holds.sh
#
# A concurrency limit held until the transaction ends (3 places on one
# key) under 8 pgbench clients, at read committed, repeatable read and
# serializable, with random rollbacks (10%), rollbacks to a savepoint taken
# before the take (10%) and, in a last phase, backends terminated while
# they hold places.  A granted transaction also takes a session-level
# shared advisory lock (the witness) while it works, and releases it before
# it ends (so before its places), so that pg_locks counts the transactions
# inside at once independently of how places are kept:
#   - a monitor reads pg_locks over and over (each read a consistent
#     snapshot of the lock table): never more than 3 witnesses (but in the
#     phase that terminates backends, where a terminated backend's session
#     lock outlives its places), never more than 3 places held;
#   - no transaction fails (no 40001, 40P01 or other error) but those
#     terminated;
#   - once the clients are done, every place is free again (rate_limit_check
#     answers 3 free) and pg_locks shows none held: terminated backends
#     gave theirs back with no sweeper.
# With the argument "portable", the same against the portable limiter
# (the extension ratelimit_portable in schema limits), whose places are
# bigint advisory locks (objsubid 1), taking 1 or 2 places at random (a
# take of 2 tries them in a subtransaction that a denial rolls back).
# Starts and stops its own cluster.
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/lib.sh"

MAX_HELD=3
TRANSACTIONS=400 # per client and phase
WITNESS=770077   # the witness lock's key
LIMITER=${1:-native}

rl_require_install
cluster_start
RL_FAILURES=0
if [ "$LIMITER" = portable ]; then
    API=limits.
    COST='random(1, 2)'
    # Key k's places: advisory locks on bigint numbers (objsubid 1), all
    # but the witness's.
    PLACES="objsubid = 1 AND NOT (classid = 0 AND objid = $WITNESS)"
    psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
CREATE SCHEMA limits;
CREATE EXTENSION ratelimit_portable SCHEMA limits;
SELECT limits.rate_limit_define_concurrency('cc', $MAX_HELD);
SQL
else
    API=
    COST=1
    PLACES="objsubid BETWEEN 256 AND 10255"
    psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
CREATE EXTENSION ratelimit;
SELECT rate_limit_define_concurrency('cc', $MAX_HELD);
SQL
fi

script=$RL_CLUSTER_DIR/holds.sql
cat >"$script" <<SQL
\set outcome random(1, 10)
\set cost $COST
BEGIN;
\if :outcome = 2
SAVEPOINT before_take;
\endif
SELECT pg_advisory_lock_shared($WITNESS) FROM ${API}rate_limit_take('cc', 'k', :cost) AS d WHERE d.allowed;
SELECT pg_sleep(0.001);
SELECT pg_advisory_unlock_all();
\if :outcome = 1
ROLLBACK;
\elif :outcome = 2
ROLLBACK TO SAVEPOINT before_take;
SELECT pg_sleep(0.001);
COMMIT;
\else
COMMIT;
\endif
SQL

# monitor FILE: reads pg_locks until FILE's stop file appears; writes the
# most witnesses and the most places seen at once, and how many reads.
monitor() {
    local out=$1
    psql -X -A -t -q -v ON_ERROR_STOP=1 >"$out" <<SQL
CREATE TEMP TABLE seen (witnesses int, places int, reads int);
DO \$\$
DECLARE
    w int;
    p int;
    most_w int := 0;
    most_p int := 0;
    reads int := 0;
BEGIN
    LOOP
        SELECT count(*) FILTER (WHERE objid = $WITNESS AND objsubid = 1),
               count(*) FILTER (WHERE $PLACES)
          INTO w, p
          FROM pg_locks WHERE locktype = 'advisory' AND granted;
        most_w := greatest(most_w, w);
        most_p := greatest(most_p, p);
        reads := reads + 1;
        EXIT WHEN (pg_stat_file('$RL_CLUSTER_DIR/stop_monitor', true)).size IS NOT NULL;
    END LOOP;
    INSERT INTO seen VALUES (most_w, most_p, reads);
END
\$\$;
SELECT witnesses, places, reads FROM seen;
SQL
}

# killer COUNT: terminates COUNT backends that hold a place, one every 20 ms.
killer() {
    local n=0
    while [ "$n" -lt "$1" ]; do
        psql -X -A -t -q -c "SELECT count(pg_terminate_backend(pid)) FROM
            (SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
                AND $PLACES AND pid <> pg_backend_pid() LIMIT 1) AS h" >/dev/null
        n=$((n + 1))
        sleep 0.02
    done
}

# phase LEVEL KILLS: one run of the clients.
phase() {
    local level=$1 kills=$2 log=$RL_CLUSTER_DIR/pgbench.log seen=$RL_CLUSTER_DIR/seen
    rm -f "$RL_CLUSTER_DIR/stop_monitor"
    monitor "$seen" 2>/dev/null &
    local monitor_pid=$!
    sleep 0.2
    local killer_pid=
    if [ "$kills" -gt 0 ]; then
        (sleep 0.3; killer "$kills") &
        killer_pid=$!
    fi
    local status=0
    PGOPTIONS="-c default_transaction_isolation=$(sed 's/ /\\ /' <<<"$level")" \
        pgbench -n -c 8 -j 2 -t "$TRANSACTIONS" -f "$script" >"$log" 2>&1 || status=$?
    [ -z "$killer_pid" ] || wait "$killer_pid"
    touch "$RL_CLUSTER_DIR/stop_monitor"
    wait "$monitor_pid" || true
    local witnesses places reads
    IFS='|' read -r witnesses places reads <"$seen"
    local processed failed aborted errors
    processed=$(awk '/^number of transactions actually processed:/ { print $NF }' "$log")
    failed=$(awk '/^number of failed transactions:/ { print $5 }' "$log")
    failed=${failed:-0}
    aborted=$(grep -c 'aborted in command' "$log" || true)
    # Errors other than a terminated connection's.
    errors=$(grep -E 'ERROR|FATAL' "$log" | grep -cvE 'terminating connection due to administrator command|server closed the connection' || true)
    printf 'concurrency_holds (%s): %s kills=%s processed=%s failed=%s aborted_clients=%s errors=%s most_witnesses=%s most_places=%s monitor_reads=%s pgbench_status=%s\n' \
        "$LIMITER" "$level" "$kills" "${processed:-?}" "$failed" "$aborted" "$errors" "$witnesses" "$places" "$reads" "$status"
    if [ "$kills" = 0 ]; then
        rl_check "${witnesses:-99} <= $MAX_HELD" "$level: $witnesses transactions were inside at once, above $MAX_HELD"
    fi
    rl_check "${places:-99} <= $MAX_HELD" "$level: $places places were held at once, above $MAX_HELD"
    rl_check "${reads:-0} > 0" "$level: the monitor read nothing"
    rl_check "$failed == 0" "$level: $failed transactions failed"
    rl_check "$errors == 0" "$level: errors other than terminations (see below)"
    if [ "$errors" != 0 ] || { [ "$kills" = 0 ] && [ "$status" != 0 ]; }; then
        grep -E 'ERROR|FATAL|aborted' "$log" | head -5
        RL_FAILURES=$((RL_FAILURES + 1))
    fi
    if [ "$kills" -gt 0 ]; then
        rl_check "$aborted > 0" "$level: no client was terminated while holding a place"
    fi
    # Every place is free again, with nothing swept.
    # (A check of every place says whether all are free; one of none, how many.)
    rl_expect_value "$level: every place free once the clients are done" "t|$MAX_HELD" \
        "SELECT (${API}rate_limit_check('cc', 'k', $MAX_HELD)).allowed, (${API}rate_limit_check('cc', 'k', 0)).remaining"
    rl_expect_value "$level: no place left in pg_locks" "0" \
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND $PLACES"
}

phase 'read committed' 0
phase 'repeatable read' 0
phase 'serializable' 0
phase 'read committed' 5
rl_verdict concurrency_holds

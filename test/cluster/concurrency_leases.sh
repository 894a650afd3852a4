#!/usr/bin/env bash
# test/cluster/concurrency_leases.sh
#
# Leases of a concurrency limit (3 places on one key, leases of 20 ms)
# under 8 pgbench clients, at read committed, repeatable read and
# serializable, then with backends terminated.  Each client takes a lease
# of 1 or 2 places in a transaction that commits, or that rolls the take
# back (10%: an exception block, i.e. a savepoint); 40% release their
# lease after the transaction, the others leave it to expire.  Every call's
# answer is logged in the transaction that makes it (the rolled back ones
# too), with clock_timestamp() just before (b) and just after (a) it.
#   - A monitor reads the leases table over and over: the leases it sees
#     committed and not yet expired when it reads the clock, after taking
#     its snapshot, were all in force at once at the snapshot: their places
#     never sum above 3.
#   - No place is held past its expiry: each denial needed more than
#     3 - cost places held by leases in force at some instant between its b
#     and its a, so the leases logged as taken before a and expiring after
#     b (a superset: rolled back ones, released ones and ones still being
#     written included) must hold more than 3 - cost places.  (Not in the
#     phase that terminates backends, whose last calls are not logged.)
#   - The native limiter: no transaction fails and none is retried (no
#     40001, no 40P01, at every level).  The portable one raises 40001 at
#     repeatable read and serializable (README): pgbench retries those
#     (--max-tries), and none may fail for good.
#   - Once the clients are done, at a fixed clock past every expiry, all
#     3 places are free although the rows are still there (no sweeper), and
#     rate_limit_purge then deletes every one.
# With the argument "portable", the same against the portable limiter
# (the extension ratelimit_portable in schema limits).  Starts and stops
# its own cluster.
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/lib.sh"

MAX_HELD=3
LEASE="20 milliseconds"
TRANSACTIONS=300 # per client and phase
LIMITER=${1:-native}

rl_require_install
cluster_start
RL_FAILURES=0
if [ "$LIMITER" = portable ]; then
    API=limits.
    LEASES="limits.rl_leases"
    IN_FORCE="SELECT coalesce(sum(places), 0) FROM limits.rl_leases
                WHERE name = 'll' AND key = 'k' AND expires_us > limits.rl_now()"
    ROWS="SELECT count(*) FROM limits.rl_leases"
    TRIES=--max-tries=1000
    psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
CREATE SCHEMA limits;
CREATE EXTENSION ratelimit_portable SCHEMA limits;
-- The clock: the server's, or the fixed one a session sets (as the
-- regression suite's portable_setup does).
CREATE OR REPLACE FUNCTION limits.rl_now() RETURNS bigint
LANGUAGE sql VOLATILE
AS \$\$ SELECT CASE WHEN coalesce(nullif(current_setting('ratelimit.fixed_clock', true), ''), '0')::float8 > 0
                  THEN floor((current_setting('ratelimit.fixed_clock')::float8 - 946684800) * 1000000)::bigint
                  ELSE ((extract(epoch FROM clock_timestamp()) - 946684800) * 1000000)::bigint END \$\$;
SELECT limits.rate_limit_define_concurrency('ll', $MAX_HELD, lease => '$LEASE');
SQL
else
    API=
    LEASES="ratelimit.leases"
    IN_FORCE="SELECT coalesce(sum(places), 0) FROM ratelimit.leases
                WHERE name = 'll' AND key = 'k' AND expires_at > clock_timestamp()"
    ROWS="SELECT count(*) FROM ratelimit.leases"
    TRIES=
    psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
CREATE EXTENSION ratelimit;
SELECT rate_limit_define_concurrency('ll', $MAX_HELD, lease => '$LEASE');
SQL
fi
psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
CREATE TABLE lease_log (phase text, b timestamptz, a timestamptz, allowed boolean, cost int,
                        lease uuid, expires_at timestamptz, rolled_back boolean);
CREATE FUNCTION lease_round(phase text, cost int, roll boolean) RETURNS text
LANGUAGE plpgsql AS \$\$
DECLARE
    b timestamptz;
    a timestamptz;
    d record;
BEGIN
    b := clock_timestamp();
    BEGIN
        SELECT * INTO d FROM ${API}rate_limit_lease('ll', 'k', cost);
        a := clock_timestamp();
        IF roll THEN
            RAISE SQLSTATE 'LRB00';
        END IF;
    EXCEPTION WHEN SQLSTATE 'LRB00' THEN
        NULL;
    END;
    INSERT INTO lease_log VALUES (phase, b, a, d.allowed, cost, d.lease, d.expires_at, roll);
    RETURN CASE WHEN roll THEN '' ELSE coalesce(d.lease::text, '') END;
END
\$\$;
CREATE FUNCTION release_round(lease text) RETURNS boolean
LANGUAGE sql AS \$\$ SELECT CASE WHEN lease <> '' THEN ${API}rate_limit_release(lease::uuid) END \$\$;
SQL

script=$RL_CLUSTER_DIR/leases.sql
cat >"$script" <<'SQL'
\set outcome random(1, 10)
\set cost random(1, 2)
BEGIN;
SELECT lease_round(':phase', :cost, :outcome = 1) AS lease \gset
SELECT pg_sleep(0.001);
COMMIT;
\if :outcome >= 7
SELECT release_round(':lease');
\endif
SQL

# monitor FILE: reads the leases in force until FILE's stop file appears;
# writes the most places seen in force at once, and how many reads.
monitor() {
    local out=$1
    PGOPTIONS="-c default_transaction_isolation=read\\ committed" psql -X -A -t -q -v ON_ERROR_STOP=1 >"$out" <<SQL
CREATE TEMP TABLE seen (places int, reads int);
DO \$\$
DECLARE
    p int;
    most_p int := 0;
    reads int := 0;
BEGIN
    LOOP
        $IN_FORCE INTO p;
        most_p := greatest(most_p, p);
        reads := reads + 1;
        EXIT WHEN (pg_stat_file('$RL_CLUSTER_DIR/stop_monitor', true)).size IS NOT NULL;
    END LOOP;
    INSERT INTO seen VALUES (most_p, reads);
END
\$\$;
SELECT places, reads FROM seen;
SQL
}

# killer COUNT: terminates COUNT pgbench backends inside a transaction or a
# call, one every 20 ms.
killer() {
    local n=0
    while [ "$n" -lt "$1" ]; do
        psql -X -A -t -q -c "SELECT count(pg_terminate_backend(pid)) FROM
            (SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbench'
                AND (state = 'idle in transaction' OR query LIKE '%_round(%')
                AND pid <> pg_backend_pid() LIMIT 1) AS h" >/dev/null
        n=$((n + 1))
        sleep 0.02
    done
}

# phase NAME LEVEL KILLS: one run of the clients.
phase() {
    local name=$1 level=$2 kills=$3 log=$RL_CLUSTER_DIR/pgbench.log seen=$RL_CLUSTER_DIR/seen
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
    # shellcheck disable=SC2086
    PGOPTIONS="-c default_transaction_isolation=$(sed 's/ /\\ /' <<<"$level")" \
        pgbench -n -c 8 -j 2 -t "$TRANSACTIONS" $TRIES -D phase="$name" -f "$script" >"$log" 2>&1 || status=$?
    [ -z "$killer_pid" ] || wait "$killer_pid"
    touch "$RL_CLUSTER_DIR/stop_monitor"
    wait "$monitor_pid" || true
    local places reads
    IFS='|' read -r places reads <"$seen"
    local processed failed retried aborted errors
    processed=$(awk '/^number of transactions actually processed:/ { print $NF }' "$log")
    failed=$(awk '/^number of failed transactions:/ { print $5 }' "$log")
    failed=${failed:-0}
    retried=$(awk '/^number of transactions retried:/ { print $5 }' "$log")
    retried=${retried:-0}
    aborted=$(grep -c 'aborted in command' "$log" || true)
    # Errors other than a terminated connection's (and, retried, 40001).
    errors=$(grep -E 'ERROR|FATAL' "$log" |
        grep -cvE 'terminating connection due to administrator command|server closed the connection|could not serialize access' || true)
    local counts
    counts=$(psql -X -A -t -q -v ON_ERROR_STOP=1 -c "
        SELECT count(*) FILTER (WHERE allowed AND NOT rolled_back) || '|' ||
               count(*) FILTER (WHERE NOT allowed) || '|' ||
               count(*) FILTER (WHERE rolled_back)
          FROM lease_log WHERE phase = '$name'")
    local granted denied rolled
    IFS='|' read -r granted denied rolled <<<"$counts"
    printf 'concurrency_leases (%s): %s kills=%s processed=%s failed=%s retried=%s aborted_clients=%s errors=%s granted=%s denied=%s rolled_back=%s most_in_force=%s monitor_reads=%s pgbench_status=%s\n' \
        "$LIMITER" "$level" "$kills" "${processed:-?}" "$failed" "$retried" "$aborted" "$errors" \
        "$granted" "$denied" "$rolled" "$places" "$reads" "$status"
    rl_check "${places:-99} <= $MAX_HELD" "$level: $places places were in force at once, above $MAX_HELD"
    rl_check "${reads:-0} > 0" "$level: the monitor read nothing"
    rl_check "$failed == 0" "$level: $failed transactions failed"
    rl_check "$errors == 0" "$level: errors other than terminations (see below)"
    if [ "$LIMITER" = native ] || [ "$level" = 'read committed' ]; then
        rl_check "$retried == 0" "$level: $retried transactions were retried"
    fi
    if [ "$errors" != 0 ] || { [ "$kills" = 0 ] && [ "$status" != 0 ]; }; then
        grep -E 'ERROR|FATAL|aborted' "$log" | head -5
        RL_FAILURES=$((RL_FAILURES + 1))
    fi
    if [ "$kills" -gt 0 ]; then
        rl_check "$aborted > 0" "$level: no client was terminated"
    else
        rl_check "$granted > 100 && $denied > 100" "$level: too few grants ($granted) or denials ($denied) to judge"
        # No denial without the places to justify it.
        rl_expect_value "$level: no denial while expired leases left room" "0" "
            SELECT count(*) FROM lease_log AS d
             WHERE d.phase = '$name' AND NOT d.allowed
               AND d.cost + (SELECT coalesce(sum(l.cost), 0) FROM lease_log AS l
                              WHERE l.phase = d.phase AND l.lease IS NOT NULL
                                AND l.expires_at - interval '$LEASE' < d.a
                                AND l.expires_at > d.b) <= $MAX_HELD"
    fi
    # At a fixed clock past every expiry: every place free, with the rows
    # still there, until a purge deletes them.
    local later
    later=$(psql -X -A -t -q -c "SELECT ceil(extract(epoch FROM max(expires_at)) + 1) FROM lease_log")
    rl_expect_value "$level: every place free once every lease expired, with no sweeper" "t|$MAX_HELD|t" \
        "SELECT (${API}rate_limit_check('ll', 'k', $MAX_HELD)).allowed, (${API}rate_limit_check('ll', 'k', 0)).remaining,
                ($ROWS) > 0" -c "SET ratelimit.fixed_clock = $later"
    psql -X -q -v ON_ERROR_STOP=1 -c "SET ratelimit.fixed_clock = $later" \
        -c "CALL ${API}rate_limit_purge()" >/dev/null
    rl_expect_value "$level: rate_limit_purge deletes them" "0" "$ROWS"
}

phase rc 'read committed' 0
phase rr 'repeatable read' 0
phase ser 'serializable' 0
phase kill 'read committed' 5
rl_verdict concurrency_leases

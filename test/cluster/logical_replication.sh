#!/usr/bin/env bash
# test/cluster/logical_replication.sh
#
# Policies replicated by logical replication are used at once by backends of
# the subscriber that had cached the old definition: the apply worker runs
# with session_replication_role = replica and fires row triggers only, and
# the triggers on ratelimit.policies fire there too.  Starts a publisher
# (wal_level = logical) and a subscriber of its own and stops both.
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/lib.sh"

rl_require_install
RL_CLUSTER_CONF="wal_level = logical" cluster_start
psql -X -q -v ON_ERROR_STOP=1 \
    -c "CREATE EXTENSION ratelimit" \
    -c "SELECT rate_limit_define('repl', 0, '1 second', 1)" \
    -c "CREATE PUBLICATION policies FOR TABLE ratelimit.policies" >/dev/null

subscriber=$RL_CLUSTER_DIR/subscriber
sub_port=$(rl_pick_port)
rl_as_owner initdb -D "$subscriber" -A trust -U postgres --no-sync -E UTF8 --locale=C.UTF-8 \
    >"$RL_CLUSTER_DIR/subscriber-initdb.log" 2>&1 || rl_die "initdb of the subscriber failed"
printf "\nlisten_addresses = ''\nunix_socket_directories = '%s'\nport = %s\nfsync = off\n" \
    "$RL_CLUSTER_DIR" "$sub_port" | rl_as_owner tee -a "$subscriber/postgresql.conf" >/dev/null
rl_at_exit "rl_as_owner pg_ctl -D '$subscriber' -m immediate -w -t 30 stop >/dev/null 2>&1"
rl_as_owner pg_ctl -D "$subscriber" -l "$RL_CLUSTER_DIR/subscriber.log" -w -t 60 start >/dev/null || {
    tail -n 30 "$RL_CLUSTER_DIR/subscriber.log" >&2
    rl_die "the subscriber did not start"
}
psql -X -q -v ON_ERROR_STOP=1 -p "$sub_port" \
    -c "CREATE EXTENSION ratelimit" \
    -c "CREATE SUBSCRIPTION policies CONNECTION 'host=$RL_CLUSTER_DIR port=$PGPORT dbname=postgres user=postgres' PUBLICATION policies" \
    >/dev/null

# One subscriber session: caches the policy, has the publisher change it,
# waits until the apply worker has written the change (reading the table
# itself), and calls again.
out=$(psql -X -A -t -q -p "$sub_port" -v ON_ERROR_STOP=1 2>&1 <<EOF
CREATE FUNCTION pg_temp.await(condition text) RETURNS boolean LANGUAGE plpgsql AS \$\$
DECLARE
    met boolean;
BEGIN
    FOR i IN 1..600 LOOP
        EXECUTE 'SELECT ' || condition INTO met;
        IF met THEN RETURN true; END IF;
        PERFORM pg_sleep(0.1);
    END LOOP;
    RETURN false;
END
\$\$;
SELECT 'synced ' || pg_temp.await('EXISTS (SELECT FROM ratelimit.policies WHERE name = ''repl'')');
SELECT 'cached ' || capacity FROM rate_limit_check('repl', 'k');
\! psql -X -q -p $PGPORT -c "SELECT rate_limit_define('repl', 0, '1 second', 5)" >/dev/null
SELECT 'applied ' || pg_temp.await('EXISTS (SELECT FROM ratelimit.policies WHERE name = ''repl'' AND burst = 5)');
SELECT 'redefined ' || capacity FROM rate_limit_check('repl', 'k');
\! psql -X -q -p $PGPORT -c "UPDATE ratelimit.policies SET burst = 7 WHERE name = 'repl'" >/dev/null
SELECT 'applied ' || pg_temp.await('EXISTS (SELECT FROM ratelimit.policies WHERE name = ''repl'' AND burst = 7)');
SELECT 'updated ' || capacity FROM rate_limit_check('repl', 'k');
\! psql -X -q -p $PGPORT -c "SELECT rate_limit_drop('repl')" >/dev/null
SELECT 'applied ' || pg_temp.await('NOT EXISTS (SELECT FROM ratelimit.policies WHERE name = ''repl'')');
\set ON_ERROR_STOP 0
\set VERBOSITY terse
SELECT 'dropped ' || capacity FROM rate_limit_check('repl', 'k');
EOF
)
printf '%s\n' "$out"
expected='synced true
cached 1
applied true
redefined 5
applied true
updated 7
applied true
ERROR:  rate limit policy "repl" does not exist'
psql -X -q -p "$sub_port" -c "DROP SUBSCRIPTION policies" >/dev/null 2>&1 || true
if [ "$out" = "$expected" ]; then
    printf 'logical_replication: PASS\n'
else
    printf 'logical_replication: FAIL (expected:\n%s\n)\n' "$expected"
    exit 1
fi

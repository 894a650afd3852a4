#!/usr/bin/env bash
# test/cluster/reindex_concurrently.sh
#
# The state table's primary key can be rebuilt online while calls run.
# 50,000 keys are prefilled; 8 pgbench clients then mix takes on those keys,
# takes on new keys (so rows are inserted throughout), a hot key, a policy
# take, two-key transactions and resets, while
#   phase 1: REINDEX INDEX CONCURRENTLY ratelimit.buckets_pkey runs 4 times
#            in a row, and
#   phase 2: a copy is built with CREATE UNIQUE INDEX CONCURRENTLY and
#            swapped in as the primary key with ALTER TABLE, the way an
#            operator rebuilds a primary key by hand.
# After each phase: no client got an error (pgbench aborts a client on its
# first error), the index is a new one, amcheck finds it consistent with the
# heap (bt_index_check with heapallindexed, bt_index_parent_check), a scan
# through it counts every row a sequential scan counts, and every stored row
# (the keys inserted while the index was rebuilt among them) is what
# rate_limit_check, looking it up through the index, answers.
# Then, deterministically, a call that waits for the table's lock behind
# DDL that drops what it had cached succeeds behind a second primary key
# swap, and reports the missing table (55000) behind DROP EXTENSION.
# Starts and stops its own cluster.
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/lib.sh"

PREFILL=50000
CLIENTS=8
REINDEXES=4
# The load runs this long; the rebuilds must finish within it.
SECONDS_TO_RUN=8
# Every bucket never refills (rate 0) and starts with BURST tokens, so the
# stored tokens are exactly what rate_limit_check must answer.
BURST=1e9

rl_require_install
cluster_start
psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
CREATE EXTENSION ratelimit;
CREATE EXTENSION amcheck;
SELECT rate_limit_define('pol', 0, '1 second', $BURST);
SELECT count(*) FROM generate_series(1, $PREFILL) AS g,
       rate_limit_take('ri', 'k' || g, 1, 0, $BURST) AS d WHERE d.allowed;
SELECT count(*) FROM generate_series(1, $PREFILL, 10) AS g,
       rate_limit_take('pol', 'p' || g) AS d WHERE d.allowed;
SQL

load=$RL_CLUSTER_DIR/load.sql
cat >"$load" <<SQL
\\set u random(1, $PREFILL)
\\set v random(1, $PREFILL)
\\set n random(1, 1000000000)
\\set op random(1, 100)
\\if :op <= 35
SELECT allowed FROM rate_limit_take('ri', 'k' || :u, 1, 0, $BURST);
\\elif :op <= 70
SELECT allowed FROM rate_limit_take('new', 'n' || :n, 1, 0, $BURST);
\\elif :op <= 80
SELECT allowed FROM rate_limit_take('ri', 'hot', 1, 0, $BURST);
\\elif :op <= 88
SELECT allowed FROM rate_limit_take('pol', 'p' || :u);
\\elif :op <= 95
BEGIN;
SELECT allowed FROM rate_limit_take('ri', 'k' || :u, 1, 0, $BURST);
SELECT allowed FROM rate_limit_take('new', 'n' || :n, 1, 0, $BURST);
SELECT allowed FROM rate_limit_take('ri', 'k' || :v, 1, 0, $BURST);
SELECT remaining FROM rate_limit_check('new', 'n' || :n, 0, 0, $BURST);
COMMIT;
\\else
SELECT rate_limit_reset('ri', 'k' || :u);
\\endif
SQL

failures=0
fail() { printf 'FAILED: %s\n' "$1"; failures=$((failures + 1)); }

index_oid() { psql -X -A -t -c "SELECT 'ratelimit.buckets_pkey'::regclass::oid"; }

# Runs the load in the background while "$@" runs; fails if the load saw any
# error or if the rebuild did not finish while the load still ran.
under_load() {
    local phase=$1 log=$RL_CLUSTER_DIR/pgbench.$1.log pid rc=0 out
    shift
    pgbench -n -c "$CLIENTS" -j 2 -T "$SECONDS_TO_RUN" -f "$load" >"$log" 2>&1 &
    pid=$!
    sleep 1
    local start end
    start=$(date +%s.%N)
    if ! out=$("$@" 2>&1); then
        printf '%s\n' "$out"
        fail "$phase: the rebuild failed"
    fi
    end=$(date +%s.%N)
    rebuild_seconds=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }')
    local overlapped=1
    kill -0 "$pid" 2>/dev/null || overlapped=0
    wait "$pid" || rc=$?
    if [ "$overlapped" -eq 0 ] && [ "$rc" -eq 0 ]; then
        fail "$phase: the load ended before the rebuild did (raise SECONDS_TO_RUN)"
    fi
    local transactions failed aborted
    transactions=$(awk '/^number of transactions actually processed:/ { print $NF }' "$log")
    failed=$(awk '/^number of failed transactions:/ { print $5 }' "$log")
    aborted=$({ grep -o 'client [0-9]* script [0-9]* aborted' "$log" || true; } | sort -u | wc -l)
    printf 'reindex_concurrently: %s: rebuilt in %s s under load; transactions=%s failed=%s pgbench_status=%s\n' \
        "$phase" "$rebuild_seconds" "${transactions:-?}" "${failed:-?}" "$rc"
    if [ "$rc" -ne 0 ] || [ "$aborted" -ne 0 ] || [ "${failed:-0}" != 0 ] || [ -z "$transactions" ]; then
        grep -E 'error|ERROR|DETAIL|HINT|aborted' "$log" | sort | uniq -c | sort -rn | head -n 20
        fail "$phase: calls failed while the primary key was rebuilt (pgbench status $rc, $aborted clients aborted, ${failed:-?} failed transactions)"
    fi
}

new_keys() { psql -X -A -t -c "SELECT count(*) FROM ratelimit.buckets WHERE name = 'new'"; }

# The index serves lookups and agrees with the heap; new_before is the number
# of new keys before the phase.
verify() {
    local phase=$1 before=$2 new_before=$3 after indexes plan heap_rows index_rows mismatched new_rows
    after=$(index_oid)
    [ "$after" != "$before" ] || fail "$phase: ratelimit.buckets_pkey is still the index it was ($before)"
    indexes=$(psql -X -A -t -c "SELECT string_agg(indexrelid::regclass || CASE WHEN indisvalid AND indisready AND indislive THEN '' ELSE ' (not valid)' END, ', ')
                                  FROM pg_index WHERE indrelid = 'ratelimit.buckets'::regclass")
    [ "$indexes" = "ratelimit.buckets_pkey" ] || fail "$phase: the table's indexes are $indexes"
    psql -X -q -v ON_ERROR_STOP=1 >/dev/null -c "
        SELECT bt_index_check('ratelimit.buckets_pkey', heapallindexed => true);
        SELECT bt_index_parent_check('ratelimit.buckets_pkey', heapallindexed => true)" ||
        fail "$phase: amcheck found ratelimit.buckets_pkey inconsistent"
    heap_rows=$(psql -X -q -A -t -c "SET enable_indexscan = off; SET enable_indexonlyscan = off; SET enable_bitmapscan = off;
                                  SELECT count(*) FROM ratelimit.buckets")
    plan=$(psql -X -q -A -t -c "SET enable_seqscan = off; SET enable_bitmapscan = off;
                               EXPLAIN (COSTS OFF) SELECT count(*) FROM ratelimit.buckets WHERE name >= ''")
    grep -q 'Index Only Scan using buckets_pkey' <<<"$plan" || fail "$phase: the count by index does not scan the index: $plan"
    index_rows=$(psql -X -q -A -t -c "SET enable_seqscan = off; SET enable_bitmapscan = off;
                                   SELECT count(*) FROM ratelimit.buckets WHERE name >= ''")
    # Every stored row, read from the heap, against what the extension's own
    # lookup (through the index) answers for it.
    read -r mismatched new_rows < <(psql -X -q -A -t -F ' ' -c "SET enable_indexscan = off; SET enable_indexonlyscan = off; SET enable_bitmapscan = off;
        SELECT count(*) FILTER (WHERE remaining IS DISTINCT FROM b.tokens),
               count(*) FILTER (WHERE b.name = 'new')
          FROM ratelimit.buckets AS b,
               LATERAL (SELECT CASE WHEN b.name = 'pol'
                                    THEN (SELECT remaining FROM rate_limit_check(b.name, b.key, 0))
                                    ELSE (SELECT remaining FROM rate_limit_check(b.name, b.key, 0, 0, $BURST))
                               END AS remaining) AS c")
    printf 'reindex_concurrently: %s: index %s -> %s, rows heap=%s index=%s new_keys=%s (+%s) lookups_mismatched=%s\n' \
        "$phase" "$before" "$after" "$heap_rows" "$index_rows" "$new_rows" "$((new_rows - new_before))" "$mismatched"
    [ "$heap_rows" = "$index_rows" ] || fail "$phase: a scan of the index finds $index_rows rows, the heap has $heap_rows"
    [ "$mismatched" = 0 ] || fail "$phase: rate_limit_check disagrees with the stored row for $mismatched keys"
    [ "${new_rows:-0}" -gt "$new_before" ] || fail "$phase: no new key was inserted"
}

reindex_loop() {
    local i
    for i in $(seq 1 "$REINDEXES"); do
        psql -X -q -v ON_ERROR_STOP=1 -c 'REINDEX INDEX CONCURRENTLY ratelimit.buckets_pkey' || return 1
    done
}

swap_in_copy() {
    psql -X -q -v ON_ERROR_STOP=1 <<'SQL'
CREATE UNIQUE INDEX CONCURRENTLY buckets_pkey_new ON ratelimit.buckets (name COLLATE "C", key COLLATE "C");
ALTER TABLE ratelimit.buckets DROP CONSTRAINT buckets_pkey,
    ADD CONSTRAINT buckets_pkey PRIMARY KEY USING INDEX buckets_pkey_new;
SQL
}

before=$(index_oid)
new_before=$(new_keys)
under_load reindex reindex_loop
verify reindex "$before" "$new_before"

before=$(index_oid)
new_before=$(new_keys)
under_load swap swap_in_copy
verify swap "$before" "$new_before"

# A call that loaded the table's description, then waits for the table's
# lock while DDL replaces what it loaded, must use what is there once it has
# the lock.  Leaves the waiting session's output in $RL_CLUSTER_DIR/waiter.out.
lock_waits() {  # application_name locktype granted: true once such a lock is seen
    local i
    for i in $(seq 1 100); do
        [ "$(psql -X -A -t -c "SELECT count(*) FROM pg_locks AS l JOIN pg_stat_activity AS a USING (pid)
                                 WHERE a.application_name = '$1' AND l.locktype = '$2' AND l.granted = $3")" -gt 0 ] && return 0
        sleep 0.1
    done
    return 1
}
behind_ddl() {
    local ddl=$1 fifo=$RL_CLUSTER_DIR/locker waiter locker
    rm -f "$fifo"
    mkfifo "$fifo"
    PGAPPNAME=locker psql -X -q -v ON_ERROR_STOP=1 <"$fifo" >"$RL_CLUSTER_DIR/locker.out" 2>&1 &
    locker=$!
    exec 3>"$fifo"
    echo "SELECT pg_advisory_lock(7);" >&3
    lock_waits locker advisory true || fail "behind DDL: the locking session did not start"
    PGAPPNAME=waiter psql -X -q -A -t -v VERBOSITY=verbose >"$RL_CLUSTER_DIR/waiter.out" 2>&1 <<SQL &
SELECT allowed FROM rate_limit_take('ri', 'k1', 1, 0, $BURST);
SELECT pg_advisory_lock(7);
SELECT allowed FROM rate_limit_take('ri', 'k1', 1, 0, $BURST);
SQL
    waiter=$!
    lock_waits waiter advisory false || fail "behind DDL: the call never waited for its go"
    printf 'BEGIN;\nLOCK TABLE ratelimit.buckets IN ACCESS EXCLUSIVE MODE;\nSELECT pg_advisory_unlock(7);\n' >&3
    lock_waits waiter relation false || fail "behind DDL: the call never waited for the table's lock"
    printf '%s\nCOMMIT;\n' "$ddl" >&3
    exec 3>&-
    wait "$locker" || { cat "$RL_CLUSTER_DIR/locker.out"; fail "behind DDL: $ddl failed"; }
    wait "$waiter" || true
}

# The swap again, now with a call waiting behind it: it must succeed.
psql -X -q -v ON_ERROR_STOP=1 -c 'CREATE UNIQUE INDEX buckets_pkey_new2 ON ratelimit.buckets (name COLLATE "C", key COLLATE "C")'
behind_ddl 'ALTER TABLE ratelimit.buckets DROP CONSTRAINT buckets_pkey,
    ADD CONSTRAINT buckets_pkey PRIMARY KEY USING INDEX buckets_pkey_new2;'
out=$(cat "$RL_CLUSTER_DIR/waiter.out")
printf 'reindex_concurrently: a call waiting behind the swap of the primary key: %s\n' "$(grep -v '^$' <<<"$out" | tr '\n' ' ')"
[ "$(grep -v '^$' <<<"$out")" = "$(printf 't\nt')" ] || fail "a call that waited behind the swap of the primary key did not succeed"
# And behind DROP EXTENSION: it must report the missing table.
behind_ddl 'DROP EXTENSION ratelimit;'
out=$(cat "$RL_CLUSTER_DIR/waiter.out")
printf 'reindex_concurrently: a call waiting behind DROP EXTENSION: %s\n' "$(grep -v '^$' <<<"$out" | head -n 2 | tr '\n' ' ')"
grep -q '^ERROR:  55000: table ratelimit.buckets does not exist' <<<"$out" ||
    fail "a call that waited behind DROP EXTENSION did not report the missing table"

if [ "$failures" -eq 0 ]; then
    printf 'reindex_concurrently: PASS\n'
else
    printf 'reindex_concurrently: FAIL\n'
    exit 1
fi

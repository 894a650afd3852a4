#!/usr/bin/env bash
# test/cluster/memory.sh
#
# The memory engine (policies with storage => 'memory') on a server that
# preloads ratelimit, as PostgreSQL before 17 needs:
# - test/sql/native/memory.sql, through pg_regress, gives
#   expected/native/memory.out: the API, rollback and savepoint refunds, no
#   transaction id and no heap write, PREPARE TRANSACTION refused, and the
#   differential test against the table engine;
# - test/specs/memory_escrow.spec, through pg_isolation_regress, gives the
#   same output at READ COMMITTED, REPEATABLE READ and SERIALIZABLE;
# - the load generator, 8 clients on one key with random rollbacks, stays
#   within the admission bound with no error at READ COMMITTED, REPEATABLE
#   READ and SERIALIZABLE;
# - one transaction takes more than 4,194,304 times;
# - a clean restart keeps every balance, those of keys kept in the table
#   too, and a save file damaged since loads none;
# - the engine takes at most 128 bytes of shared memory per place at
#   1,000,000 places, 192 at 10,000; a crash, and an
#   immediate shutdown, empty the engine as they empty the unlogged table;
# - a bounded engine (one policy may take every place here:
#   ratelimit.memory_share = 100): full buckets are evicted without changing
#   an answer, and a new key that finds only buckets that are not full is
#   kept in the table, granted as in memory, and stays there while its row
#   does (with room in memory again too), until a purge forgets its full
#   row; a reset forgets it there too; a redefined policy's buckets keep their
#   places until judged again, across a clean restart too, and a
#   redefinition rolled back keeps none but those a call judged under it;
#   so do buckets stored, or judged again, under the old definition while
#   the new one is not committed, also while one transaction writes more
#   policies than the engine follows by name; a committed one keeps none
#   stored after it; PREPARE TRANSACTION after defining a memory policy is
#   refused; the limits, kept once each, leave new keys that find no entry
#   to the table, and keep entries for the buckets held, which are answered
#   under a new limit;
# - on a hot standby the engine works on the standby's own buckets;
# - without preloading: before 17 a clear 55000 naming the setting, from
#   rate_limit_define and from every call, from 17 the engine works all the
#   same; a dump of memory policies restores either way;
# - preloaded again, the regression suite's contract (test/sql/contract/)
#   with every policy in the memory engine where it can be (make
#   installcheck-memory).
# Starts and stops clusters of its own.
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/lib.sh"

rl_require_install
RL_CLUSTER_CONF="shared_preload_libraries = 'ratelimit'
ratelimit.memory_buckets = 1024
ratelimit.memory_share = 100" cluster_start
RL_FAILURES=0
q() { psql -X -A -t -q -v ON_ERROR_STOP=1 "$@"; }
# fill POLICY COST TRIES CLOCK: takes COST from keys 1 to TRIES of POLICY
# at the fixed clock CLOCK, each in a transaction of its own; a key that
# finds no place in memory is kept in the table.
fill() {
    q -c "SET ratelimit.fixed_clock = $4" -c "
    DO \$\$ BEGIN
        FOR i IN 1..$3 LOOP
            PERFORM rate_limit_take('$1', i::text, $2);
            COMMIT;
        END LOOP;
    END \$\$" >/dev/null
}
# "$places 'NAME'": the places of memory policy NAME of this database.
places="SELECT coalesce(sum(buckets), 0) FROM rate_limit_memory_stats
        WHERE datname = current_database() AND name ="
# in_table NAME: a key of NAME that the table keeps.
in_table() { q -c "SELECT key FROM ratelimit.buckets WHERE name = '$1' ORDER BY key LIMIT 1"; }
restart() {  # MODE [extra postgresql.conf line]
    rl_as_owner "$RL_PG_BINDIR/pg_ctl" -D "$RL_CLUSTER_DATA" -m "$1" -w -t 60 stop >/dev/null
    [ -z "${2:-}" ] || printf '%s\n' "$2" | rl_as_owner tee -a "$RL_CLUSTER_DATA/postgresql.conf" >/dev/null
    rl_as_owner "$RL_PG_BINDIR/pg_ctl" -D "$RL_CLUSTER_DATA" -l "$RL_CLUSTER_DIR/server.log" \
        -w -t 60 start >/dev/null
}

# regress MESSAGE OUTPUT COMMAND...: "ok: MESSAGE" and pg_regress's verdict
# if COMMAND (a pg_regress run into directory OUTPUT) passes; otherwise what
# it printed and the differences, counted as a failure.
regress() {
    local message=$1 output=$2 log
    shift 2
    log=$RL_CLUSTER_DIR/$(basename "$output").log
    if "$@" >"$log" 2>&1; then
        printf 'ok: %s (%s)\n' "$message" "$(grep -E 'tests passed' "$log" | sed 's/^[# ]*//; s/ *$//')"
    else
        printf 'FAILED: %s\n' "$message"
        cat "$log" "$output/regression.diffs" 2>/dev/null || true
        RL_FAILURES=$((RL_FAILURES + 1))
    fi
}

# The regression test with the library preloaded.
pgxs=$(dirname "$("$PG_CONFIG" --pgxs)")/../..
mkdir -p "$RL_CLUSTER_DIR/regress/results/native"
regress "test/sql/native/memory.sql gives expected/native/memory.out" "$RL_CLUSTER_DIR/regress" \
    "$pgxs/src/test/regress/pg_regress" --bindir="$RL_PG_BINDIR" --inputdir="$RL_ROOT/test" \
    --outputdir="$RL_CLUSTER_DIR/regress" --dbname=memory_regress --load-extension=ratelimit native/memory
q -c "DROP DATABASE memory_regress"


# The escrow between transactions: the same interleavings, the same
# answers, at every isolation level.
for level in "read committed" "repeatable read" serializable; do
    out=$RL_CLUSTER_DIR/isolation/${level// /_}
    mkdir -p "$out"
    options="-c default_transaction_isolation=${level// /\\ }"
    if PGOPTIONS=$options "$pgxs/src/test/isolation/pg_isolation_regress" --bindir="$RL_PG_BINDIR" \
            --inputdir="$RL_ROOT/test" --outputdir="$out" --dbname=memory_isolation \
            --load-extension=ratelimit memory_escrow >"$out/log" 2>&1 &&
        [ "$(PGOPTIONS=$options q -d memory_isolation -c "SHOW default_transaction_isolation")" = "$level" ]; then
        printf 'ok: test/specs/memory_escrow.spec at %s\n' "$level"
    else
        printf 'FAILED: test/specs/memory_escrow.spec at %s\n' "$level"
        cat "$out/log"
        cat "$out/regression.diffs" 2>/dev/null || true
        RL_FAILURES=$((RL_FAILURES + 1))
    fi
done
q -c "DROP DATABASE IF EXISTS memory_isolation"

# Exact admission under load at every isolation level.
load=$RL_ROOT/test/load/ratelimit_load
# make rebuilds it when its sources are newer: a binary left by an older
# checkout may lack options the runs below pass.
make -C "$RL_ROOT" -s load >/dev/null
for level in rc rr serializable; do
    q -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS memory_load" \
      -c "CREATE DATABASE memory_load"
    q -d memory_load -c "CREATE EXTENSION ratelimit"
    out=$(PGDATABASE=memory_load timeout -k 10 180 "$load" --storage memory --clients 8 \
          --seconds 5 --keys 1 --isolation "$level" --rollback 0.10 --rate 200 --burst 100 2>&1 || true)
    printf '%s\n' "$out" | sed 's/^/  /'
    if grep -Eq '^load:.*PASS[[:space:]]*$' <<<"$out"; then
        printf 'ok: memory engine, 8 clients on one key, %s\n' "$level"
    else
        printf 'FAILED: memory engine, 8 clients on one key, %s\n' "$level"
        RL_FAILURES=$((RL_FAILURES + 1))
    fi
done
# A report-only memory policy: every take allowed, the grants (the takes
# that took) within the same bounds.
out=$(PGDATABASE=memory_load timeout -k 10 180 "$load" --storage memory --report-only --clients 8 \
      --seconds 5 --keys 1 --isolation rc --rollback 0.10 --rate 200 --burst 100 2>&1 || true)
printf '%s\n' "$out" | sed 's/^/  /'
if grep -Eq '^load:.*PASS[[:space:]]*$' <<<"$out"; then
    printf 'ok: memory engine, report-only policy, 8 clients on one key\n'
else
    printf 'FAILED: memory engine, report-only policy, 8 clients on one key\n'
    RL_FAILURES=$((RL_FAILURES + 1))
fi
q -c "DROP DATABASE memory_load"

# Escrow: a take pending in an open transaction counts as spent, refill
# the full bucket could not hold meanwhile is not credited, and its
# rollback gives back only what the bucket lacks; a refund counts only once
# committed.  (Fixed clocks: rate 1 a second, burst 10, or rate 0.)
q -c "CREATE DATABASE escrow"
q -d escrow -c "CREATE EXTENSION ratelimit" \
  -c "SELECT rate_limit_define('escrow', 1, '1 second', 10, storage => 'memory')" \
  -c "SELECT rate_limit_define('escrow-fixed', 0, '1 second', 10, storage => 'memory')" \
  -c "SELECT rate_limit_take('escrow-fixed', 'k', 10)" >/dev/null
# held SQL...: runs them in an open transaction (in database $HELD_DB,
# escrow unless set), returning once they have all run, until the file
# $RL_CLUSTER_DIR/release appears; then ends it with $HELD_END (ROLLBACK
# unless set).
held() {
    local db=${HELD_DB:-escrow}
    rm -f "$RL_CLUSTER_DIR/release"
    ( { printf 'SET ratelimit.fixed_clock = 2000000000;\nBEGIN;\n'; printf '%s;\n' "$@"
        printf "SELECT 'all run' AS held_statements;\n"
        while [ ! -e "$RL_CLUSTER_DIR/release" ]; do sleep 0.05; done
        printf '%s;\n' "${HELD_END:-ROLLBACK}"; } | q -d "$db" >/dev/null ) &
    for _ in $(seq 1 200); do
        [ "$(q -d "$db" -c "SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction'
                             AND datname = '$db' AND query LIKE '%AS held_statements%'")" = 1 ] && break
        sleep 0.05
    done
}
held "SELECT rate_limit_take('escrow', 'k', 10)"
rl_expect_value "ten seconds after a pending take of the whole burst" f \
    "SET ratelimit.fixed_clock = 2000000010; SELECT allowed FROM rate_limit_take('escrow', 'k', 10)" -d escrow
touch "$RL_CLUSTER_DIR/release"; wait
rl_expect_value "its rollback gives the burst back once" "true false" \
    "SET ratelimit.fixed_clock = 2000000010;
     SELECT string_agg(allowed::text, ' ') FROM (SELECT allowed FROM rate_limit_take('escrow', 'k', 10)
     UNION ALL SELECT allowed FROM rate_limit_take('escrow', 'k', 10)) AS t" -d escrow
held "SELECT rate_limit_refund('escrow-fixed', 'k', 10)"
rl_expect_value "a refund not yet committed gives nothing" f \
    "SELECT allowed FROM rate_limit_take('escrow-fixed', 'k', 1)" -d escrow
touch "$RL_CLUSTER_DIR/release"; wait
rl_expect_value "nor once rolled back" "false 0" \
    "SELECT allowed || ' ' || remaining FROM rate_limit_take('escrow-fixed', 'k', 1)" -d escrow
# A take committed long after others moved the bucket's stamp on (rate 1
# a minute, burst 100: a stamp restarts only 100 minutes ahead) is taken
# from the bucket as it is, without counting the refill since again.
q -d escrow -c "SELECT rate_limit_define('escrow-slow', 1, '1 minute', 100, storage => 'memory')" >/dev/null
HELD_END=COMMIT held "SELECT rate_limit_take('escrow-slow', 'k', 1)"
rl_expect_value "105 minutes later, 99 taken past the held take" t \
    "SET ratelimit.fixed_clock = 2000006300; SELECT allowed FROM rate_limit_take('escrow-slow', 'k', 99)" -d escrow
touch "$RL_CLUSTER_DIR/release"; wait
rl_expect_value "a minute after the held take commits: 1 token, not a burst" "false 1" \
    "SET ratelimit.fixed_clock = 2000006360;
     SELECT allowed || ' ' || floor(remaining) FROM rate_limit_take('escrow-slow', 'k', 50)" -d escrow

# One transaction takes as often as it likes: 4,194,400 takes of one key,
# each kept until the commit (the table engine does as many).
q -d escrow -c "SELECT rate_limit_define('bulk', 0, '1 second', 1000000000, storage => 'memory')" >/dev/null
rl_expect_value "4,194,400 takes in one statement" 4194400 \
    "SELECT count(*) FROM generate_series(1, 4194400) WHERE (rate_limit_take('bulk', 'k', 1)).allowed" -d escrow
rl_expect_value "all of them committed" 995805600 \
    "SELECT remaining FROM rate_limit_check('bulk', 'k', 0)" -d escrow
q -d escrow -c "CALL rate_limit_reset_limit('bulk')" >/dev/null
q -c "DROP DATABASE escrow"

# A clean restart keeps every balance; a take in a transaction that the
# shutdown aborts is given back.  (rate 1 an hour: the balance moves by
# less than a token while the test runs.)
q -c "CREATE EXTENSION ratelimit" \
  -c "SELECT rate_limit_define('life', 1, '1 hour', 10, storage => 'memory')" \
  -c "SELECT rate_limit_define('life-table', 1, '1 hour', 10)" \
  -c "SELECT rate_limit_take('life', 'a', 7)" \
  -c "SELECT rate_limit_take('life', 'b', 4)" \
  -c "SELECT rate_limit_take('life-table', 'a', 7)" >/dev/null
(q -c "BEGIN" -c "SELECT rate_limit_take('life', 'a', 2)" -c "SELECT pg_sleep(60)" >/dev/null 2>&1 &)
for _ in $(seq 1 100); do
    [ "$(q -c "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep%'")" = 1 ] && break
    sleep 0.05
done
rl_expect_value "a's balance with a take in flight" 1 \
    "SELECT floor(remaining) FROM rate_limit_check('life', 'a', 0)"
restart fast
rl_expect_value "a clean restart keeps a's balance, the aborted take given back" 3 \
    "SELECT floor(remaining) FROM rate_limit_check('life', 'a', 0)"
rl_expect_value "a clean restart keeps b's balance" 6 \
    "SELECT floor(remaining) FROM rate_limit_check('life', 'b', 0)"
rl_expect_value "the buckets are listed after the restart" "a,b" \
    "SELECT string_agg(key, ',' ORDER BY key) FROM rate_limit_buckets('life')"
[ ! -e "$RL_CLUSTER_DATA/pg_stat/ratelimit_memory.stat" ] ||
    { printf 'FAILED: the saved buckets were not deleted once loaded\n'; RL_FAILURES=$((RL_FAILURES + 1)); }

# A save file damaged after the shutdown (here its last byte before the
# CRC, a byte of the last bucket's key) loads nothing: every bucket starts
# full, not only the one whose key the damage changed.
q -c "SELECT rate_limit_take('life', 'c', 5)" >/dev/null
rl_as_owner "$RL_PG_BINDIR/pg_ctl" -D "$RL_CLUSTER_DATA" -m fast -w -t 60 stop >/dev/null
save=$RL_CLUSTER_DATA/pg_stat/ratelimit_memory.stat
offset=$(( $(stat -c %s "$save") - 5 ))
byte=$(od -An -tu1 -j "$offset" -N1 "$save" | tr -d ' ')
printf "\\$(printf '%03o' $(( byte ^ 1 )))" | dd of="$save" bs=1 seek="$offset" conv=notrunc status=none
rl_as_owner "$RL_PG_BINDIR/pg_ctl" -D "$RL_CLUSTER_DATA" -l "$RL_CLUSTER_DIR/server.log" \
    -w -t 60 start >/dev/null
rl_expect_value "a damaged save file loads nothing" "10 10 10" \
    "SELECT string_agg(floor(remaining)::text, ' ' ORDER BY k)
     FROM unnest(ARRAY['a', 'b', 'c']) AS k, rate_limit_check('life', k, 0)"
rl_expect_value "and says so in the server log" 1 \
    "SELECT $(grep -c 'memory buckets in "pg_stat/ratelimit_memory.stat" not loaded from number 1 on' \
              "$RL_CLUSTER_DIR/server.log" || true)"
[ ! -e "$save" ] ||
    { printf 'FAILED: the damaged save file was not deleted\n'; RL_FAILURES=$((RL_FAILURES + 1)); }

# A clean restart puts every bucket back in a set it fitted in: an engine
# whose every place holds a bucket that is not full loads every one.  The
# file, which holds the seed that places keys, is the server owner's alone.
q -c "SELECT rate_limit_define('crowd', 0, '1 second', 5, storage => 'memory')" >/dev/null
fill crowd 1 3000 2000000000
crowd=$(q -c "$places 'crowd'")
rl_check "$crowd >= 1000" "$crowd buckets not full fill the engine of 1024 (1000 or more expected)"
rl_expect_value "the others are kept in the table" "$((3000 - crowd))" \
    "SELECT count(*) FROM ratelimit.buckets WHERE name = 'crowd'"
kept=$(in_table crowd)
rl_as_owner "$RL_PG_BINDIR/pg_ctl" -D "$RL_CLUSTER_DATA" -m fast -w -t 60 stop >/dev/null
mode=$(stat -c %a "$save")
rl_as_owner "$RL_PG_BINDIR/pg_ctl" -D "$RL_CLUSTER_DATA" -l "$RL_CLUSTER_DIR/server.log" \
    -w -t 60 start >/dev/null
rl_expect_value "the save file is readable by the server's owner only" 600 "SELECT $mode"
rl_expect_value "a clean restart loads every bucket of a full engine" "$crowd" "$places 'crowd'"
rl_expect_value "a key kept in the table keeps its balance there" "true 0 false" \
    "SELECT string_agg(r, ' ') FROM (
         SELECT allowed || ' ' || remaining AS r FROM rate_limit_take('crowd', '$kept', 4)
         UNION ALL SELECT allowed::text FROM rate_limit_take('crowd', '$kept', 1)) AS t"
# With fewer places than before, the buckets are placed afresh: those that
# find no room start full again, and the server log says how many.
restart fast "ratelimit.memory_buckets = 512"
loaded=$(q -c "$places 'crowd'")
lost=$(sed -n 's/.*LOG:  \([0-9]*\) of the [0-9]* memory buckets in "pg_stat\/ratelimit_memory.stat" found no room/\1/p' \
       "$RL_CLUSTER_DIR/server.log" | tail -n 1)
rl_check "$loaded <= 512 && ${lost:-0} >= $crowd - 512 && $loaded + ${lost:-0} >= $crowd" \
    "with 512 places, $loaded buckets loaded and ${lost:-no} found no room, of $crowd and a few others"
q -c "CALL rate_limit_reset_limit('crowd')" >/dev/null

# Shared memory per place: the whole table (slots, sets, policies, limits,
# text pool) divided by its places is at most 128 bytes from 1,000,000
# places on; at 10,000 the fixed parts (the policies' entries, the limits)
# weigh more, and it stays under 192.
per_place="SELECT round(size::numeric / (SELECT ceil(setting::numeric / 16) * 16
                 FROM pg_settings WHERE name = 'ratelimit.memory_buckets'), 1)
           FROM pg_shmem_allocations WHERE name = 'ratelimit_memory'"
for size_bound in 10000:192 1000000:128; do
    restart fast "ratelimit.memory_buckets = ${size_bound%%:*}"
    bytes=$(q -c "$per_place")
    printf '%s places: %s bytes of shared memory per place\n' "${size_bound%%:*}" "$bytes"
    rl_check "${bytes:-1e9} <= ${size_bound#*:}" \
        "${size_bound%%:*} places take ${bytes:-no} bytes each (${size_bound#*:} at most expected)"
done
restart fast "ratelimit.memory_buckets = 1024"

# A crash (a backend killed) empties the engine, as it empties the unlogged
# table; so does an immediate shutdown.
q -c "SELECT rate_limit_take('life', 'a', 1)" >/dev/null
victim=$(q -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'")
kill -KILL "$victim"
for _ in $(seq 1 200); do
    q -c "SELECT 1" >/dev/null 2>&1 && break
    sleep 0.1
done
rl_expect_value "after a crash memory buckets start full" 10 \
    "SELECT floor(remaining) FROM rate_limit_check('life', 'a', 0)"
rl_expect_value "after a crash table buckets start full too" 10 \
    "SELECT floor(remaining) FROM rate_limit_check('life-table', 'a', 0)"
q -c "SELECT rate_limit_take('life', 'a', 5)" >/dev/null
restart immediate
rl_expect_value "after an immediate shutdown memory buckets start full" 10 \
    "SELECT floor(remaining) FROM rate_limit_check('life', 'a', 0)"

# A bounded engine: 32 places, in two sets of 16.
restart fast "ratelimit.memory_buckets = 32"
q -c "SELECT rate_limit_define('never', 0, '1 second', 5, storage => 'memory')" \
  -c "SELECT rate_limit_define('quick', 1, '1 second', 1, storage => 'memory')" >/dev/null
# Keys that never refill fill the engine: a new key that then finds no
# place is kept in the table, granted all the same.
rl_expect_value "every new key is granted" 40 \
    "SELECT count(*) FILTER (WHERE allowed) FROM generate_series(1, 40) AS i,
            rate_limit_take('never', 'n' || i, 1)"
held=$(q -c "$places 'never'")
rl_check "$held >= 16 && $held <= 32" "$held keys of 40 took places in memory (16 to 32 expected)"
rl_expect_value "the others are kept in the table" "$((40 - held))" \
    "SELECT count(*) FROM ratelimit.buckets WHERE name = 'never'"
rl_expect_value "every bucket is listed" 40 "SELECT count(*) FROM rate_limit_buckets('never')"
rl_expect_value "the policy's keys are marked as in the table" "true $((40 - held))" \
    "SELECT in_table || ' ' || overflows FROM rate_limit_memory_stats
      WHERE datname = current_database() AND name = 'never'"
# A new key's set is drawn by a hash under a random seed: 40 keys may leave
# a set with room.  200 keys more fill both sets (each must find 16 of 240),
# so that the new key below surely finds no place.
q -c "SELECT count(*) FROM generate_series(1, 200) AS i, rate_limit_take('never', 'f' || i, 1)" >/dev/null
rl_expect_value "200 keys more fill every place" 32 "$places 'never'"
# In a read-only transaction a key kept in the table is read there but not
# written: a take that would write its row, or store a new key there, is
# refused with 25006, while one of a key in memory is granted.
read_only="-c default_transaction_read_only=on"
in_memory=$(q -c "SELECT min(k) FROM generate_series(1, 40) AS i, LATERAL (SELECT 'n' || i AS k) AS n
                  WHERE k NOT IN (SELECT key FROM ratelimit.buckets WHERE name = 'never')")
second=$(q -c "SELECT key FROM ratelimit.buckets WHERE name = 'never' ORDER BY key OFFSET 1 LIMIT 1")
PGOPTIONS=$read_only rl_expect_value "read-only: a check of a key kept in the table" 4 \
    "SELECT remaining FROM rate_limit_check('never', '$second', 0)"
PGOPTIONS=$read_only rl_expect_sqlstate "read-only: a take of a key kept in the table" 25006 \
    "SELECT * FROM rate_limit_take('never', '$second', 1)"
PGOPTIONS=$read_only rl_expect_sqlstate "read-only: a new key that finds no place" 25006 \
    "SELECT * FROM rate_limit_take('never', 'n-read-only', 1)"
PGOPTIONS=$read_only rl_expect_value "read-only: a take of a key in memory" "true 3" \
    "SELECT allowed || ' ' || remaining FROM rate_limit_take('never', '$in_memory', 1)"
rl_expect_value "and what the refusals left" "4 0" \
    "SELECT (SELECT remaining FROM rate_limit_check('never', '$second', 0)) || ' ' ||
            (SELECT count(*) FROM ratelimit.buckets WHERE key = 'n-read-only')"
# A key kept in the table stays there while its row does, even once memory
# has room again (a bucket reset frees one): its balance goes on there.
kept=$(in_table never)
q -c "SELECT rate_limit_reset('never', (SELECT min(k) FROM generate_series(1, 40) AS i, LATERAL (SELECT 'n' || i AS k) AS n
                                        WHERE k NOT IN (SELECT key FROM ratelimit.buckets WHERE name = 'never')))" >/dev/null
rl_expect_value "with room in memory again, a key kept in the table goes on there" "true 0 false" \
    "SELECT string_agg(r, ' ') FROM (
         SELECT allowed || ' ' || remaining AS r FROM rate_limit_take('never', '$kept', 4)
         UNION ALL SELECT allowed::text FROM rate_limit_take('never', '$kept', 1)) AS t"
rl_expect_value "its row holds what it took" 0 \
    "SELECT tokens FROM ratelimit.buckets WHERE name = 'never' AND key = '$kept'"
# A reset forgets it there too.
rl_expect_value "a reset of a key kept in the table" t "SELECT rate_limit_reset('never', '$kept')"
rl_expect_value "forgets its row" 0 \
    "SELECT count(*) FROM ratelimit.buckets WHERE name = 'never' AND key = '$kept'"
# A purge forgets the full row of a key kept in the table; its next take
# finds room in memory.  (Rate 1 a second, burst 1: full a second later.)
q -c "SET ratelimit.fixed_clock = 2000000000" \
  -c "SELECT count(*) FROM generate_series(41, 80) AS i, rate_limit_take('never', 'n' || i, 1)" \
  -c "SELECT rate_limit_take('quick', 'q0', 1)" >/dev/null
rl_expect_value "a key that finds no place, while the engine is full" 1 \
    "SELECT count(*) FROM ratelimit.buckets WHERE name = 'quick' AND key = 'q0'"
q -c "CALL rate_limit_reset_limit('never')" -c "SET ratelimit.fixed_clock = 2000000002" \
  -c "CALL rate_limit_purge('quick')" >/dev/null
rl_expect_value "once full, a purge forgets its row" 0 \
    "SELECT count(*) FROM ratelimit.buckets WHERE name = 'quick'"
rl_expect_value "and its next take finds room in memory" "true 1" \
    "SET ratelimit.fixed_clock = 2000000002;
     SELECT allowed || ' ' || ($places 'quick') FROM rate_limit_take('quick', 'q0', 1)"
q -c "VACUUM ratelimit.buckets" -c "CALL rate_limit_purge()" >/dev/null
rl_expect_value "with no row of theirs left, once VACUUM has removed them, a purge unmarks the policies" \
    "false false" "SELECT string_agg(in_table::text, ' ' ORDER BY name) FROM rate_limit_memory_stats
                   WHERE datname = current_database() AND name IN ('never', 'quick')"
q -c "CALL rate_limit_reset_limit('quick')" >/dev/null
# Under load, new keys race for the places: 8 clients with rollbacks on 64
# keys of this 32-place engine, at every isolation level, some kept in
# memory, the others in the table, each within its admission bound and
# without an error.
for level in rc rr serializable; do
    out=$(timeout -k 10 120 "$load" --storage memory --name "race-$level" --clients 8 --seconds 3 \
          --keys 64 --isolation "$level" --rollback 0.10 --rate 20 --burst 10 2>&1 || true)
    printf '%s\n' "$out" | sed 's/^/  /'
    kept=$(q -c "SELECT count(DISTINCT key) FROM ratelimit.buckets WHERE name = 'race-$level'")
    if grep -Eq '^load:.*PASS[[:space:]]*$' <<<"$out" && [ "$kept" -gt 0 ] && [ "$kept" -lt 64 ]; then
        printf 'ok: 8 clients on 64 keys racing for 32 places, %s (%s kept in the table)\n' "$level" "$kept"
    else
        printf 'FAILED: 8 clients on 64 keys racing for 32 places, %s (%s kept in the table)\n' "$level" "$kept"
        RL_FAILURES=$((RL_FAILURES + 1))
    fi
    q -c "CALL rate_limit_reset_limit('race-$level')" >/dev/null
done
# A name and key longer than a slot holds (32 bytes) are kept in a pool of
# text, a 64-byte chunk for every 16 places but room for two of the longest
# at least (here 40 chunks): a name and key of 1,005 bytes take 16 chunks,
# so two fit, and a third such key is kept in the table.  Each is listed whole, across a clean restart too, and a bucket
# forgotten gives its chunks back.
rl_expect_value "three keys of 1,000 bytes, each granted" 3 \
    "SELECT count(*) FILTER (WHERE allowed) FROM generate_series(1, 3) AS i,
            rate_limit_take('never', repeat(i::text, 1000), 1)"
long_keys="SELECT ($places 'never') || ' ' || (SELECT count(*) FROM ratelimit.buckets WHERE name = 'never')
                  || ' ' || (SELECT string_agg(length(key) || ':' || left(key, 1), ',' ORDER BY key)
                               FROM rate_limit_buckets('never'))"
rl_expect_value "two in memory, the third in the table, each listed whole" "2 1 1000:1,1000:2,1000:3" "$long_keys"
restart fast
rl_expect_value "and so after a clean restart" "2 1 1000:1,1000:2,1000:3" "$long_keys"
q -c "CALL rate_limit_reset_limit('never')" \
  -c "SELECT count(*) FROM generate_series(4, 5) AS i, rate_limit_take('never', repeat(i::text, 1000), 1)" >/dev/null
rl_expect_value "forgotten, they give their chunks back to new ones" "2 0 1000:4,1000:5" "$long_keys"
q -c "CALL rate_limit_reset_limit('never')" >/dev/null
# Full buckets give their places up without changing an answer: with the
# fixed clock, 16 'quick' keys emptied at one instant, then 64 new keys two
# seconds apart, each finding full buckets to evict; then every key again,
# later: each starts full, as it would had it never been evicted.  Each
# take commits: a bucket an open transaction took from keeps its place
# until that transaction ends.
q -c "CALL rate_limit_reset_limit('never')" -c "
    CREATE PROCEDURE quick_takes(first int, last int, start float8, INOUT result text DEFAULT NULL)
    LANGUAGE plpgsql AS \$\$
    DECLARE
        granted int := 0;
        emptied int := 0;
        d record;
    BEGIN
        FOR i IN first..last LOOP
            PERFORM set_config('ratelimit.fixed_clock', (start + 2 * i)::text, false);
            SELECT * INTO d FROM rate_limit_take('quick', 'q' || i, 1);
            granted := granted + d.allowed::int;
            emptied := emptied + (d.remaining = 0)::int;
            COMMIT;
        END LOOP;
        result := granted || ' ' || emptied;
    END \$\$" >/dev/null
rl_expect_value "16 keys emptied at one instant" 16 "
    SET ratelimit.fixed_clock = 2000000000;
    SELECT count(*) FILTER (WHERE allowed) FROM generate_series(1, 16) AS i,
           rate_limit_take('quick', 'q' || i, 1)"
rl_expect_value "64 new keys, each evicting a full bucket" "64 64" \
    "CALL quick_takes(17, 80, 2000000000)"
rl_expect_value "every key again: each starts full" "80 80" \
    "CALL quick_takes(1, 80, 2000001000)"
# fill_with_never CLOCK: keys that never fill take every place they can.
fill_with_never() { fill never 1 200 "$1"; }
# A redefined policy: a bucket full under the old definition but not under
# the new one (1 token a second, then an hour) keeps its place until a
# call judges it again, as the table keeps its row: keys that never fill
# take every other place, and the bucket still denies what the table would.
q -c "CALL rate_limit_reset_limit('quick')" -c "SET ratelimit.fixed_clock = 2000002000" \
  -c "SELECT rate_limit_define('slowed', 1, '1 second', 10, storage => 'memory')" \
  -c "SELECT rate_limit_take('slowed', 'victim', 10)" \
  -c "SELECT rate_limit_define('slowed', 1, '1 hour', 10, storage => 'memory')" >/dev/null
fill_with_never 2000002020
rl_expect_value "keys that never fill take every place but the redefined bucket's" 31 \
    "$places 'never'"
rl_expect_value "which still denies, as the table would" f \
    "SET ratelimit.fixed_clock = 2000002020; SELECT allowed FROM rate_limit_take('slowed', 'victim', 5)"
q -c "CALL rate_limit_reset_limit('never')" -c "CALL rate_limit_reset_limit('slowed')" >/dev/null
# Kept from the moment the new definition is written: a call under the old
# one, before it commits, does not judge the bucket again.
q -c "SET ratelimit.fixed_clock = 2000003000" \
  -c "SELECT rate_limit_define('slowed', 1, '1 second', 10, storage => 'memory')" \
  -c "SELECT rate_limit_take('slowed', 'victim', 10)" >/dev/null
q -c "BEGIN" -c "SELECT rate_limit_define('slowed', 1, '1 hour', 10, storage => 'memory')" \
  -c "SELECT pg_sleep(3)" -c "COMMIT" >/dev/null &
definer=$!
for _ in $(seq 1 100); do
    [ "$(q -c "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(3)'")" = 1 ] && break
    sleep 0.05
done
rl_expect_value "a take under the old definition while the new one is not committed" t \
    "SET ratelimit.fixed_clock = 2000003020; SELECT allowed FROM rate_limit_take('slowed', 'victim', 1)"
wait "$definer"
fill_with_never 2000003040
rl_expect_value "the bucket keeps its place all the same" 31 \
    "$places 'never'"
q -c "CALL rate_limit_reset_limit('never')" -c "CALL rate_limit_reset_limit('slowed')" >/dev/null
# A redefinition rolled back, whole or to a savepoint, marks nothing:
# buckets full under the definition that stays give their places up.
q -c "SELECT rate_limit_define('slowed', 1, '1 second', 10, storage => 'memory')" >/dev/null
fill slowed 10 40 2000004000
q -c "BEGIN" -c "SAVEPOINT s" -c "SELECT rate_limit_define('slowed', 1, '1 hour', 10, storage => 'memory')" \
  -c "ROLLBACK TO SAVEPOINT s" -c "COMMIT" \
  -c "BEGIN" -c "SELECT rate_limit_define('slowed', 1, '1 hour', 10, storage => 'memory')" -c "ROLLBACK" \
  >/dev/null
fill_with_never 2000004020
rl_expect_value "after redefinitions rolled back, keys that never fill take every place" 32 \
    "$places 'never'"
q -c "CALL rate_limit_reset_limit('never')" -c "CALL rate_limit_reset_limit('slowed')" >/dev/null
# A call under a redefinition that its transaction then rolls back (whole,
# or to a savepoint) judged its bucket by a limit that never committed:
# the bucket keeps its place until a call under the committed one judges
# it.  (Burst 100 and no refill, 10 tokens left: full under a burst of 5.)
q -c "SELECT rate_limit_define('shrunk', 0, '1 second', 100, storage => 'memory')" \
  -c "SELECT rate_limit_take('shrunk', k, 90) FROM unnest(ARRAY['rolled', 'restored']) AS k" \
  -c "BEGIN" -c "SELECT rate_limit_define('shrunk', 0, '1 second', 5, storage => 'memory')" \
  -c "SELECT rate_limit_take('shrunk', 'rolled', 1)" -c "ROLLBACK" \
  -c "BEGIN" -c "SAVEPOINT s" -c "SELECT rate_limit_define('shrunk', 0, '1 second', 5, storage => 'memory')" \
  -c "SELECT rate_limit_take('shrunk', 'restored', 1)" -c "ROLLBACK TO SAVEPOINT s" -c "COMMIT" \
  >/dev/null
fill_with_never 2000005000
rl_expect_value "buckets judged under a redefinition rolled back keep their places" 30 \
    "$places 'never'"
q -c "CALL rate_limit_reset_limit('never')" >/dev/null
rl_expect_value "and hold what the committed definition left, as the table would" "false false" \
    "SELECT string_agg(allowed::text, ' ' ORDER BY k)
     FROM unnest(ARRAY['restored', 'rolled']) AS k, rate_limit_take('shrunk', k, 11)"
q -c "CALL rate_limit_reset_limit('shrunk')" >/dev/null
# Buckets stored while a redefinition is written but not yet committed,
# under the definition still committed, keep their places too: one stored
# new ('late'), and one that the writer judged under its new definition
# and another caller then judged again under the old one ('judged').
# (1 token a second, then 1 an hour: full 40 seconds later under the
# first, not under the second.)
q -c "SET ratelimit.fixed_clock = 2000006000" \
  -c "SELECT rate_limit_define('slowed', 1, '1 second', 10, storage => 'memory')" \
  -c "SELECT rate_limit_take('slowed', 'judged', 5)" >/dev/null
HELD_DB=postgres HELD_END=COMMIT held \
    "SELECT rate_limit_define('slowed', 1, '1 hour', 10, storage => 'memory')" \
    "SET ratelimit.fixed_clock = 2000006000" "SELECT rate_limit_take('slowed', 'judged', 1)"
rl_expect_value "calls under the definition still committed" "true true" \
    "SET ratelimit.fixed_clock = 2000006001;
     SELECT string_agg(allowed::text, ' ' ORDER BY k) FROM (VALUES ('judged', 1), ('late', 10)) AS c(k, cost),
            rate_limit_take('slowed', k, cost)"
touch "$RL_CLUSTER_DIR/release"; wait
fill_with_never 2000006040
rl_expect_value "buckets stored while the redefinition was not committed keep their places" 30 \
    "$places 'never'"
q -c "CALL rate_limit_reset_limit('never')" >/dev/null
rl_expect_value "and deny as the table would" "false false" \
    "SET ratelimit.fixed_clock = 2000006040;
     SELECT string_agg(allowed::text, ' ' ORDER BY k) FROM unnest(ARRAY['judged', 'late']) AS k,
            rate_limit_take('slowed', k, 5)"
q -c "CALL rate_limit_reset_limit('slowed')" >/dev/null
# If that redefinition rolls back, so do those marks: a bucket full under
# the definition that stays gives its place up.
q -c "SELECT rate_limit_define('slowed', 1, '1 second', 10, storage => 'memory')" >/dev/null
HELD_DB=postgres held "SELECT rate_limit_define('slowed', 1, '1 hour', 10, storage => 'memory')"
q -c "SET ratelimit.fixed_clock = 2000007000" -c "SELECT rate_limit_take('slowed', 'late', 10)" >/dev/null
touch "$RL_CLUSTER_DIR/release"; wait
fill_with_never 2000007040
rl_expect_value "after the redefinition rolls back, keys that never fill take every place" 32 \
    "$places 'never'"
q -c "CALL rate_limit_reset_limit('never')" -c "CALL rate_limit_reset_limit('slowed')" >/dev/null
# Once committed, a redefinition keeps no bucket stored afterwards: one
# that the writer's own session stores under the new definition gives its
# place up when full.
q -c "SET ratelimit.fixed_clock = 2000007100" \
  -c "BEGIN" -c "SELECT rate_limit_define('slowed', 1, '1 hour', 10, storage => 'memory')" -c "COMMIT" \
  -c "BEGIN" -c "SELECT rate_limit_define('slowed', 1, '1 second', 10, storage => 'memory')" -c "COMMIT" \
  -c "SELECT rate_limit_take('slowed', 'after', 10)" >/dev/null
fill_with_never 2000007140
rl_expect_value "after the redefinition commits, keys that never fill take every place" 32 \
    "$places 'never'"
q -c "CALL rate_limit_reset_limit('never')" -c "CALL rate_limit_reset_limit('slowed')" >/dev/null
# While one transaction writes more policies than the engine follows by
# name (64), every bucket stored meanwhile keeps its place.
HELD_DB=postgres HELD_END=COMMIT held \
    "SELECT count(rate_limit_define('spare' || i, 1, '1 second', 10, storage => 'memory'))
     FROM generate_series(1, 64) AS i" \
    "SELECT rate_limit_define('slowed', 1, '1 hour', 10, storage => 'memory')"
q -c "SET ratelimit.fixed_clock = 2000008000" -c "SELECT rate_limit_take('slowed', 'late', 10)" >/dev/null
touch "$RL_CLUSTER_DIR/release"; wait
fill_with_never 2000008040
rl_expect_value "a bucket stored while 65 policies were being written keeps its place" 31 \
    "$places 'never'"
q -c "CALL rate_limit_reset_limit('never')" >/dev/null
rl_expect_value "and denies as the table would" f \
    "SET ratelimit.fixed_clock = 2000008040; SELECT allowed FROM rate_limit_take('slowed', 'late', 5)"
q -c "CALL rate_limit_reset_limit('slowed')" -c "DELETE FROM ratelimit.policies WHERE name LIKE 'spare%'" >/dev/null
# A transaction that wrote a memory policy is not prepared: the engine
# follows it until it ends, in this session, and a prepared transaction
# ends in another.
rl_expect_sqlstate "PREPARE TRANSACTION after defining a memory policy" 0A000 \
    "BEGIN" -c "SELECT rate_limit_define('prepared', 1, '1 hour', 10, storage => 'memory')" \
    -c "PREPARE TRANSACTION 'rl_memory_define'"
rl_expect_value "is refused, and the definition rolled back" "0 0" \
    "SELECT (SELECT count(*) FROM pg_prepared_xacts) || ' ' ||
            (SELECT count(*) FROM ratelimit.policies WHERE name = 'prepared')"
[ "$(q -c "SELECT count(*) FROM pg_prepared_xacts WHERE gid = 'rl_memory_define'")" = 0 ] ||
    q -c "ROLLBACK PREPARED 'rl_memory_define'"
# Kept across a clean restart: a bucket full under the old definition
# (1 token a second, since 2001) but not under the new one (1 every ten
# years) is saved, keeps its place, and a purge judges it under the new one.
q -c "SET ratelimit.fixed_clock = 1000000000" \
  -c "SELECT rate_limit_define('slowed', 1, '1 second', 10, storage => 'memory')" \
  -c "SELECT rate_limit_take('slowed', 'victim', 10)" \
  -c "SELECT rate_limit_define('slowed', 1, '10 years', 10, storage => 'memory')" >/dev/null
restart fast
rl_expect_value "a kept bucket is saved at a clean shutdown" victim \
    "SELECT string_agg(key, ',') FROM rate_limit_buckets('slowed')"
fill_with_never 1000000020
rl_expect_value "and keeps its place after the restart" 31 \
    "$places 'never'"
q -c "CALL rate_limit_reset_limit('never')" >/dev/null
q -c "SET ratelimit.fixed_clock = 1000000020" -c "CALL rate_limit_purge('slowed')" >/dev/null
rl_expect_value "a purge keeps it while it is short of full under the new definition" 1 \
    "SELECT count(*) FROM rate_limit_buckets('slowed')"
q -c "SET ratelimit.fixed_clock = 4200000000" -c "CALL rate_limit_purge('slowed')" >/dev/null
rl_expect_value "and forgets it once it is full" 0 \
    "SELECT count(*) FROM rate_limit_buckets('slowed')"
q -c "CALL rate_limit_reset_limit('slowed')" >/dev/null

# The limits buckets are judged by are kept once each, in entries (1,024
# here, for 1,024 places) of which new keys may take half: 520 policies of
# distinct limits each take from a new key, every take is granted, and the
# keys whose limit finds no entry are kept in the table.  The other half is
# kept for the buckets held: redefined, those in memory are each answered
# there, under the new limit, with no error.
restart fast "ratelimit.memory_buckets = 1024"
q -c "DO \$\$ BEGIN
          FOR i IN 1..520 LOOP
              PERFORM rate_limit_define('lim-' || i, i, '1 hour', 1000, storage => 'memory');
          END LOOP;
      END \$\$" >/dev/null
rl_expect_value "520 new keys of 520 limits, each granted" 520 \
    "SET ratelimit.fixed_clock = 2100000000;
     SELECT count(*) FILTER (WHERE allowed) FROM generate_series(1, 520) AS i,
            rate_limit_take('lim-' || i, 'k', 1)"
lim_memory="SELECT count(*) FROM rate_limit_memory_stats
            WHERE datname = current_database() AND name LIKE 'lim-%' AND buckets = 1"
lim_table="SELECT count(*) FROM ratelimit.buckets WHERE name LIKE 'lim-%'"
in_memory=$(q -c "$lim_memory")
rl_check "$in_memory >= 500 && $in_memory <= 512" \
    "$in_memory keys of 520 limits in memory (500 to 512 expected: 512 entries for new keys)"
rl_expect_value "the others are kept in the table" "$((520 - in_memory))" "$lim_table"
q -c "DO \$\$ BEGIN
          FOR i IN 1..520 LOOP
              PERFORM rate_limit_define('lim-' || i, i + 1000, '1 hour', 1000, storage => 'memory');
          END LOOP;
      END \$\$" >/dev/null
rl_expect_value "redefined, every key is taken from again, with no error" "520 998 998" \
    "SET ratelimit.fixed_clock = 2100000000;
     SELECT count(*) FILTER (WHERE allowed) || ' ' || min(floor(remaining)) || ' ' || max(floor(remaining))
       FROM generate_series(1, 520) AS i, rate_limit_take('lim-' || i, 'k', 1)"
rl_expect_value "those in memory stay there, judged by their new limits" "$in_memory $((520 - in_memory))" \
    "SELECT ($lim_memory) || ' ' || ($lim_table)"
# Held by an open transaction, a bucket judged by a new limit keeps the one
# before too, until the transaction ends: two entries a bucket, which the
# half kept for the buckets held holds.
held=$(q -c "SET ratelimit.fixed_clock = 2100000000" -c "BEGIN" \
         -c "SELECT count(*) FILTER (WHERE allowed) FROM generate_series(1, 520) AS i,
                    rate_limit_take('lim-' || i, 'k', 1)" \
         -c "DO \$\$ BEGIN
                 FOR i IN 1..520 LOOP
                     PERFORM rate_limit_define('lim-' || i, i + 2000, '1 hour', 1000, storage => 'memory');
                 END LOOP;
             END \$\$" \
         -c "SELECT count(*) FILTER (WHERE allowed) || ' ' || min(floor(remaining)) || ' ' || max(floor(remaining))
               FROM generate_series(1, 520) AS i, rate_limit_take('lim-' || i, 'k', 1)" \
         -c "COMMIT" 2>&1 | tr '\n' ' ')
if [ "$held" = "520 520 996 996 " ]; then
    printf 'ok: held and redefined in one transaction, every key is taken from twice, with no error (%s)\n' "$held"
else
    printf 'FAILED: held and redefined in one transaction: got %s, expected 520 520 996 996\n' "$held"
    RL_FAILURES=$((RL_FAILURES + 1))
fi
rl_expect_value "and those in memory stay there" "$in_memory $((520 - in_memory))" \
    "SELECT ($lim_memory) || ' ' || ($lim_table)"
q -c "DO \$\$ DECLARE reset bigint; BEGIN
          FOR i IN 1..520 LOOP
              CALL rate_limit_reset_limit('lim-' || i, reset);
          END LOOP;
      END \$\$" -c "DELETE FROM ratelimit.policies WHERE name LIKE 'lim-%'" >/dev/null
restart fast "ratelimit.memory_buckets = 32"

# On a hot standby the engine works, on the standby's own buckets: a take
# there is not seen on the primary, nor the primary's there.
q -c "CALL rate_limit_reset_limit('quick')" -c "SELECT rate_limit_take('life', 'shared', 4)" >/dev/null
standby=$RL_CLUSTER_DIR/standby
standby_port=$(rl_pick_port)
rl_as_owner pg_basebackup -D "$standby" -R -X stream -h "$PGHOST" -p "$PGPORT" -U postgres
printf "\nport = %s\nhot_standby = on\n" "$standby_port" |
    rl_as_owner tee -a "$standby/postgresql.conf" >/dev/null
rl_at_exit "rl_as_owner '$RL_PG_BINDIR/pg_ctl' -D '$standby' -m immediate -w -t 30 stop >/dev/null 2>&1"
rl_as_owner "$RL_PG_BINDIR/pg_ctl" -D "$standby" -l "$RL_CLUSTER_DIR/standby.log" -w -t 60 start >/dev/null
rl_expect_value "a take on the standby" "true 7" \
    "SELECT allowed || ' ' || floor(remaining) FROM rate_limit_take('life', 'shared', 3)" -p "$standby_port"
rl_expect_value "the standby's own balance" 7 \
    "SELECT floor(remaining) FROM rate_limit_check('life', 'shared', 0)" -p "$standby_port"
rl_expect_value "the primary's balance is its own" 6 \
    "SELECT floor(remaining) FROM rate_limit_check('life', 'shared', 0)"
rl_expect_value "the standby lists its own buckets" "shared 7" \
    "SELECT key || ' ' || floor(balance) FROM rate_limit_buckets('life')" -p "$standby_port"
rl_expect_sqlstate "a table policy on the standby still refuses" 25006 \
    "SELECT * FROM rate_limit_take('life-table', 'a', 1)" -p "$standby_port"
rl_as_owner "$RL_PG_BINDIR/pg_ctl" -D "$standby" -m fast -w -t 30 stop >/dev/null

# Without preloading (and so without the setting, which only a preloaded
# library defines).
rl_as_owner sed -i '/^ratelimit\.memory_buckets/d' "$RL_CLUSTER_DATA/postgresql.conf"
restart fast "shared_preload_libraries = ''"
if [ "$(q -c "SHOW server_version_num")" -lt 170000 ]; then
    rl_expect_sqlstate "without preloading, before 17" 55000 \
        "SELECT * FROM rate_limit_take('life', 'a', 1)"
    rl_expect_value "the error names the setting" 1 "SELECT $(
        psql -X -A -t -c "SELECT * FROM rate_limit_take('life', 'a', 1)" 2>&1 |
        grep -c 'need ratelimit in "shared_preload_libraries"' || true)"
    rl_expect_sqlstate "rate_limit_define refuses a memory policy there" 55000 \
        "SELECT rate_limit_define('life', 1, '1 minute', 10, storage => 'memory')"
    rl_expect_value "and leaves the policy as it was" "01:00:00" \
        "SELECT per FROM ratelimit.policies WHERE name = 'life'"
else
    rl_expect_value "without preloading, from 17: a dynamic shared memory segment" "true 9" \
        "SELECT allowed || ' ' || floor(remaining) FROM rate_limit_take('life', 'a', 1)"
fi

# A dump of memory policies restores all the same: pg_restore writes the
# rows, which the memory engine does not refuse.  A lease is state, as a
# bucket is: its policy is dumped, the lease is not.
q -c "SELECT name FROM rate_limit_define_concurrency('leased', 2, lease => '1 hour')" \
  -c "SELECT allowed FROM rate_limit_lease('leased', 'k')" >/dev/null
pg_dump -Fc -f "$RL_CLUSTER_DIR/policies.dump" postgres
q -c "CREATE DATABASE restored"
rl_expect "pg_restore of a database with memory policies" \
    pg_restore --exit-on-error -d restored "$RL_CLUSTER_DIR/policies.dump"
policies="SELECT string_agg(name || ' ' || per || ' ' || storage, ', ' ORDER BY name) FROM ratelimit.policies"
rl_expect_value "the restored policies" "$(q -c "$policies")" "$policies" -d restored
rl_expect_value "the restored database has the lease policy, not its lease" "0|t|1" \
    "SELECT (SELECT count(*) FROM ratelimit.leases), allowed, remaining FROM rate_limit_lease('leased', 'k')" -d restored
q -c "SELECT rate_limit_drop('leased')" -c "DELETE FROM ratelimit.leases WHERE name = 'leased'" >/dev/null

# The contract, every policy in the memory engine (make installcheck-memory),
# on a server that preloads the library again, with room for 10,000
# buckets (the default): the run stores more than the 1,024 above.
restart fast "shared_preload_libraries = 'ratelimit'"
regress "the contract against the memory engine" "$RL_BUILD_DIR/output_memory" \
    make -C "$RL_BUILD_DIR" installcheck-memory
q -c "DROP DATABASE IF EXISTS regression"

rl_verdict memory

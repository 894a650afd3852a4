# shellcheck shell=bash
# bench/lib.sh: what bench/run and bench/portable share.  Sourced after
# scripts/lib.sh; its functions run once the cluster is started, with $work
# the run's scratch directory, $CLIENTS and $THREADS pgbench's defaults.

sql() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }

# script NAME TEXT: the pgbench script $work/NAME.sql (TEXT through printf %b).
script() { printf '%b\n' "$2" >"$work/$1.sql"; }

declare -A TPS FAILED ROUND_TPS
# best LABEL TPS ROUND: keeps the round's figure, and the best of the rounds.
best() {
    ROUND_TPS[$1:$3]=$2
    if [ -z "${TPS[$1]:-}" ] || awk -v a="$2" -v b="${TPS[$1]}" 'BEGIN { exit !(a > b) }'; then
        TPS[$1]=$2
    fi
}

# pgbench_run SCRIPT ISOLATION [pgbench options...]: prints "tps failed";
# $SETTINGS holds more server settings for the sessions, $RUN_CLIENTS the
# clients (default $CLIENTS).
pgbench_run() {
    local file=$1 iso=$2 out
    shift 2
    out=$(PGOPTIONS="-c default_transaction_isolation=${iso// /\\ } ${SETTINGS:-}" \
        pgbench -n -M prepared -c "${RUN_CLIENTS:-$CLIENTS}" -j "$THREADS" "$@" -f "$work/$file.sql" 2>&1) ||
        { printf '%s\n' "$out" >&2; rl_die "pgbench failed on $file"; }
    awk '/^tps = / { tps = $3 } /^number of failed transactions: / { failed = $5 }
         END { printf "%s %s\n", tps, (failed == "" ? 0 : failed) }' <<<"$out"
}

# run_scenario ROUND ENTRY: one pgbench run of a scenario
# (label|script|isolation|what it is|database|settings|clients), kept by best.
run_scenario() {
    local label file iso db settings clients tps failed
    IFS='|' read -r label file iso _ db settings clients <<<"$2"
    read -r tps failed < <(PGDATABASE=${db:-postgres} SETTINGS=$settings RUN_CLIENTS=$clients \
        pgbench_run "$file" "$iso" -T "$RUN_SECONDS")
    rl_log "round $1: $label $tps tps, $failed failed"
    best "$label" "$tps" "$1"
    FAILED[$label]=$(( ${FAILED[$label]:-0} + failed ))
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "-" }'; }

# target NAME MEASURED TARGET: one line, met or not.
target() {
    local verdict
    verdict=$(awk -v m="$2" -v t="$3" 'BEGIN { print (m >= t ? "met" : "NOT met") }')
    printf '  %-52s %6s  (target >= %s)  %s\n' "$1" "$2" "$3" "$verdict"
}

# The policies taken by name, one hot key and $UNIFORM_KEYS keys taken
# once, in the current database (the extension or the portable limiter
# there).
bench_policies() {
    sql <<SQL
SELECT rate_limit_define('hot-policy', 1e9, '1 second', 1e9);
SELECT rate_limit_define('table-uniform', 1000, '1 second', 1e9);
SELECT count(*) FROM generate_series(1, $UNIFORM_KEYS) AS g,
    LATERAL rate_limit_take('table-uniform', 'user:' || g, 1e-9) AS r;
SQL
}

# The PL/pgSQL bucket with $UNIFORM_KEYS keys, and bench_policies, in the
# current database (the extension created there).
bench_native_keys() {
    sql -f "$RL_ROOT/bench/plpgsql_bucket.sql"
    sql -c "SELECT count(*) FROM generate_series(1, $UNIFORM_KEYS) AS g,
                LATERAL plpgsql_take('bench', 'user:' || g, 1e-9, 1000, 1e9) AS r"
    bench_policies
}

# Database bench_portable: the portable limiter with the same keys and
# policies, explicit and by policy, and the floors of a take by policy
# (bench/portable_floor.sql).
bench_portable_database() {
    sql -c "CREATE DATABASE bench_portable"
    PGDATABASE=bench_portable sql -c "REVOKE CREATE ON SCHEMA public FROM PUBLIC" -f "$RL_ROOT/portable/ratelimit.sql" \
        -f "$RL_ROOT/bench/portable_floor.sql"
    PGDATABASE=bench_portable sql -c "SELECT count(*) FROM generate_series(1, $UNIFORM_KEYS) AS g,
                                          LATERAL rate_limit_take('bench', 'user:' || g, 1e-9, 1000, 1e9) AS r"
    PGDATABASE=bench_portable bench_policies
    PGDATABASE=bench_portable sql -c "VACUUM ANALYZE"
}

# The pgbench scripts of the PL/pgSQL bucket, of takes by policy and of
# their floors.
bench_policy_scripts() {
    local floor
    script xid 'SELECT txid_current();'
    script pl_uniform "\\\\set k random(1, $UNIFORM_KEYS)\nSELECT plpgsql_take('bench', 'user:' || :k, 1, 1000, 1e9);"
    script pl_hot "SELECT plpgsql_take('bench', 'hot', 1, 1e9, 1e9);"
    script take_hot_policy "SELECT allowed FROM rate_limit_take('hot-policy', 'k');"
    script table_uniform "\\\\set k random(1, $UNIFORM_KEYS)\nSELECT allowed FROM rate_limit_take('table-uniform', 'user:' || :k);"
    for floor in two_statements one_statement; do
        script "floor_$floor" "\\\\set k random(1, $UNIFORM_KEYS)\nSELECT allowed FROM floor_$floor('table-uniform', 'user:' || :k);"
    done
}

# The floors of a take by policy, at 8 clients in database bench_portable
# (scenario lines, as in SCENARIOS).
FLOOR_SCENARIOS=(
    "floor_two|floor_two_statements|read committed|floor: read, UPDATE, no decision, 100k keys|bench_portable"
    "floor_one|floor_one_statement|read committed|floor: one UPDATE with the policy, 100k keys|bench_portable"
)

# PL/pgSQL and SQL functions a portable take by policy calls (not inlined),
# counted with track_functions = all in one session of CALL_TAKES takes,
# uniform and hot: CALLS[table_uniform], CALLS[take_hot_policy].
CALL_TAKES=2000
declare -A CALLS
count_portable_calls() {
    local file
    for file in table_uniform take_hot_policy; do
        PGDATABASE=bench_portable sql -c "SELECT pg_stat_reset()" >/dev/null
        PGDATABASE=bench_portable PGOPTIONS="-c track_functions=all" \
            pgbench -n -M prepared -c 1 -t "$CALL_TAKES" -f "$work/$file.sql" >/dev/null 2>&1 ||
            rl_die "pgbench failed counting the calls of $file"
        sleep 1 # (before PostgreSQL 15, statistics reach the collector a moment later)
        CALLS[$file]=$(PGDATABASE=bench_portable psql -X -A -t -c "SELECT round(coalesce(sum(calls), 0)::numeric / $CALL_TAKES, 2)
            FROM pg_stat_user_functions WHERE schemaname = 'public'")
    done
}

# The portable take by policy against the PL/pgSQL bucket and the table
# engine, at 8 and 32 clients, and its floors.  Scenario labels:
# policy_uniform_portable[_32], policy_hot_portable[_32], pl_uniform_rc,
# pl_hot_rc, pl_uniform_32, pl_hot_32, table_uniform_rc, hot_policy_rc,
# table_uniform_32, hot_policy_32, and FLOOR_SCENARIOS's.
report_portable() {
    printf '\nportable take by policy (PL/pgSQL and SQL calls a take: uniform %s, hot key %s):\n' \
        "${CALLS[table_uniform]}" "${CALLS[take_hot_policy]}"
    printf '  %-44s %10s %10s\n' "" "8 clients" "32 clients"
    printf '  %-44s %10s %10s\n' "100k keys uniform / PL/pgSQL bucket" \
        "$(ratio "${TPS[policy_uniform_portable]}" "${TPS[pl_uniform_rc]}")" "$(ratio "${TPS[policy_uniform_portable_32]}" "${TPS[pl_uniform_32]}")"
    printf '  %-44s %10s %10s\n' "one hot key / PL/pgSQL bucket" \
        "$(ratio "${TPS[policy_hot_portable]}" "${TPS[pl_hot_rc]}")" "$(ratio "${TPS[policy_hot_portable_32]}" "${TPS[pl_hot_32]}")"
    printf '  %-44s %10s %10s\n' "100k keys uniform / table engine by policy" \
        "$(ratio "${TPS[policy_uniform_portable]}" "${TPS[table_uniform_rc]}")" "$(ratio "${TPS[policy_uniform_portable_32]}" "${TPS[table_uniform_32]}")"
    printf '  %-44s %10s %10s\n' "one hot key / table engine by policy" \
        "$(ratio "${TPS[policy_hot_portable]}" "${TPS[hot_policy_rc]}")" "$(ratio "${TPS[policy_hot_portable_32]}" "${TPS[hot_policy_32]}")"
    printf '  %-44s %10s\n' "floor: read and UPDATE / PL/pgSQL bucket" "$(ratio "${TPS[floor_two]}" "${TPS[pl_uniform_rc]}")"
    printf '  %-44s %10s\n' "floor: one UPDATE / PL/pgSQL bucket" "$(ratio "${TPS[floor_one]}" "${TPS[pl_uniform_rc]}")"
    printf '  %-44s %10s\n' "100k keys uniform / floor: read and UPDATE" \
        "$(ratio "${TPS[policy_uniform_portable]}" "${TPS[floor_two]}")"
}

portable_targets() {
    local n sfx clients pl_u pl_h table_u
    for n in rc 32; do
        sfx=; clients=8; pl_u=pl_uniform_rc; pl_h=pl_hot_rc; table_u=table_uniform_rc
        [ "$n" = rc ] || { sfx=_32; clients=32; pl_u=pl_uniform_32; pl_h=pl_hot_32; table_u=table_uniform_32; }
        target "portable by policy uniform / PL/pgSQL bucket, $clients clients" \
            "$(ratio "${TPS[policy_uniform_portable$sfx]}" "${TPS[$pl_u]}")" 0.8
        target "portable by policy hot key / PL/pgSQL bucket, $clients clients" \
            "$(ratio "${TPS[policy_hot_portable$sfx]}" "${TPS[$pl_h]}")" 0.8
        target "portable by policy uniform / table engine's, $clients clients" \
            "$(ratio "${TPS[policy_uniform_portable$sfx]}" "${TPS[$table_u]}")" 0.6
    done
}

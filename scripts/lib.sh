# shellcheck shell=bash
# Shared helpers for scripts/test, scripts/demo and test/cluster/*.sh.
# Source it (". scripts/lib.sh"); it does nothing on its own.
#
#   ensure_packages     install the Debian packages the project needs (root), or
#                       print the command that would (not root) and exit 1
#   rl_install_packages PKG...   the same for the packages named
#   rl_apt_get ARGS...  apt-get, waiting (bounded) while another apt or dpkg
#                       holds its locks
#   build_and_install   make, then make install into a private copy of the
#                       PostgreSQL install tree (see rl_private_tree)
#   rl_require_install  build_and_install unless the calling script already
#                       did (test/cluster/*.sh: run alone or from scripts/test)
#   copy_checkout DIR   the checkout's files in DIR, to build there afresh
#   cluster_start       a throwaway PostgreSQL 15 cluster in a fresh temporary
#                       directory, on a unix socket only; exports PGHOST, PGPORT,
#                       PGUSER and PGDATABASE for clients (RL_SHARED_BUFFERS
#                       overrides its shared_buffers, 256MB by default;
#                       RL_CLUSTER_CONF holds more postgresql.conf lines)
#   cluster_stop        stop it and remove its directory
#   cluster_log         path of the running cluster's server log
#   rl_at_exit CMD      run CMD when the script exits
#   rl_as_owner CMD...  run a server program as the cluster's owner ("postgres"
#                       when root), from $RL_CLUSTER_DIR
#   rl_pick_port        a port number no local server seems to use
#   rl_log, rl_warn, rl_die MESSAGE
#   rl_check COND MSG   count a failed check (an awk condition) of a cluster test
#   rl_expect MSG CMD...  count a failed check (a command) of a cluster test
#   rl_verdict NAME     print NAME: PASS or NAME: FAIL (and exit 1)
#   rl_check_overload NAME RATE GRANTS   the lower admission bound under overload
#
# While a cluster runs, $RL_CLUSTER_DIR is its directory (socket, server.log,
# data/); everything in it is removed by cluster_stop.
#
# lib.sh owns the EXIT, INT, TERM, HUP and PIPE traps: whatever way the script
# ends, a cluster it started is stopped and its directory removed.  Scripts that
# need more cleanup register it with rl_at_exit instead of setting a trap; the
# hooks run last registered first.

RL_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Where make runs: the checkout, or a copy of it (scripts/test --version).
RL_BUILD_DIR=${RL_BUILD_DIR:-$RL_ROOT}
# The PostgreSQL under test: Debian's 15 (the system's, read only: copied,
# never installed into), or one that scripts/build-postgres made
# (rl_use_postgres; also copied, never installed into).
RL_SYSTEM_PG_MAJOR=15
RL_SYSTEM_PG_BINDIR=/usr/lib/postgresql/$RL_SYSTEM_PG_MAJOR/bin
RL_PG_PREFIX=
# The major version under test, for messages ("18-cassert" for a build with
# assertions).
RL_PG_MAJOR=$RL_SYSTEM_PG_MAJOR

# RL_PG_ROOT is the private copy of the PostgreSQL install tree that the
# extension is installed into and every server is started from, RL_PG_BINDIR
# its programs.  A script run by scripts/test inherits both; otherwise
# build_and_install makes the copy.
if [ -n "${RL_PG_ROOT:-}" ] && [ -n "${RL_PG_BINDIR:-}" ]; then
    export PG_CONFIG=$RL_PG_BINDIR/pg_config
else
    RL_PG_ROOT=
    RL_PG_BINDIR=$RL_SYSTEM_PG_BINDIR
    export PG_CONFIG=$RL_SYSTEM_PG_BINDIR/pg_config
fi
# initdb, pg_ctl, postgres, psql and pgbench of that tree come first.
export PATH="$RL_PG_BINDIR:$PATH"

# rl_use_postgres PREFIX: test the PostgreSQL installed in PREFIX (made by
# scripts/build-postgres) instead of the system's; call before
# build_and_install or rl_private_tree.
rl_use_postgres() {
    RL_PG_PREFIX=$1
    RL_PG_MAJOR=$(basename "$1")
    # Shared while this script runs: scripts/build-postgres replaces a tree
    # (and the libraries its programs load) only under this lock, held
    # exclusively.
    exec {RL_PG_LOCK_FD}<>"$1.lock"
    flock -s "$RL_PG_LOCK_FD"
    RL_PG_ROOT=
    RL_PG_BINDIR=$RL_PG_PREFIX/bin
    export PG_CONFIG=$RL_PG_BINDIR/pg_config
    export PATH="$RL_PG_BINDIR:$PATH"
}

# Predictable messages and collation for the tools and the tests.
export LC_ALL=C.UTF-8
unset LANGUAGE

RL_PACKAGES=(
    postgresql-15              # server: postgres, initdb, pg_ctl, pgbench
    postgresql-client-15       # psql, pg_regress, pg_isolation_regress
    postgresql-server-dev-15   # server headers and PGXS
    libpq-dev                  # libpq for the load generator; /usr/bin/pg_config
    g++
    make
    libgtest-dev               # GoogleTest for the unit tests
    postgresql-15-cron         # pg_cron, which schedules rate_limit_purge in a cluster test
    postgresql-15-plproxy      # PL/Proxy, the router of limits over several servers (test/cluster/router.sh)
    util-linux                 # runuser
    passwd                     # useradd
)

rl_log() { printf '==> %s\n' "$*"; }
rl_warn() { printf 'warning: %s\n' "$*" >&2; }
rl_die() { printf 'error: %s\n' "$*" >&2; exit 1; }
rl_is_root() { [ "$(id -u)" -eq 0 ]; }

# ---------------------------------------------------------------------------
# Exit handling

RL_EXIT_HOOKS=()
RL_POLICY_RC_CREATED=
RL_CLUSTER_DIR=
RL_CLUSTER_DATA=

rl_at_exit() { RL_EXIT_HOOKS+=("$1"); }

rl__on_exit() {
    local rc=$? hook
    trap - EXIT INT TERM HUP
    # A closed stdout (scripts/demo | head) must not kill the cleanup.
    trap '' PIPE
    set +e
    # Last registered, first run: a standby registered after its primary
    # stops first, then the cluster (cluster_start registers cluster_stop),
    # then the private PostgreSQL tree whose pg_ctl stopped them goes.
    local i
    for ((i = ${#RL_EXIT_HOOKS[@]} - 1; i >= 0; i--)); do
        eval "${RL_EXIT_HOOKS[i]}"
    done
    cluster_stop
    if [ -n "$RL_POLICY_RC_CREATED" ]; then
        rm -f /usr/sbin/policy-rc.d
        RL_POLICY_RC_CREATED=
    fi
    exit "$rc"
}

trap rl__on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
trap 'exit 141' PIPE

# ---------------------------------------------------------------------------
# Verdicts of the cluster tests

RL_FAILURES=0

# rl_check CONDITION MESSAGE: counts a failure (and prints MESSAGE) unless
# the awk expression CONDITION holds.
rl_check() {
    if ! awk "BEGIN { exit !($1) }"; then
        printf 'FAILED: %s\n' "$2"
        RL_FAILURES=$((RL_FAILURES + 1))
    fi
}

# rl_expect MESSAGE COMMAND...: counts a failure (and prints MESSAGE)
# unless COMMAND succeeds; COMMAND reads rl_expect's standard input.
rl_expect() {
    local message=$1
    shift
    if ! "$@"; then
        printf 'FAILED: %s\n' "$message"
        RL_FAILURES=$((RL_FAILURES + 1))
    fi
}

# rl_expect_value MESSAGE EXPECTED SQL [psql options]: counts a failure
# (and prints what came instead) unless SQL prints EXPECTED, unaligned and
# without headers; prints "ok: MESSAGE" otherwise.
rl_expect_value() {
    local message=$1 expected=$2 sql=$3
    shift 3
    rl__expect_got "$message" "$expected" \
        "$(psql -X -A -t -q -v ON_ERROR_STOP=1 "$@" -c "$sql" 2>&1 || true)"
}

# rl_expect_sqlstate MESSAGE SQLSTATE SQL [psql options]: as
# rl_expect_value, for SQL (then any -f given) failing with SQLSTATE.
rl_expect_sqlstate() {
    local message=$1 expected=$2 sql=$3
    shift 3
    rl__expect_got "$message" "$expected" \
        "$(psql -X -A -t -q -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -c "$sql" "$@" 2>&1 |
           sed -n 's/^.*ERROR:  \([0-9A-Z]\{5\}\): .*$/\1/p' || true)"
}

rl__expect_got() {  # MESSAGE EXPECTED GOT
    if [ "$3" = "$2" ]; then
        printf 'ok: %s (%s)\n' "$1" "$3"
    else
        printf 'FAILED: %s: got %s, expected %s\n' "$1" "${3:-nothing}" "$2"
        RL_FAILURES=$((RL_FAILURES + 1))
    fi
}

# rl_check_overload NAME RATE GRANTS: under overload a limit is drained as
# fast as it refills, so between the first and the last grant recorded in
# table "grants" (column granted_at: a span the run measured, free of
# pgbench's start-up) it granted at least 90% of RATE per second.
rl_check_overload() {
    local name=$1 rate=$2 grants=$3 span lower
    span=$(psql -X -A -t -c \
        "SELECT coalesce(extract(epoch FROM max(granted_at) - min(granted_at)), 0) FROM grants")
    lower=$(awk -v r="$rate" -v s="$span" 'BEGIN { printf "%.1f", 0.9 * r * s }')
    printf '%s: grants over %s s of granting; lower bound %s\n' "$name" "$span" "$lower"
    rl_check "$grants >= $lower" \
        "only $grants grants in $span s under overload (at least $lower expected): the limiter granted less than it may"
}

# rl_verdict NAME: prints "NAME: PASS", or "NAME: FAIL" and exits 1.
rl_verdict() {
    if [ "$RL_FAILURES" -eq 0 ]; then
        printf '%s: PASS\n' "$1"
    else
        printf '%s: FAIL\n' "$1"
        exit 1
    fi
}

# ---------------------------------------------------------------------------
# Packages

# rl_missing_packages PKG...: those of the Debian packages not installed.
rl_missing_packages() {
    local p status
    for p in "$@"; do
        status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
        [ "$status" = installed ] || printf '%s\n' "$p"
    done
}

# rl_install_packages PKG...: installs those of the Debian packages that are
# missing (as root), or prints the command that would and exits 1.
rl_install_packages() {
    command -v dpkg-query >/dev/null 2>&1 ||
        rl_die "dpkg-query not found: these scripts expect Debian 12 (bookworm)"
    local missing
    mapfile -t missing < <(rl_missing_packages "$@")
    [ ${#missing[@]} -gt 0 ] || return 0
    if ! rl_is_root; then
        printf 'error: missing Debian packages: %s\n' "${missing[*]}" >&2
        printf 'Install them with:\n\n' >&2
        printf '    sudo apt-get update && sudo apt-get install -y --no-install-recommends %s\n\n' \
            "${missing[*]}" >&2
        printf 'then run %s again.\n' "$0" >&2
        exit 1
    fi
    rl_log "installing Debian packages: ${missing[*]}"
    # Installing postgresql-15 would start Debian's own cluster on port
    # 5432; these scripts start and stop their own clusters only.
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        RL_POLICY_RC_CREATED=1
    fi
    rl_apt_get update -q || rl_die "apt-get update failed"
    rl_apt_get install -y -q --no-install-recommends \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
        "${missing[@]}" || rl_die "apt-get install failed"
    if [ -n "$RL_POLICY_RC_CREATED" ]; then
        rm -f /usr/sbin/policy-rc.d
        RL_POLICY_RC_CREATED=
    fi
    mapfile -t missing < <(rl_missing_packages "$@")
    [ ${#missing[@]} -eq 0 ] || rl_die "still missing after apt-get install: ${missing[*]}"
}

# rl_apt_get ARGS...: apt-get ARGS, as root.  Another apt or dpkg (an
# unattended upgrade, a second checkout's script) may hold the locks: it
# waits for dpkg's lock (DPkg::Lock::Timeout), and tries again while apt's
# lists or archives lock is held, which apt-get does not wait for, for at
# most RL_APT_LOCK_WAIT seconds (600) in all.  Then it fails, with apt's
# message naming the holder.
rl_apt_get() {
    local deadline=$((SECONDS + ${RL_APT_LOCK_WAIT:-600})) out left rc
    out=$(mktemp)
    while :; do
        left=$((deadline - SECONDS))
        [ "$left" -gt 0 ] || left=1
        rc=0
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout="$left" "$@" \
            >"$out" 2>&1 || rc=$?
        if [ "$rc" -ne 0 ] && [ "$SECONDS" -lt "$deadline" ] &&
           grep -qE 'Could not get lock|Unable to lock|Unable to acquire the dpkg frontend lock' "$out"; then
            sleep 2
            continue
        fi
        cat "$out"
        rm -f "$out"
        [ "$rc" -eq 0 ] || [ "$SECONDS" -lt "$deadline" ] ||
            rl_warn "apt-get waited ${RL_APT_LOCK_WAIT:-600} s for a lock another process held"
        return "$rc"
    done
}

ensure_packages() {
    rl_install_packages "${RL_PACKAGES[@]}"
    local pg_config=$RL_SYSTEM_PG_BINDIR/pg_config pgxs tool
    [ -x "$pg_config" ] || rl_die "$pg_config not found (package postgresql-server-dev-$RL_SYSTEM_PG_MAJOR)"
    pgxs=$(dirname "$("$pg_config" --pgxs)")/../..
    for tool in "$RL_SYSTEM_PG_BINDIR/initdb" "$RL_SYSTEM_PG_BINDIR/pg_ctl" \
                "$RL_SYSTEM_PG_BINDIR/postgres" "$RL_SYSTEM_PG_BINDIR/psql" \
                "$RL_SYSTEM_PG_BINDIR/pgbench" "$pgxs/src/test/regress/pg_regress" \
                "$pgxs/src/test/isolation/pg_isolation_regress"; do
        [ -x "$tool" ] || rl_die "$tool not found after installing ${RL_PACKAGES[*]}"
    done
}

# ---------------------------------------------------------------------------
# Build

# The extension's version: ratelimit.control's default_version.
rl_version() { sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$RL_ROOT/ratelimit.control"; }

# rl_dist DIR: the release archive ("make dist") of the working tree's
# tracked files as they are now, committed or not, into DIR; prints its path.
rl_dist() {
    local ref
    ref=$(git -C "$RL_ROOT" stash create 2>/dev/null || true)
    make -s -C "$RL_ROOT" dist DIST_REF="${ref:-HEAD}" DIST_DIR="$1" >/dev/null &&
        printf '%s/ratelimit-%s.tar.gz\n' "$1" "$(rl_version)"
}

# A private copy of the PostgreSQL install tree in a new temporary directory.
# Of the system's: bin, lib and share copied (PostgreSQL finds its files
# relative to its binaries), the headers and the libpq directory linked.  Of
# RL_PG_PREFIX: the whole prefix.  The extension is installed there, so the
# system's tree and the build cache are never written and two checkouts on
# one machine never test each other's build.  Exports RL_PG_ROOT,
# RL_PG_BINDIR, PG_CONFIG and PATH; the directory is removed when the script
# exits.
rl_private_tree() {
    local root sys_lib sys_share sys_libdir
    # /tmp and world-readable: the server runs as another user.
    root=$(mktemp -d /tmp/ratelimit-pgroot.XXXXXX)
    chmod 755 "$root"
    rl_at_exit "rm -rf '$root'"
    if [ -n "$RL_PG_PREFIX" ]; then
        # Under the shared lock rl_use_postgres holds.
        cp -a "$RL_PG_PREFIX/." "$root/" ||
            rl_die "could not copy the PostgreSQL install tree $RL_PG_PREFIX into $root"
        RL_PG_BINDIR=$root/bin
    else
        sys_lib=/usr/lib/postgresql/$RL_SYSTEM_PG_MAJOR
        sys_share=/usr/share/postgresql/$RL_SYSTEM_PG_MAJOR
        sys_libdir=$("$RL_SYSTEM_PG_BINDIR/pg_config" --libdir)
        mkdir -p "$root/usr/lib/postgresql" "$root/usr/share/postgresql" "$root$(dirname "$sys_libdir")"
        cp -a "$sys_lib" "$root/usr/lib/postgresql/" &&
            cp -a "$sys_share" "$root/usr/share/postgresql/" ||
            rl_die "could not copy the PostgreSQL install tree into $root"
        ln -s /usr/include "$root/usr/include"
        ln -s "$sys_libdir" "$root$sys_libdir"
        RL_PG_BINDIR=$root/usr/lib/postgresql/$RL_SYSTEM_PG_MAJOR/bin
    fi
    export RL_PG_ROOT=$root RL_PG_BINDIR
    export PG_CONFIG=$RL_PG_BINDIR/pg_config
    export PATH="$RL_PG_BINDIR:$PATH"
    case $("$PG_CONFIG" --pkglibdir) in
        "$root"/*) ;;
        *) rl_die "the copy of PostgreSQL in $root does not find its own files" ;;
    esac
}

build_and_install() {
    [ -n "${RL_PG_ROOT:-}" ] || rl_private_tree
    rl_log "building the extension"
    make -C "$RL_BUILD_DIR" -s || rl_die "the build failed"
    rl_log "installing the extension into the private PostgreSQL tree $RL_PG_ROOT"
    make -C "$RL_BUILD_DIR" -s install || rl_die "make install failed"
}

# A copy of the checkout's tracked files (or, outside git, of everything
# but build products) in DIR, so that a build there leaves this one alone.
copy_checkout() {
    mkdir -p "$1"
    if git -C "$RL_ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        (cd "$RL_ROOT" && git ls-files -z --cached --others --exclude-standard |
            tar --null --ignore-failed-read -T - -cf - 2>/dev/null) | tar -C "$1" -xf -
    else
        (cd "$RL_ROOT" && tar --exclude='*.o' --exclude='*.so' --exclude=./results \
            --exclude=./output_iso --exclude=./test/unit/ratelimit_unit \
            --exclude=./test/load/ratelimit_load -cf - .) | tar -C "$1" -xf -
    fi
}

rl_require_install() {
    if [ -z "${RL_PG_ROOT:-}" ]; then
        ensure_packages
        build_and_install
    fi
}

# ---------------------------------------------------------------------------
# Throwaway cluster

# Run a PostgreSQL server program as the cluster's owner, from the cluster's
# directory (the owner may not be allowed into the caller's one).
rl_as_owner() {
    if rl_is_root; then
        (cd "$RL_CLUSTER_DIR" && runuser -u postgres -- "$@")
    else
        (cd "$RL_CLUSTER_DIR" && "$@")
    fi
}

rl_pick_port() {
    local port tries=0
    while :; do
        port=$((54000 + RANDOM % 1000))
        # Sockets of these scripts' clusters live in their own directories.
        if [ ! -e "/tmp/.s.PGSQL.$port" ] && [ ! -e "/var/run/postgresql/.s.PGSQL.$port" ] &&
           ! compgen -G "/tmp/ratelimit-pg.*/.s.PGSQL.$port" >/dev/null; then
            printf '%s\n' "$port"
            return 0
        fi
        tries=$((tries + 1))
        [ "$tries" -lt 100 ] || rl_die "no free port found between 54000 and 54999"
    done
}

cluster_start() {
    [ -z "$RL_CLUSTER_DIR" ] || rl_die "cluster_start: a cluster is already running in $RL_CLUSTER_DIR"
    # /tmp, not $TMPDIR: the server user must reach it and socket paths are short.
    RL_CLUSTER_DIR=$(mktemp -d /tmp/ratelimit-pg.XXXXXX)
    RL_CLUSTER_DATA=$RL_CLUSTER_DIR/data
    if rl_is_root; then
        # PostgreSQL refuses to run as root: the cluster belongs to "postgres".
        if ! id -u postgres >/dev/null 2>&1; then
            rl_log "creating the operating system user postgres"
            useradd --system --user-group --home-dir /var/lib/postgresql \
                --shell /bin/bash postgres || rl_die "useradd postgres failed"
        fi
        chown postgres: "$RL_CLUSTER_DIR"
    fi
    chmod 700 "$RL_CLUSTER_DIR"
    rl_at_exit cluster_stop

    local port
    port=$(rl_pick_port)
    rl_log "starting a PostgreSQL $RL_PG_MAJOR cluster in $RL_CLUSTER_DIR (socket only, port $port)"
    if ! rl_as_owner "$RL_PG_BINDIR/initdb" -D "$RL_CLUSTER_DATA" -A trust -U postgres \
            --no-sync -E UTF8 --locale=C.UTF-8 >"$RL_CLUSTER_DIR/initdb.log" 2>&1; then
        cat "$RL_CLUSTER_DIR/initdb.log" >&2
        rl_die "initdb failed"
    fi
    rl_as_owner tee -a "$RL_CLUSTER_DATA/postgresql.conf" >/dev/null <<EOF

# throwaway test cluster
listen_addresses = ''
unix_socket_directories = '$RL_CLUSTER_DIR'
port = $port
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 50
max_prepared_transactions = 10
shared_buffers = ${RL_SHARED_BUFFERS:-256MB}
${RL_CLUSTER_CONF:-}
EOF
    if ! rl_as_owner "$RL_PG_BINDIR/pg_ctl" -D "$RL_CLUSTER_DATA" -l "$RL_CLUSTER_DIR/server.log" \
            -w -t 60 start >/dev/null; then
        tail -n 30 "$RL_CLUSTER_DIR/server.log" >&2 || true
        rl_die "the server did not start"
    fi

    unset PGHOSTADDR PGSERVICE PGSERVICEFILE PGOPTIONS PGPASSWORD PGPASSFILE PGSSLMODE
    export PGHOST=$RL_CLUSTER_DIR PGPORT=$port PGUSER=postgres PGDATABASE=postgres
}

# Stop the cluster started by cluster_start (if any) and remove its directory.
cluster_stop() {
    [ -n "$RL_CLUSTER_DIR" ] || return 0
    local dir=$RL_CLUSTER_DIR data=$RL_CLUSTER_DATA pid
    if [ -f "$data/postmaster.pid" ]; then
        rl_log "stopping the cluster in $dir"
        if ! rl_as_owner "$RL_PG_BINDIR/pg_ctl" -D "$data" -m fast -w -t 30 stop >/dev/null 2>&1 &&
           ! rl_as_owner "$RL_PG_BINDIR/pg_ctl" -D "$data" -m immediate -w -t 30 stop >/dev/null 2>&1; then
            pid=$(head -n 1 "$data/postmaster.pid" 2>/dev/null || true)
            if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
                rl_warn "the server (pid $pid) did not stop; killing it"
                kill -KILL "$pid" 2>/dev/null || true
            fi
        fi
    fi
    rm -rf "$dir"
    RL_CLUSTER_DIR=
    RL_CLUSTER_DATA=
    unset PGHOST PGPORT PGUSER PGDATABASE
}

# Path of the server log of the running cluster (empty if none).
cluster_log() { [ -z "$RL_CLUSTER_DIR" ] || printf '%s\n' "$RL_CLUSTER_DIR/server.log"; }

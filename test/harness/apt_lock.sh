#!/usr/bin/env bash
# test/harness/apt_lock.sh
#
# The scripts' apt steps wait, for a bounded time, for a lock another apt
# or dpkg holds (an unattended upgrade, another checkout's script) instead
# of failing at once:
# - every apt-get that takes apt's or dpkg's locks goes through rl_apt_get;
# - while another process holds apt's lists lock and dpkg's frontend lock
#   for a few seconds, rl_apt_get update and install wait and succeed once
#   they are free;
# - with RL_APT_LOCK_WAIT shorter than the hold, it fails after about that
#   long, with apt's message naming the lock.
# apt's locks are root's: as another user it checks only the first point.
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/lib.sh"
RL_FAILURES=0

# Every apt-get that can take a lock: not a simulation, not an apt
# configuration of build-postgres's own (which locks its own directory).
# (rl_apt_get's own call is the one with DPkg::Lock::Timeout; messages name
# apt-get too.)
direct=$(cd "$RL_ROOT" && grep -rnE --exclude-dir=node_modules '(^|[[:space:];&|(])apt-get ' scripts test bench examples |
    grep -vE '^[^:]+:[0-9]+:[[:space:]]*#' |
    grep -vE 'rl_apt_get|DPkg::Lock::Timeout|--simulate|apt_in |rl_die|rl_warn|printf' || true)
if [ -z "$direct" ]; then
    printf 'ok: every apt-get that takes a lock goes through rl_apt_get\n'
else
    printf 'FAILED: apt-get called without waiting for its locks:\n%s\n' "$direct"
    RL_FAILURES=$((RL_FAILURES + 1))
fi

if ! rl_is_root; then
    printf 'apt_lock: the lock checks need root; only the first ran\n'
    rl_verdict apt_lock
    exit
fi
rl_install_packages python3

# hold SECONDS: holds apt's lists lock and dpkg's frontend lock, as apt and
# dpkg take them (fcntl), for SECONDS from when it returns.
holder=
hold() {
    local ready
    ready=$(mktemp -u)
    python3 - "$ready" "$1" <<'PY' &
import fcntl, sys, time
held = [open(p, 'a') for p in ('/var/lib/dpkg/lock-frontend', '/var/lib/apt/lists/lock')]
for f in held:
    fcntl.lockf(f, fcntl.LOCK_EX)
open(sys.argv[1], 'w').close()
time.sleep(float(sys.argv[2]))
PY
    holder=$!
    while [ ! -e "$ready" ]; do sleep 0.1; done
    rm -f "$ready"
}
release() { [ -z "$holder" ] || { kill "$holder" 2>/dev/null || true; wait "$holder" 2>/dev/null || true; holder=; }; }
rl_at_exit release

# timed COMMAND...: runs COMMAND with its output in $out; sets $took
# (seconds) and $rc.
out=$(mktemp)
rl_at_exit "rm -f '$out'"
timed() {
    local start=$SECONDS
    rc=0
    "$@" >"$out" 2>&1 || rc=$?
    took=$((SECONDS - start))
}

hold 6
timed rl_apt_get update -q
release
rl_check "$rc == 0" "apt-get update failed while the lists lock was held for 6 s (status $rc): $(tail -n 2 "$out" | tr '\n' ' ')"
rl_check "$took >= 4" "apt-get update returned after $took s: it did not wait for the lock"
[ "$rc" -ne 0 ] || printf 'ok: update waited %s s for the lists lock\n' "$took"

hold 6
timed rl_apt_get install -y -q --no-install-recommends python3
release
rl_check "$rc == 0" "apt-get install failed while dpkg's lock was held for 6 s (status $rc): $(tail -n 2 "$out" | tr '\n' ' ')"
rl_check "$took >= 4" "apt-get install returned after $took s: it did not wait for the lock"
[ "$rc" -ne 0 ] || printf 'ok: install waited %s s for dpkg'"'"'s lock\n' "$took"

hold 30
RL_APT_LOCK_WAIT=3 timed rl_apt_get update -q
release
rl_check "$rc != 0" "apt-get update succeeded while the lock was held beyond RL_APT_LOCK_WAIT"
rl_check "$took >= 2 && $took <= 15" "apt-get update gave up after $took s, not after about RL_APT_LOCK_WAIT=3 s"
if grep -q 'lock' "$out"; then
    printf 'ok: with RL_APT_LOCK_WAIT=3 it gave up after %s s, naming the lock\n' "$took"
else
    printf 'FAILED: giving up, it did not say which lock: %s\n' "$(tail -n 2 "$out" | tr '\n' ' ')"
    RL_FAILURES=$((RL_FAILURES + 1))
fi

rl_verdict apt_lock

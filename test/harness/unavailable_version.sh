#!/usr/bin/env bash
# test/harness/unavailable_version.sh
#
# A PostgreSQL version that Debian's archive cannot supply is reported as
# not tested, plainly, and is not counted as a failure: with an empty cache
# and only suites that list no such version,
# - scripts/build-postgres exits with status 3 and gives the reason;
# - "scripts/test --version 17" exits with status 3, its summary row and
#   the line before the last say "not tested" and why, and the last line is
#   "0 passed, 0 failed";
# - "scripts/test --matrix" over that version counts it neither as passed
#   nor as failed, and says so in its summary.
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/lib.sh"
RL_FAILURES=0

work=$(mktemp -d)
rl_at_exit "rm -rf '$work'"
# A suite that lists no PostgreSQL 17 (bookworm has only 15), and one the
# archive does not have at all.
export RL_PG_CACHE=$work/cache RL_DEBIAN_SUITES="debian/bookworm debian/no-such-suite"

rc=0
reason=$("$RL_ROOT/scripts/build-postgres" 17 2>"$work/build.err") || rc=$?
rl_check "$rc == 3" "build-postgres 17 exited with status $rc, not 3: $(tail -n 3 "$work/build.err" | tr '\n' ' ')"
case $reason in
    *"cannot supply it"*"no suite lists postgresql-17"*)
        printf 'ok: build-postgres: %s\n' "$reason" ;;
    *) printf 'FAILED: build-postgres gave no reason: %s\n' "$reason"
       RL_FAILURES=$((RL_FAILURES + 1)) ;;
esac

rc=0
"$RL_ROOT/scripts/test" --version 17 >"$work/version.out" 2>&1 || rc=$?
rl_check "$rc == 3" "scripts/test --version 17 exited with status $rc, not 3"
rl_expect "its summary has no row saying PostgreSQL 17 was not tested" \
    grep -qE '^build +PostgreSQL 17 +0 +0 .*not tested: Debian.s archive .* cannot supply it' "$work/version.out"
rl_expect "no line before the last says PostgreSQL 17 was not tested" \
    grep -qE '^not tested: PostgreSQL 17: Debian.s archive .* cannot supply it' "$work/version.out"
rl_expect "its last line is not \"0 passed, 0 failed\"" \
    test "$(tail -n 1 "$work/version.out")" = "0 passed, 0 failed"

rc=0
RL_MATRIX=17 "$RL_ROOT/scripts/test" --matrix >"$work/matrix.out" 2>&1 || rc=$?
rl_expect "the matrix run has no row saying PostgreSQL 17 was not tested" \
    grep -qE '^versions +PostgreSQL 17 +0 +0 .*not tested: Debian.s archive .* cannot supply it' "$work/matrix.out"
rl_expect "the matrix run counted something for PostgreSQL 17" \
    test "$(tail -n 1 "$work/matrix.out")" = "0 passed, 0 failed"
rl_expect "the matrix run's summary does not say PostgreSQL 17 was not tested" \
    grep -qE '^not tested: PostgreSQL 17: Debian.s archive .* cannot supply it' "$work/matrix.out"
if [ "$RL_FAILURES" -gt 0 ]; then
    printf '\n--- scripts/test --version 17:\n'
    tail -n 20 "$work/version.out"
    printf '\n--- scripts/test --matrix:\n'
    tail -n 20 "$work/matrix.out"
fi
rl_verdict unavailable_version

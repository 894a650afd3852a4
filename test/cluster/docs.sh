#!/usr/bin/env bash
# test/cluster/docs.sh
#
# The documentation as a reader meets it (test/docs/run.py says how):
# - every ```sql block of README.md and docs/**/*.md (docs/recipes/ too)
#   runs, in file order, as its <!-- docs-test: ... --> marker says (the
#   extension by default; the portable limiter; every policy in the memory
#   engine; an error it must raise; skipped, with a reason), and raises no
#   other error;
# - every relative link names a file that exists, and every #anchor a
#   heading of its target by GitHub's rules;
# - and the check can fail: on test/docs/broken.md, a block that raises an
#   error and a link to an anchor that no heading has, it reports exactly
#   those two failures, while its portable and memory blocks, which
#   divide by zero unless they run on the portable limiter and in the
#   memory engine, pass.
# Starts and stops a cluster of its own, with the library preloaded (the
# memory engine and rate_limit_stats need it on PostgreSQL 15).
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/lib.sh"

# The checker is a Python script (standard library only).
rl_install_packages python3
rl_require_install
RL_CLUSTER_CONF="shared_preload_libraries = 'ratelimit'" cluster_start
RL_FAILURES=0

# The check itself must catch a broken block and a broken anchor.
out=$(python3 "$RL_ROOT/test/docs/run.py" "$RL_ROOT/test/docs/broken.md" 2>&1) && rc=0 || rc=$?
printf '%s\n' "$out" | sed 's/^/    broken.md: /'
rl_check "$rc == 1" "test/docs/run.py exited with $rc on test/docs/broken.md, expected 1"
rl_check "$(grep -c '^FAILED: ' <<<"$out") == 2" "test/docs/broken.md: expected exactly 2 failures"
rl_check "$(grep -c '^FAILED: test/docs/broken.md:[0-9]*: native: ERROR 42704: ' <<<"$out") == 1" \
    "test/docs/broken.md: the block calling an undefined policy was not reported"
rl_check "$(grep -c '^FAILED: test/docs/broken.md:[0-9]*: link to #no-such-heading: ' <<<"$out") == 1" \
    "test/docs/broken.md: the link to a missing anchor was not reported"

# The documentation.
rl_expect "the documentation's SQL blocks and links (above)" python3 "$RL_ROOT/test/docs/run.py"

rl_verdict docs

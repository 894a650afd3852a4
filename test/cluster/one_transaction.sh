#!/usr/bin/env bash
# test/cluster/one_transaction.sh
#
# A batch job charging a tenant per row takes from one key many times in one
# transaction.  Every take must stay as cheap as the first: 1,000,000 takes
# of one key in one transaction, timed in 10 segments of 100,000, and the
# slowest segment may take at most 3 times as long as the first (a lookup
# that walked every version the transaction created would make the last
# segment about 19 times the first).  The takes are all granted and exactly
# accounted for.  Starts and stops its own cluster.
#
#   ONE_TXN_TAKES     takes in the transaction (default 1000000)
#   ONE_TXN_SEGMENTS  segments they are timed in (default 10)
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/lib.sh"

TAKES=${ONE_TXN_TAKES:-1000000}
SEGMENTS=${ONE_TXN_SEGMENTS:-10}
PER_SEGMENT=$((TAKES / SEGMENTS))
MAX_RATIO=3

rl_require_install
cluster_start
psql -X -q -v ON_ERROR_STOP=1 -c "CREATE EXTENSION ratelimit"

# Never refills, holds twice what is taken: every take is granted, and the
# balance left says exactly how many were.
read -r first slowest last granted left < <(psql -X -q -A -t -F ' ' -v ON_ERROR_STOP=1 <<SQL
BEGIN;
CREATE TEMP TABLE segments (n int, seconds float8, granted bigint);
DO \$\$
DECLARE
    started timestamptz;
    granted bigint;
BEGIN
    FOR s IN 1..$SEGMENTS LOOP
        started := clock_timestamp();
        SELECT count(*) INTO granted
          FROM generate_series(1, $PER_SEGMENT) AS g,
               LATERAL rate_limit_take('batch', 'tenant:1', 1 + 0 * g, 0, 2 * $TAKES) AS d
         WHERE d.allowed;
        INSERT INTO segments
        VALUES (s, extract(epoch FROM clock_timestamp() - started), granted);
    END LOOP;
END
\$\$;
SELECT (SELECT seconds FROM segments WHERE n = 1),
       (SELECT max(seconds) FROM segments),
       (SELECT seconds FROM segments WHERE n = $SEGMENTS),
       (SELECT sum(granted) FROM segments),
       (SELECT remaining FROM rate_limit_check('batch', 'tenant:1', 0, 0, 2 * $TAKES));
COMMIT;
SQL
)
ratio=$(awk -v a="$first" -v b="$slowest" 'BEGIN { printf "%.2f", b / a }')
printf 'one_transaction: %d takes of one key in one transaction, %d segments: first %.3f s, last %.3f s, slowest %.3f s (%s x the first); granted %s, left %s\n' \
    "$TAKES" "$SEGMENTS" "$first" "$last" "$slowest" "$ratio" "$granted" "$left"

rl_check "$granted == $TAKES" "$granted of $TAKES takes were granted"
rl_check "$left == $TAKES" "the bucket holds $left tokens, expected $TAKES"
rl_check "$ratio <= $MAX_RATIO" "the slowest segment took $ratio times as long as the first (at most $MAX_RATIO): time per take grows with the takes before it"
rl_verdict one_transaction

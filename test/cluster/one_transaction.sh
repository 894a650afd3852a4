#!/usr/bin/env bash
# test/cluster/one_transaction.sh
#
# A batch job charging a tenant per row takes from one key many times in one
# transaction.  Every take must stay as cheap as the first: 1,000,000 takes
# of one key in one transaction, timed in 10 segments of 100,000; the
# fastest of the last three segments may take at most 3 times as long as
# the fastest of the first three (a lookup that walked every version the
# transaction created would make it about 15 times; taking the fastest of
# three keeps a hiccup of the machine from deciding).  The takes are all
# granted and exactly accounted for.  Starts and stops its own cluster.
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
SELECT (SELECT min(seconds) FROM segments WHERE n <= 3),
       (SELECT max(seconds) FROM segments),
       (SELECT min(seconds) FROM segments WHERE n > $SEGMENTS - 3),
       (SELECT sum(granted) FROM segments),
       (SELECT remaining FROM rate_limit_check('batch', 'tenant:1', 0, 0, 2 * $TAKES));
COMMIT;
SQL
)
ratio=$(awk -v a="$first" -v b="$last" 'BEGIN { printf "%.2f", b / a }')
printf 'one_transaction: %d takes of one key in one transaction, %d segments: fastest of the first three %.3f s, of the last three %.3f s (%s x), slowest %.3f s; granted %s, left %s\n' \
    "$TAKES" "$SEGMENTS" "$first" "$last" "$ratio" "$slowest" "$granted" "$left"

rl_check "$granted == $TAKES" "$granted of $TAKES takes were granted"
rl_check "$left == $TAKES" "the bucket holds $left tokens, expected $TAKES"
rl_check "$ratio <= $MAX_RATIO" "the last segments took $ratio times as long as the first (at most $MAX_RATIO): time per take grows with the takes before it"
rl_verdict one_transaction

#!/usr/bin/env bash
# test/cluster/purge.sh
#
# Lossless cleanup at scale, and on a schedule.
#
# 1,000,000 keys of policy "ip" (1 token a second, burst 10) take at t = 1000:
# nine in ten take 1 and are full at t = 1001, every tenth takes 10 and is
# full at t = 1010.  At t = 1005 (a fixed clock, in every session)
# rate_limit_purge() runs while two sessions take from the 2,000 "hot" keys.
# Then: exactly the full keys nobody took from are gone, every other key
# answers as before, each hot key granted exactly what it held (no purge
# handed it a fresh burst), and the table and its index shrink after VACUUM
# FULL and REINDEX.
#
# Meanwhile the real pg_cron (postgresql-15-cron) runs CALL rate_limit_purge()
# every minute in another database, as a role granted nothing but EXECUTE on
# the procedure, and must remove that database's full buckets only.
#
# Starts and stops a cluster of its own.
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/lib.sh"

KEYS=1000000
HOT=2000
TAKES_PER_SESSION=20000 # at least; they go on until the purge is over

rl_require_install
RL_CLUSTER_CONF="shared_preload_libraries = 'pg_cron'
cron.database_name = 'postgres'
cron.use_background_workers = on
max_worker_processes = 16" cluster_start
RL_FAILURES=0
q() { psql -X -A -t -q -v ON_ERROR_STOP=1 "$@"; }

# --- pg_cron, scheduled first: it fires at the next minute boundary.
q -c "CREATE DATABASE cronjobs" -c "CREATE ROLE purger LOGIN"
q -d cronjobs \
    -c "CREATE EXTENSION ratelimit" \
    -c "GRANT EXECUTE ON PROCEDURE rate_limit_purge(text, bigint) TO purger" \
    -c "SELECT count(*) FROM unnest(ARRAY['a', 'b', 'c']) AS k,
               rate_limit_take_explicit('cron', k, 1, 1000, '1 second', 1)" \
    -c "SELECT count(*) FROM rate_limit_take_explicit('cron', 'never', 1, 0, '1 second', 1)" >/dev/null
q -c "CREATE EXTENSION pg_cron" \
  -c "SELECT cron.schedule_in_database('ratelimit-purge', '* * * * *', 'CALL rate_limit_purge()',
                                       'cronjobs', 'purger', true)" >/dev/null
rl_log "pg_cron: CALL rate_limit_purge() scheduled every minute in database cronjobs, as purger"

# --- 1,000,000 keys.
q -c "CREATE EXTENSION ratelimit" \
  -c "SELECT (rate_limit_define('ip', 1, '1 second', 10)).name" >/dev/null
started=$(date +%s)
taken=$(q -c "SET ratelimit.fixed_clock = 1000" -c "
    SELECT count(*) FILTER (WHERE (rate_limit_take('ip', 'k' || g,
                                    CASE WHEN g % 10 = 0 THEN 10 ELSE 1 END)).allowed)
      FROM generate_series(1, $KEYS) AS g")
rl_log "$taken of $KEYS first takes granted in $(($(date +%s) - started)) s"
rl_check "$taken == $KEYS" "the first takes: $taken granted, $KEYS expected"

# What every key nobody will take from answers at t = 1005, before the purge.
q -c "SET ratelimit.fixed_clock = 1005" -c "
    CREATE TABLE before AS
    SELECT g, rate_limit_check('ip', 'k' || g, 1) AS decision
      FROM generate_series($HOT + 1, $KEYS) AS g" \
  -c "CREATE TABLE attempts (session int, key int, allowed boolean)" \
  -c "CREATE TABLE spans (who text, started timestamptz, ended timestamptz)" \
  -c "VACUUM ANALYZE ratelimit.buckets"
read -r heap_before index_before rows_before < <(q -F ' ' -c "
    SELECT pg_relation_size('ratelimit.buckets'), pg_relation_size('ratelimit.buckets_pkey'),
           (SELECT count(*) FROM ratelimit.buckets)")

# --- The purge, while two sessions take from the hot keys.
takers=()
for session in 1 2; do
    q -c "SET ratelimit.fixed_clock = 1005" -c "
        DO \$\$
        DECLARE
            started timestamptz := clock_timestamp();
            k int;
        BEGIN
            -- At least $TAKES_PER_SESSION takes, and on until the purge is over.
            FOR i IN 1..10000000 LOOP
                EXIT WHEN i > $TAKES_PER_SESSION AND i % 100 = 0
                          AND EXISTS (SELECT FROM spans WHERE who = 'purge');
                k := 1 + floor(random() * $HOT)::int;
                INSERT INTO attempts
                VALUES ($session, k, (rate_limit_take('ip', 'k' || k, 1)).allowed);
                COMMIT;
            END LOOP;
            INSERT INTO spans VALUES ('takes $session', started, clock_timestamp());
        END
        \$\$" &
    takers+=($!)
done
# The purge starts once both sessions are taking.
for _ in $(seq 1 600); do
    [ "$(q -c "SELECT count(DISTINCT session) FROM attempts")" = 2 ] && break
    sleep 0.1
done
purged=$(q -c "SET ratelimit.fixed_clock = 1005" -c "CREATE TEMP TABLE t (at timestamptz)" \
           -c "INSERT INTO t VALUES (clock_timestamp())" \
           -c "CALL rate_limit_purge()" \
           -c "INSERT INTO spans SELECT 'purge', at, clock_timestamp() FROM t")
for pid in "${takers[@]}"; do wait "$pid" || rl_die "a taking session failed"; done
rl_log "rate_limit_purge() removed $purged rows"
q -c "SELECT who, ended - started FROM spans ORDER BY who"

overlap=$(q -c "SELECT bool_and(p.started < s.ended AND s.started < p.ended)
                  FROM spans p, spans s WHERE p.who = 'purge' AND s.who <> 'purge'")
rl_check "\"$overlap\" == \"t\"" "the purge did not overlap both taking sessions"

# Exactly the full keys nobody took from are gone.
read -r cold_left cold_wrong < <(q -F ' ' -c "
    SELECT count(*), count(*) FILTER (WHERE substr(key, 2)::int % 10 <> 0)
      FROM ratelimit.buckets WHERE name = 'ip' AND substr(key, 2)::int > $HOT")
expected_cold=$(((KEYS - HOT) / 10))
rl_check "$cold_left == $expected_cold && $cold_wrong == 0" \
    "untouched keys left: $cold_left ($cold_wrong full ones among them), $expected_cold expected"

# Every untouched key answers as it did before.
changed=$(q -c "SET ratelimit.fixed_clock = 1005" -c "
    SELECT count(*) FROM before
     WHERE decision IS DISTINCT FROM rate_limit_check('ip', 'k' || g, 1)")
rl_check "$changed == 0" "$changed untouched keys answer differently after the purge"

# Each hot key granted exactly what it held at t = 1005: 10 tokens, or 5 for
# every tenth key, or fewer when it was asked fewer times.
read -r hot_keys hot_wrong granted < <(q -F ' ' -c "
    SELECT count(*),
           count(*) FILTER (WHERE granted <> least(asked, CASE WHEN key % 10 = 0 THEN 5 ELSE 10 END)),
           sum(granted)
      FROM (SELECT key, count(*) AS asked, count(*) FILTER (WHERE allowed) AS granted
              FROM attempts GROUP BY key) AS per_key")
rl_log "hot keys: $hot_keys asked, $granted grants"
rl_check "$hot_wrong == 0 && $hot_keys > $((HOT * 9 / 10))" \
    "$hot_wrong of $hot_keys hot keys granted other than what they held"

# The table and its index shrink once the space is given back.
q -c "REINDEX TABLE CONCURRENTLY ratelimit.buckets" -c "VACUUM FULL ratelimit.buckets"
read -r heap_after index_after rows_after < <(q -F ' ' -c "
    SELECT pg_relation_size('ratelimit.buckets'), pg_relation_size('ratelimit.buckets_pkey'),
           (SELECT count(*) FROM ratelimit.buckets)")
rl_log "rows: $rows_before -> $rows_after; heap: $((heap_before / 1048576)) MB -> $((heap_after / 1048576)) MB; index: $((index_before / 1048576)) MB -> $((index_after / 1048576)) MB"
rl_check "$heap_after * 5 < $heap_before" "the heap did not shrink to a fifth: $heap_before -> $heap_after bytes"
rl_check "$index_after * 5 < $index_before" "the index did not shrink to a fifth: $index_before -> $index_after bytes"

# The limiter still works on the rewritten table: key k2010 holds 5 tokens.
again=$(q -c "SET ratelimit.fixed_clock = 1005" -c "
    SELECT (rate_limit_take('ip', 'k2010', 5)).allowed, (rate_limit_take('ip', 'k2010', 1)).allowed")
rl_check "\"$again\" == \"t|f\"" "key k2010 after the rewrite answered $again, expected t|f"

# --- pg_cron's run.
status=
for _ in $(seq 1 150); do
    status=$(q -c "SELECT status || ': ' || coalesce(return_message, '')
                     FROM cron.job_run_details WHERE status IN ('succeeded', 'failed')
                     ORDER BY runid LIMIT 1")
    [ -n "$status" ] && break
    sleep 1
done
rl_log "pg_cron's first run: ${status:-none within the wait}"
rl_check "\"${status%%:*}\" == \"succeeded\"" "pg_cron's run of rate_limit_purge did not succeed"
left=$(q -d cronjobs -c "SELECT string_agg(key, ',' ORDER BY key) FROM ratelimit.buckets")
rl_check "\"$left\" == \"never\"" "after pg_cron's run the buckets left are '$left', expected only 'never'"

rl_verdict purge

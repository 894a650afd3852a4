--
-- rate_limit_purge: forgets exactly the buckets whose deletion changes no
-- answer, whatever limit wrote them, and every write records when its bucket
-- is full again (full_at), for explicit limits too.
--
\i test/sql/include/error_of.sql
SET ratelimit.fixed_clock = 1000;

-- full_at: the clock plus the time to refill what the call left.
SELECT rate_limit_take_explicit('p-explicit', 'half', 3, 2, '1 second', 6) IS NOT NULL AS taken;
SELECT rate_limit_take_explicit('p-explicit', 'debt', 4, 1, '1 second', 2, '10 seconds') IS NOT NULL AS reserved;
SELECT rate_limit_take_explicit('p-explicit', 'never', 1, 0, '1 second', 1) IS NOT NULL AS taken;
SELECT rate_limit_take_explicit('p-explicit', 'looked', 0, 1, '1 second', 1) IS NOT NULL AS looked;
SELECT key, tokens,
       CASE WHEN isfinite(full_at) THEN (full_at - to_timestamp(1000))::text ELSE full_at::text END AS full_in
FROM ratelimit.buckets WHERE name = 'p-explicit' ORDER BY key;

-- Policies: one that remembers first sightings, one redefined later, one
-- sharded, one plain.
SELECT (rate_limit_define('p-plain', 1, '1 second', 4)).name;
SELECT (rate_limit_define('p-initial', 1, '1 second', 4, initial => 1)).name;
SELECT (rate_limit_define('p-slower', 1, '1 second', 4)).name;
SELECT (rate_limit_define('p-sharded', 4, '1 second', 8, shards => 4)).name;
SELECT (rate_limit_take('p-plain', 'a', 2)).allowed;
SELECT (rate_limit_take('p-initial', 'a', 1)).allowed;
SELECT (rate_limit_take('p-slower', 'a', 2)).allowed;
SELECT (rate_limit_take('p-sharded', 'a', 1)).allowed;
SELECT (rate_limit_take('p-sharded', 'a', 1)).allowed;

-- What is left of this test's buckets (a sharded take picks its shards at
-- random: shard rows are counted, not named).
CREATE TEMP VIEW purge_left AS
SELECT name, split_part(key, E'\x1f', 1) AS key, count(*) AS rows
FROM ratelimit.buckets WHERE name LIKE 'p-%' GROUP BY 1, 2 ORDER BY 1, 2;

-- (That it refuses to run inside a transaction block or from a function,
-- where it could not commit as it goes, is in state_guard.sql.)
SELECT pg_temp.error_of($$CALL rate_limit_purge('')$$);

-- Nothing is full yet: nothing goes.  (Purges of every name also see what
-- other tests left: their counts are not shown, what is left of this
-- test's buckets is.)
CALL rate_limit_purge('p-explicit');
CALL rate_limit_purge() \gset
TABLE purge_left;

-- What each bucket answers, before and after a purge.
CREATE TEMP TABLE answers (phase text, name text, key text, decision rate_limit_decision);
CREATE FUNCTION pg_temp.record_answers(phase text) RETURNS void LANGUAGE sql AS $$
    INSERT INTO answers
    SELECT phase, n, k,
           CASE WHEN n = 'p-explicit' THEN
                    CASE k WHEN 'half' THEN rate_limit_check_explicit(n, k, 6, 2, '1 second', 6)
                           WHEN 'debt' THEN rate_limit_check_explicit(n, k, 2, 1, '1 second', 2)
                           WHEN 'never' THEN rate_limit_check_explicit(n, k, 1, 0, '1 second', 1)
                           ELSE rate_limit_check_explicit(n, k, 1, 1, '1 second', 1) END
                ELSE rate_limit_check(n, k, CASE WHEN n = 'p-sharded' THEN 2 ELSE 4 END) END
    FROM (VALUES ('p-explicit', 'half'), ('p-explicit', 'debt'), ('p-explicit', 'never'),
                 ('p-explicit', 'looked'), ('p-plain', 'a'), ('p-initial', 'a'),
                 ('p-slower', 'a'), ('p-sharded', 'a')) AS b(n, k)
$$;
CREATE TEMP VIEW same_answers AS
SELECT b.name, b.key, b.decision = a.decision AS same_answer
FROM answers b JOIN answers a USING (name, key)
WHERE b.phase = 'before' AND a.phase = 'after' ORDER BY b.name, b.key;

-- Two seconds on: 'p-slower' is redefined to refill four times slower, so
-- its bucket (full by the limit that wrote it) is not full by the policy.
SET ratelimit.fixed_clock = 1002;
SELECT (rate_limit_define('p-slower', 1, '4 seconds', 4)).name;
SELECT pg_temp.record_answers('before');
CALL rate_limit_purge() \gset
SELECT pg_temp.record_answers('after');
TABLE purge_left;
TABLE same_answers;

-- Much later everything that refills is full; the policy that remembers
-- first sightings keeps its row, and so does the bucket that never refills.
SET ratelimit.fixed_clock = 2000;
TRUNCATE answers;
SELECT pg_temp.record_answers('before');
-- One name at a time: only its buckets.
CALL rate_limit_purge(name => 'p-explicit');
TABLE purge_left;
CALL rate_limit_purge() \gset
SELECT pg_temp.record_answers('after');
TABLE purge_left;
TABLE same_answers;

-- A clock that stepped back: the stamp ahead is history a new bucket would
-- not have, so the row stays until the clock passes it.
SELECT (rate_limit_take('p-plain', 'ahead', 1)).allowed;
SELECT (rate_limit_refund('p-plain', 'ahead', 1)).remaining;
SET ratelimit.fixed_clock = 1999;
CALL rate_limit_purge('p-plain');
SET ratelimit.fixed_clock = 2000;
CALL rate_limit_purge('p-plain');

-- A row written before 0.3.0 carries no full_at: a policy's is judged by
-- the policy, an explicit limit's stays until its next write.
INSERT INTO ratelimit.buckets VALUES ('p-plain', 'old', 4, to_timestamp(1000), 'infinity', '-infinity'),
                                     ('p-explicit', 'old', 1, to_timestamp(1000), 'infinity', '-infinity');
CALL rate_limit_purge() \gset
TABLE purge_left;

-- Only for the roles it is granted to; those need nothing on the table.
CREATE ROLE ratelimit_purger NOLOGIN;
SET ROLE ratelimit_purger;
SELECT pg_temp.error_of($$CALL rate_limit_purge()$$);
CALL rate_limit_purge();
RESET ROLE;
GRANT EXECUTE ON PROCEDURE rate_limit_purge(text, bigint) TO ratelimit_purger;
SET ROLE ratelimit_purger;
CALL rate_limit_purge() \gset
SELECT :purged >= 0 AS purged_as_granted;
SELECT :purged >= 0 AS purged_as_granted;
RESET ROLE;

-- Never in a read-only transaction.
SET default_transaction_read_only = on;
CALL rate_limit_purge();
RESET default_transaction_read_only;

REVOKE EXECUTE ON PROCEDURE rate_limit_purge(text, bigint) FROM ratelimit_purger;
DROP ROLE ratelimit_purger;
DELETE FROM ratelimit.buckets WHERE name LIKE 'p-%';
SELECT rate_limit_drop(n) FROM unnest(ARRAY['p-plain', 'p-initial', 'p-slower', 'p-sharded']) AS n;
RESET ratelimit.fixed_clock;

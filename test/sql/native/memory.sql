--
-- The memory engine: policies defined with storage => 'memory'.  Before
-- PostgreSQL 17 it needs the library in shared_preload_libraries, which the
-- suite's server does not load: rate_limit_define refuses such a policy,
-- and the test ends there (expected/native/memory_1.out).  From 17 it runs
-- without it, and test/cluster/memory.sh runs it with the library
-- preloaded on every version (expected/native/memory.out).
--
\set SHOW_CONTEXT never
SET ratelimit.fixed_clock = 2000000000;
SELECT current_setting('server_version_num')::int >= 170000
       OR current_setting('shared_preload_libraries') ~ 'ratelimit' AS has_memory \gset
SELECT name, storage FROM rate_limit_define('mem', 10, '1 second', 5, storage => 'memory');
\if :has_memory
\else
-- Refused, nothing was stored.  A row written otherwise, as pg_restore
-- writes the rows of a dump, is kept; the calls of its policy then say
-- what is missing.
SELECT count(*) FROM ratelimit.policies WHERE name = 'mem';
INSERT INTO ratelimit.policies (name, rate, per, burst, storage)
VALUES ('mem', 10, '1 second', 5, 'memory');
SELECT allowed, remaining FROM rate_limit_check('mem', 'probe');
\quit
\endif
SELECT allowed, remaining FROM rate_limit_check('mem', 'probe');

-- The same result rows as the table engine.
SELECT * FROM rate_limit_take('mem', 'k', 3);
SELECT * FROM rate_limit_take('mem', 'k', 3);
SELECT * FROM rate_limit_check('mem', 'k', 2);
SELECT * FROM rate_limit_refund('mem', 'k', 1);
SELECT * FROM rate_limit_headers(rate_limit_check('mem', 'k', 1));
-- The same errors, before the engine is asked.
SELECT * FROM rate_limit_take('mem', 'k', 6);
SELECT * FROM rate_limit_take('mem', 'k', -1);
SELECT * FROM rate_limit_take_explicit('mem', 'k', 1, 100, '1 second', 100);

-- Consumption belongs to the transaction: ROLLBACK and ROLLBACK TO
-- SAVEPOINT give it back; a commit keeps it.  No transaction id, no row.
SET ratelimit.fixed_clock = 2000000100;
BEGIN;
SELECT allowed, remaining FROM rate_limit_take('mem', 'tx', 4);
SELECT allowed, remaining FROM rate_limit_take('mem', 'tx', 2);
SELECT txid_current_if_assigned() IS NULL AS no_transaction_id;
ROLLBACK;
SELECT allowed, remaining FROM rate_limit_check('mem', 'tx', 0);
BEGIN;
SELECT allowed, remaining FROM rate_limit_take('mem', 'tx', 1);
SAVEPOINT s;
SELECT allowed, remaining FROM rate_limit_take('mem', 'tx', 3);
ROLLBACK TO SAVEPOINT s;
SELECT allowed, remaining FROM rate_limit_take('mem', 'tx', 2);
SAVEPOINT t;
SELECT allowed, remaining FROM rate_limit_take('mem', 'tx', 1);
RELEASE SAVEPOINT t;
COMMIT;
SELECT allowed, remaining FROM rate_limit_check('mem', 'tx', 0);
-- An error aborts the transaction and gives back what it took.
BEGIN;
SELECT allowed, remaining FROM rate_limit_take('mem', 'tx', 1);
SELECT 1 / 0;
ROLLBACK;
SELECT allowed, remaining FROM rate_limit_check('mem', 'tx', 0);

-- Nothing is written to a table and no transaction id is taken; a table
-- policy, in the same check, writes a row and takes one.
SELECT (rate_limit_define('mem-table', 10, '1 second', 5)).storage;
CREATE FUNCTION pg_temp.heap_writes() RETURNS bigint LANGUAGE sql AS $$
    SELECT n_tup_ins + n_tup_upd + n_tup_del FROM pg_stat_xact_all_tables
     WHERE relid = 'ratelimit.buckets'::regclass $$;
BEGIN;
SELECT allowed FROM rate_limit_take('mem', 'heap', 1);
SELECT allowed FROM rate_limit_take('mem', 'heap', 1);
SELECT pg_temp.heap_writes() AS memory_heap_writes,
       txid_current_if_assigned() IS NULL AS memory_no_xid;
SELECT allowed FROM rate_limit_take('mem-table', 'heap', 1);
SELECT pg_temp.heap_writes() AS table_heap_writes,
       txid_current_if_assigned() IS NULL AS table_no_xid;
COMMIT;
SELECT count(*) AS memory_rows FROM ratelimit.buckets WHERE name = 'mem';

-- PREPARE TRANSACTION after a memory take is refused, and the refused
-- transaction's take is given back; one that only checked prepares.
BEGIN;
SELECT allowed, remaining FROM rate_limit_take('mem', 'prepared', 2);
PREPARE TRANSACTION 'rl_memory_take';
SELECT allowed, remaining FROM rate_limit_check('mem', 'prepared', 0);
SELECT count(*) FROM pg_prepared_xacts WHERE gid = 'rl_memory_take';
BEGIN;
SELECT allowed, remaining FROM rate_limit_check('mem', 'prepared', 2);
PREPARE TRANSACTION 'rl_memory_check';
COMMIT PREPARED 'rl_memory_check';

-- A read-only transaction may take: the memory engine writes no table.
BEGIN READ ONLY;
SELECT allowed, remaining FROM rate_limit_take('mem', 'ro', 1);
COMMIT;

-- Policy options behave as with the table: reservation, initial balance,
-- fixed windows, the penalty box, jitter.
SELECT (rate_limit_define('mem-opts', 1, '1 second', 2, initial => 1, max_reserved => 2,
                          penalty => '5 seconds', jitter => 0.5, storage => 'memory')).storage;
SELECT allowed, remaining, retry_after FROM rate_limit_take('mem-opts', 'a', 1);
SELECT allowed, remaining, retry_after FROM rate_limit_take('mem-opts', 'a', 2, '3 seconds');
SELECT allowed, remaining, retry_after FROM rate_limit_take('mem-opts', 'a', 1);
SELECT allowed, remaining, retry_after FROM rate_limit_take('mem-opts', 'b', 0);
SET ratelimit.fixed_clock = 2000000103;
SELECT allowed, remaining, retry_after FROM rate_limit_take('mem-opts', 'a', 1);
SELECT key, balance, tokens, blocked_until IS NOT NULL AS boxed FROM rate_limit_buckets('mem-opts');

-- A refund in the transaction of a take counts from when it was made:
-- the bucket is not refilled at the floor rate in between (as the table
-- engine: 10 tokens, then 1 a second).
SELECT (rate_limit_define('mem-floor', 1, '1 second', 100, floor_rate => 10, storage => 'memory')).storage;
SET ratelimit.fixed_clock = 2000000300;
SELECT allowed, remaining FROM rate_limit_take('mem-floor', 'k', 90);
BEGIN;
SELECT allowed, remaining FROM rate_limit_take('mem-floor', 'k', 10);
SELECT allowed, remaining FROM rate_limit_refund('mem-floor', 'k', 10);
SET ratelimit.fixed_clock = 2000000301;
COMMIT;
SELECT allowed, remaining FROM rate_limit_check('mem-floor', 'k', 0);
-- A first sighting rolled back is forgotten, also after penalty boxes of
-- the same transaction: the key starts afresh (at initial 0) later.
SELECT (rate_limit_define('mem-sighting', 1, '1 second', 100, initial => 0, penalty => '10 seconds',
                          storage => 'memory')).storage;
BEGIN;
SET LOCAL ratelimit.fixed_clock = 2000000400;
SELECT allowed, remaining FROM rate_limit_take('mem-sighting', 'k', 1);
SET LOCAL ratelimit.fixed_clock = 2000000415;
SELECT allowed, remaining FROM rate_limit_take('mem-sighting', 'k', 50);
ROLLBACK;
SET ratelimit.fixed_clock = 2000000500;
SELECT allowed, remaining FROM rate_limit_take('mem-sighting', 'k', 50);
-- A penalty box rolled back leaves the bucket as it was, refill included:
-- the same calls on a memory and a table policy, slowed down from 1 token
-- a second to 1 an hour after the rollback, grant the same.
SELECT p.name, (rate_limit_define(p.name, 1, '1 second', 10, penalty => '1 second',
                                  storage => p.storage)).storage
  FROM (VALUES ('mem-box-undo', 'memory'), ('table-box-undo', 'table')) AS p(name, storage);
SET ratelimit.fixed_clock = 2000000600;
SELECT p, allowed, remaining FROM unnest(ARRAY['mem-box-undo', 'table-box-undo']) AS p,
       rate_limit_take(p, 'k', 10);
SET ratelimit.fixed_clock = 2000000605;
BEGIN;
SELECT p, allowed, remaining FROM unnest(ARRAY['mem-box-undo', 'table-box-undo']) AS p,
       rate_limit_take(p, 'k', 10);
ROLLBACK;
SELECT p.name, (rate_limit_define(p.name, 1, '1 hour', 10, penalty => '1 second',
                                  storage => p.storage)).storage
  FROM (VALUES ('mem-box-undo', 'memory'), ('table-box-undo', 'table')) AS p(name, storage);
SELECT p, allowed, round(remaining::numeric, 6) AS remaining
  FROM unnest(ARRAY['mem-box-undo', 'table-box-undo']) AS p, rate_limit_take(p, 'k', 5);
-- A refund of nothing on a key never seen stores its first sighting, as
-- the table does: a key that starts with no tokens earns from then on.
SELECT p.name, (rate_limit_define(p.name, 1, '1 second', 10, initial => 0,
                                  storage => p.storage)).storage
  FROM (VALUES ('mem-refund-new', 'memory'), ('table-refund-new', 'table')) AS p(name, storage);
SELECT p, allowed, remaining FROM unnest(ARRAY['mem-refund-new', 'table-refund-new']) AS p,
       rate_limit_refund(p, 'k', 0);
SET ratelimit.fixed_clock = 2000000608;
SELECT p, allowed, remaining FROM unnest(ARRAY['mem-refund-new', 'table-refund-new']) AS p,
       rate_limit_check(p, 'k', 0);
-- Thousands of takes in one transaction, of two policies in turn, some in
-- subtransactions rolled back: each engine ends with the same balances.
CREATE FUNCTION pg_temp.many_takes(storage text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1..5000 LOOP
        BEGIN
            PERFORM rate_limit_take(storage || '-many-' || i % 2, 'k' || i % 5, 1);
            IF i % 7 = 0 THEN
                RAISE EXCEPTION USING ERRCODE = 'P0001';
            END IF;
        EXCEPTION WHEN raise_exception THEN NULL;
        END;
    END LOOP;
END $$;
SELECT count(*) FROM unnest(ARRAY['mem', 'table']) AS e, generate_series(0, 1) AS i,
       rate_limit_define(e || '-many-' || i, 0, '1 second', 1000 + i,
                         storage => CASE e WHEN 'mem' THEN 'memory' ELSE 'table' END);
SELECT pg_temp.many_takes('mem'), pg_temp.many_takes('table');
SELECT i, k, m.remaining AS memory, t.remaining AS table
  FROM generate_series(0, 1) AS i, generate_series(0, 4) AS k,
       rate_limit_check('mem-many-' || i, 'k' || k, 0) AS m,
       rate_limit_check('table-many-' || i, 'k' || k, 0) AS t
 ORDER BY i, k;
-- A penalty box on a fixed window (100 an hour, a minute's box): a take
-- the window can serve waits for the box's end, 59 s, not the hour; take,
-- check, a reservation and take_all agree, as with the table.
SET ratelimit.fixed_clock = 2000001610;
SELECT (rate_limit_define('mem-window-box', 100, '1 hour', fixed_window => true, window_start => '0 seconds',
                          max_reserved => 10, penalty => '1 minute', storage => 'memory')).storage;
SELECT allowed, remaining FROM rate_limit_take('mem-window-box', 'w', 95);
SELECT allowed, remaining, retry_after FROM rate_limit_take('mem-window-box', 'w', 6);
SET ratelimit.fixed_clock = 2000001611;
SELECT allowed, remaining, retry_after FROM rate_limit_take('mem-window-box', 'w', 1);
SELECT allowed, remaining, retry_after FROM rate_limit_check('mem-window-box', 'w', 1);
SELECT allowed, remaining, retry_after FROM rate_limit_take('mem-window-box', 'w', 8, '2 hours');
SELECT allowed, retry_after FROM rate_limit_take_all(ARRAY['mem-window-box'], ARRAY['w'], ARRAY[1]);
SELECT allowed, remaining, retry_after FROM rate_limit_take('mem-window-box', 'w', 6);
SET ratelimit.fixed_clock = 2000001670;
SELECT allowed, remaining FROM rate_limit_take('mem-window-box', 'w', 1);
SET ratelimit.fixed_clock = 2000000103;

-- All or nothing over memory policies; a mix of engines is refused.
SELECT (rate_limit_define('mem-b', 1, '1 second', 1, storage => 'memory')).storage;
SELECT allowed, binding_name, remaining FROM rate_limit_take_all(ARRAY['mem', 'mem-b'], ARRAY['all', 'all']);
SELECT allowed, binding_name, remaining FROM rate_limit_take_all(ARRAY['mem', 'mem-b'], ARRAY['all', 'all']);
SELECT allowed, remaining FROM rate_limit_check('mem', 'all', 0);
SELECT * FROM rate_limit_take_all(ARRAY['mem', 'mem-table'], ARRAY['all', 'all']);

-- A concurrency limit with storage 'memory' holds its places in the lock
-- table, as with the table (test/sql/native/concurrency_holds.sql), and is
-- taken all or nothing with memory buckets: a denial by the place takes no
-- token, a denial by the bucket holds no place.
SELECT name, storage, kind, burst FROM rate_limit_define_concurrency('mem-held', 1, storage => 'memory');
SELECT (rate_limit_define('mem-c', 1, '1 hour', 2, storage => 'memory')).storage;
BEGIN READ ONLY;
SELECT allowed, binding_name, remaining
  FROM rate_limit_take_all(ARRAY['mem-c', 'mem-held'], ARRAY['h', 'h']);
SELECT allowed, retry_after, binding_name, remaining
  FROM rate_limit_take_all(ARRAY['mem-c', 'mem-held'], ARRAY['h', 'h']);
SELECT allowed, remaining FROM rate_limit_check('mem-c', 'h', 0);
SELECT allowed, remaining, retry_after FROM rate_limit_take('mem-held', 'h');
COMMIT;
BEGIN;
SELECT allowed, binding_name, remaining
  FROM rate_limit_take_all(ARRAY['mem-c', 'mem-held'], ARRAY['h', 'h']);
ROLLBACK;
BEGIN;
SELECT allowed, remaining FROM rate_limit_take('mem-c', 'h');
SELECT allowed, retry_after > 0 AS waits, binding_name, remaining
  FROM rate_limit_take_all(ARRAY['mem-c', 'mem-held'], ARRAY['h', 'h']);
SELECT allowed, remaining FROM rate_limit_check('mem-held', 'h');
COMMIT;
SELECT * FROM rate_limit_take_all(ARRAY['mem-held', 'mem-table'], ARRAY['h', 'h']);
BEGIN;
SELECT * FROM rate_limit_take_all(ARRAY['mem-held', 'mem-table'], ARRAY['h', 'h']);
ROLLBACK;
SELECT rate_limit_drop('mem-held'), rate_limit_drop('mem-c');

-- Listing, reset, purge and counters cover memory buckets.
SELECT key, shard, balance, tokens FROM rate_limit_buckets('mem') ORDER BY key;
-- A reset, like a refund, raises a balance: it takes effect when its
-- transaction commits, and a rollback leaves the bucket as it was.
SELECT allowed, remaining FROM rate_limit_take('mem', 'k', 3);
BEGIN;
SELECT rate_limit_reset('mem', 'k');
SELECT allowed, remaining FROM rate_limit_check('mem', 'k', 0);
ROLLBACK;
SELECT allowed, remaining FROM rate_limit_check('mem', 'k', 0);
BEGIN;
SELECT allowed, remaining FROM rate_limit_refund('mem', 'k', 1);
SELECT allowed, remaining FROM rate_limit_check('mem', 'k', 0);
COMMIT;
SELECT allowed, remaining FROM rate_limit_check('mem', 'k', 0);
SELECT rate_limit_reset('mem', 'k');
SELECT allowed, remaining FROM rate_limit_check('mem', 'k', 0);
SELECT rate_limit_reset('mem', 'k');
SET ratelimit.fixed_clock = 2000000200;
SELECT allowed FROM rate_limit_take('mem', 'young', 1);
CALL rate_limit_purge('mem');
SELECT key, balance FROM rate_limit_buckets('mem');
CALL rate_limit_reset_limit('mem');
SELECT count(*) FROM rate_limit_buckets('mem');

-- A sharded memory policy is refused; so is an unknown storage.
SELECT rate_limit_define('mem-bad', 1, shards => 2, storage => 'memory');
SELECT rate_limit_define('mem-bad', 1, storage => 'disk');
SELECT rate_limit_define('mem-bad', 1, storage => NULL);

--
-- The differential test: random sequences of calls under a fixed clock,
-- each call in a transaction of its own, run once with a policy in the
-- table and once with the same policy (the same name, so the same jitter
-- and window phases) in memory.  Every answer must be the same.
--
CREATE TEMP TABLE answers (options text, engine text, step int, answer text);
CREATE PROCEDURE pg_temp.run_sequence(options text, engine text, steps int, seed bigint)
LANGUAGE plpgsql AS $$
DECLARE
    state bigint := seed;
    clock float8 := 2100000000;
    op int;
    k text;
    c float8;
    answer text;
    policy text := 'diff-' || options;
BEGIN
    FOR step IN 1..steps LOOP
        state := (state * 1103515245 + 12345) % 2147483648;
        clock := clock + (state % 900) / 1000.0;
        PERFORM set_config('ratelimit.fixed_clock', clock::text, false);
        state := (state * 1103515245 + 12345) % 2147483648;
        k := 'k' || (state / 7 % 3);
        op := state / 31 % 12;
        c := (state / 997 % 4)::float8;
        IF op <= 4 THEN
            SELECT d::text INTO answer FROM rate_limit_take(policy, k, c) AS d;
        ELSIF op = 5 THEN
            SELECT d::text INTO answer FROM rate_limit_check(policy, k, c) AS d;
        ELSIF op = 6 THEN
            SELECT d::text INTO answer FROM rate_limit_take(policy, k, c, '3 seconds') AS d;
        ELSIF op = 7 THEN
            SELECT d::text INTO answer FROM rate_limit_refund(policy, k, c) AS d;
        ELSIF op = 8 THEN
            -- A take rolled back with its subtransaction.
            BEGIN
                SELECT d::text INTO answer FROM rate_limit_take(policy, k, c) AS d;
                RAISE EXCEPTION USING ERRCODE = 'P0001';
            EXCEPTION WHEN raise_exception THEN
                answer := 'rolled back: ' || answer;
            END;
        ELSIF op <= 10 THEN
            SELECT format('%s %s %s %s', a.allowed, a.retry_after, a.binding_key, a.remaining)
              INTO answer
              FROM rate_limit_take_all(ARRAY[policy, policy], ARRAY[k, 'k' || ((state / 7 + 1) % 3)],
                                       ARRAY[c, 1]) AS a;
        ELSE
            SELECT rate_limit_reset(policy, k)::text INTO answer;
        END IF;
        INSERT INTO answers VALUES (options, engine, step, format('%s %s %s %s', op, k, c, answer));
        COMMIT;
    END LOOP;
END
$$;
CREATE PROCEDURE pg_temp.differential(set_name text, definition text, seed bigint)
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('SELECT rate_limit_define(%L, %s)', 'diff-' || set_name, definition);
    COMMIT;
    CALL pg_temp.run_sequence(set_name, 'table', 400, seed);
    EXECUTE format('SELECT rate_limit_define(%L, %s, storage => %L)', 'diff-' || set_name,
                   definition, 'memory');
    COMMIT;
    CALL pg_temp.run_sequence(set_name, 'memory', 400, seed);
END
$$;
CALL pg_temp.differential('plain', '2, ''1 second'', 4', 11);
CALL pg_temp.differential('reserve', '2, ''1 second'', 4, max_reserved => 6', 12);
CALL pg_temp.differential('initial', '3, ''1 second'', 8, initial => 1', 13);
CALL pg_temp.differential('window', '6, ''2 seconds'', 6, fixed_window => true, window_start => ''0 seconds''', 14);
CALL pg_temp.differential('window-spread', '4, ''3 seconds'', 5, fixed_window => true, max_reserved => 2', 15);
CALL pg_temp.differential('floor', '20, ''1 minute'', 5, floor_rate => 60', 16);
CALL pg_temp.differential('jitter', '2, ''1 second'', 3, jitter => 0.5', 17);
CALL pg_temp.differential('penalty', '4, ''1 second'', 4, penalty => ''2 seconds''', 18);
CALL pg_temp.differential('window-penalty', '6, ''2 seconds'', 6, fixed_window => true, penalty => ''3 seconds''', 19);
RESET ratelimit.fixed_clock;
-- Per set of options: the steps, the single takes and checks granted and
-- denied, and the answers that differ.
SELECT t.options, count(*) AS steps,
       count(*) FILTER (WHERE t.answer ~ '^[0-9]+ k[0-9] [0-9]+ \(t,') AS grants,
       count(*) FILTER (WHERE t.answer ~ '^[0-9]+ k[0-9] [0-9]+ \(f,') AS denials,
       count(*) FILTER (WHERE t.answer IS DISTINCT FROM m.answer) AS differences
  FROM answers t LEFT JOIN answers m
    ON m.options = t.options AND m.step = t.step AND m.engine = 'memory'
 WHERE t.engine = 'table'
 GROUP BY t.options ORDER BY t.options;
-- A difference, when there is one, shows here.
SELECT t.options, t.step, t.answer AS table_answer, m.answer AS memory_answer
  FROM answers t JOIN answers m ON m.options = t.options AND m.step = t.step AND m.engine = 'memory'
 WHERE t.engine = 'table' AND t.answer IS DISTINCT FROM m.answer
 ORDER BY 1, 2 LIMIT 5;

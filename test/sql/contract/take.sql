--
-- rate_limit_take, rate_limit_check and rate_limit_reset: every column, with
-- a fixed clock so that every number is exact.
--
SET ratelimit.fixed_clock = 1000;

-- A new key starts full: burst 5, then denials that change nothing.
SELECT g, r.* FROM generate_series(1, 7) AS g,
    LATERAL rate_limit_take('api', 'user:1', 1 + 0 * g, 2, 5) AS r;
SELECT name, key, tokens, last_refill = to_timestamp(1000) AS stamped_now
    FROM ratelimit.buckets WHERE name = 'api';

-- retry_after is exact: 0.25 s later half a token is back (fractions are
-- kept), and 0.5 s after the denial the same call succeeds.
SET ratelimit.fixed_clock = 1000.25;
SELECT * FROM rate_limit_take('api', 'user:1', 1, 2, 5);
SET ratelimit.fixed_clock = 1000.5;
SELECT * FROM rate_limit_take('api', 'user:1', 1, 2, 5);
SELECT tokens, last_refill = to_timestamp(1000.5) AS stamped_now
    FROM ratelimit.buckets WHERE name = 'api' AND key = 'user:1';

-- Fractional tokens carry over: rate 4/s refills half a token every 0.125 s;
-- a quarter left over adds to the next refill instead of being lost.
SELECT * FROM rate_limit_take('frac', 'k', 1, 4, 1);
SELECT * FROM rate_limit_take('frac', 'k', 0.5, 4, 1);
SET ratelimit.fixed_clock = 1000.625;
SELECT * FROM rate_limit_take('frac', 'k', 0.25, 4, 1);
SET ratelimit.fixed_clock = 1000.6875;
SELECT * FROM rate_limit_take('frac', 'k', 0.5, 4, 1);
SELECT tokens FROM ratelimit.buckets WHERE name = 'frac';

-- Refill stops at burst; reset_after says when the bucket is full.
SET ratelimit.fixed_clock = 2000;
SELECT * FROM rate_limit_take('api', 'user:1', 2, 2, 5);

-- cost 0 looks without consuming or writing; check answers like take
-- without consuming; a check on an unknown key creates nothing.
SELECT * FROM rate_limit_take('api', 'user:1', 0, 2, 5);
SELECT * FROM rate_limit_check('api', 'user:1', 3, 2, 5);
SELECT * FROM rate_limit_check('api', 'user:1', 4, 2, 5);
SELECT tokens FROM ratelimit.buckets WHERE name = 'api' AND key = 'user:1';
SELECT * FROM rate_limit_check('api', 'never-seen', 1, 2, 5);
SELECT count(*) FROM ratelimit.buckets WHERE key = 'never-seen';

-- rate 0 never refills: denials say Infinity.
SELECT * FROM rate_limit_take('fixed', 'k', 3, 0, 3);
SELECT * FROM rate_limit_take('fixed', 'k', 1, 0, 3);

-- Keys and names are independent; '' is a key like any other (a global limit).
SELECT * FROM rate_limit_take('api', 'user:2', 5, 2, 5);
SELECT * FROM rate_limit_take('api', '', 5, 2, 5);
SELECT * FROM rate_limit_take('other', 'user:1', 5, 2, 5);

-- A lower burst than the stored tokens caps them at once.
SELECT * FROM rate_limit_take('shrink', 'k', 1, 1, 100);
SELECT * FROM rate_limit_take('shrink', 'k', 1, 1, 10);

-- Reservation: the bucket may go negative; retry_after says when the reserved
-- work may start.  Beyond max_reserved it is denied and nothing changes.
SELECT * FROM rate_limit_take('llm', 'k', 4, 2, 4, reserve => true, max_reserved => 6);
SELECT * FROM rate_limit_take('llm', 'k', 3, 2, 4, reserve => true, max_reserved => 6);
SELECT * FROM rate_limit_take('llm', 'k', 3, 2, 4, reserve => true, max_reserved => 6);
SELECT * FROM rate_limit_take('llm', 'k', 4, 2, 4, reserve => true, max_reserved => 6);
SELECT tokens FROM ratelimit.buckets WHERE name = 'llm';
-- without reserve, the debt must be repaid first
SELECT * FROM rate_limit_take('llm', 'k', 1, 2, 4);
SET ratelimit.fixed_clock = 2002;
SELECT * FROM rate_limit_take('llm', 'k', 1, 2, 4);
-- reserve without a cap: any debt, cost may exceed burst
SELECT * FROM rate_limit_take('llm', 'nocap', 100, 10, 4, reserve => true);
-- with rate 0 a debt could never be repaid: denied, never
SELECT * FROM rate_limit_take('llm', 'norate', 5, 0, 4, reserve => true);

-- The clock stepping back refills nothing and never moves the stamp back;
-- waiting times count from the stored stamp.
SET ratelimit.fixed_clock = 3000;
SELECT * FROM rate_limit_take('clock', 'k', 10, 1, 10);
SET ratelimit.fixed_clock = 2990;
SELECT * FROM rate_limit_take('clock', 'k', 1, 1, 10);
SELECT last_refill = to_timestamp(3000) AS stamp_kept FROM ratelimit.buckets WHERE name = 'clock';
SET ratelimit.fixed_clock = 3001;
SELECT * FROM rate_limit_take('clock', 'k', 1, 1, 10);
-- a forward jump of a year refills at most to burst
SET ratelimit.fixed_clock = 31539000;
SELECT * FROM rate_limit_take('clock', 'k', 1, 1, 10);

-- Several calls in one statement and in one transaction see each other.
SELECT rate_limit_take('stmt', 'k', 1, 0, 3) AS a, rate_limit_take('stmt', 'k', 1, 0, 3) AS b,
       rate_limit_take('stmt', 'k', 1, 0, 3) AS c, rate_limit_take('stmt', 'k', 1, 0, 3) AS d;
BEGIN;
SELECT allowed, remaining FROM rate_limit_take('tx', 'k', 1, 0, 2);
SELECT allowed, remaining FROM rate_limit_take('tx', 'k', 1, 0, 2);
SELECT allowed, remaining FROM rate_limit_take('tx', 'k', 1, 0, 2);
COMMIT;

-- Consumption belongs to the caller's transaction: ROLLBACK refunds, and so
-- does ROLLBACK TO SAVEPOINT, for updates and for a key's first insert.
SELECT allowed, remaining FROM rate_limit_take('refund', 'k', 1, 0, 2);
BEGIN;
SELECT allowed, remaining FROM rate_limit_take('refund', 'k', 1, 0, 2);
ROLLBACK;
BEGIN;
SAVEPOINT a;
SELECT allowed, remaining FROM rate_limit_take('refund', 'k', 1, 0, 2);
SELECT allowed, remaining FROM rate_limit_take('refund', 'new', 1, 0, 2);
ROLLBACK TO SAVEPOINT a;
SELECT allowed, remaining FROM rate_limit_check('refund', 'k', 1, 0, 2);
SELECT count(*) AS new_rows FROM ratelimit.buckets WHERE name = 'refund' AND key = 'new';
SELECT allowed, remaining FROM rate_limit_take('refund', 'k', 1, 0, 2);
COMMIT;
SELECT allowed, remaining FROM rate_limit_check('refund', 'k', 1, 0, 2);

-- A failed statement after a take rolls it back with the transaction.
BEGIN;
SELECT allowed FROM rate_limit_take('abort', 'k', 1, 0, 1);
SELECT 1 / 0;
ROLLBACK;
SELECT allowed, remaining FROM rate_limit_take('abort', 'k', 1, 0, 1);

-- reset forgets the bucket: it starts full again.  True only if it existed.
SELECT rate_limit_reset('api', 'user:1');
SELECT rate_limit_reset('api', 'user:1');
SELECT * FROM rate_limit_take('api', 'user:1', 1, 2, 5);
-- reset and take in one transaction, then roll back: the old state returns
BEGIN;
SELECT rate_limit_reset('fixed', 'k');
SELECT allowed, remaining FROM rate_limit_take('fixed', 'k', 1, 0, 3);
ROLLBACK;
SELECT allowed, remaining FROM rate_limit_check('fixed', 'k', 1, 0, 3);

-- Unicode and long keys are fine up to the limit (1024 bytes).
SELECT allowed, remaining FROM rate_limit_take('api', 'ключ-🔑', 1, 2, 5);
SELECT allowed, remaining FROM rate_limit_take('api', repeat('x', 1024), 1, 2, 5);
SELECT allowed, remaining FROM rate_limit_take(repeat('n', 256), 'k', 1, 2, 5);

RESET ratelimit.fixed_clock;
-- With the server's clock: a fresh key is granted and stamped near now.
SELECT allowed, remaining FROM rate_limit_take('live', 'k', 1, 1, 5);
SELECT abs(extract(epoch FROM clock_timestamp() - last_refill)) < 60 AS near_now
    FROM ratelimit.buckets WHERE name = 'live';

-- Creating many keys in one transaction holds no lock per key: the advisory
-- lock around a first insert is released once the row exists.
BEGIN;
SELECT count(*) FILTER (WHERE r.allowed) AS granted
    FROM generate_series(1, 20000) AS g, LATERAL rate_limit_take('many', 'k' || g, 1, 0, 1) AS r;
SELECT count(*) AS advisory_locks_held FROM pg_locks
    WHERE locktype = 'advisory' AND objsubid = 21068 AND pid = pg_backend_pid();
COMMIT;
SELECT count(*) FROM ratelimit.buckets WHERE name = 'many';

-- A denial writes nothing: no transaction id is assigned, the row version is
-- the same one (same ctid and xmin), and the backend's counters of the table,
-- read inside the transaction before and after, count no row inserted,
-- updated or deleted (before 15 those counters also hold earlier
-- transactions' rows not yet reported, so it is the difference that counts).
-- (The table that holds bucket state: ratelimit.buckets, or rl_buckets of
-- the portable limiter.)
SELECT coalesce(to_regclass('rl_buckets'), 'ratelimit.buckets'::regclass) AS state_table \gset
SELECT allowed FROM rate_limit_take('deny', 'k', 1, 0, 1);
SELECT ctid AS ctid_before, xmin AS xmin_before FROM :state_table WHERE name = 'deny' \gset
BEGIN;
SELECT n_tup_ins + n_tup_upd + n_tup_del AS rows_before FROM pg_stat_xact_user_tables
    WHERE relid = :'state_table'::regclass \gset
SELECT allowed, remaining FROM rate_limit_take('deny', 'k', 1, 0, 1);
SELECT allowed, remaining FROM rate_limit_take('deny', 'k', 1, 0, 1, reserve => true);
SELECT allowed, remaining FROM rate_limit_check('deny', 'k', 1, 0, 1);
SELECT allowed, remaining FROM rate_limit_take('deny', 'k', 0, 0, 1);
SELECT txid_current_if_assigned() IS NULL AS no_transaction_id;
SELECT n_tup_ins + n_tup_upd + n_tup_del - :rows_before AS rows_written
    FROM pg_stat_xact_user_tables WHERE relid = :'state_table'::regclass;
COMMIT;
SELECT ctid = :'ctid_before' AND xmin = :'xmin_before' AS same_row_version
    FROM :state_table WHERE name = 'deny';
-- whereas a grant does write (the check above can fail)
BEGIN;
SELECT n_tup_ins + n_tup_upd + n_tup_del AS rows_before FROM pg_stat_xact_user_tables
    WHERE relid = :'state_table'::regclass \gset
SELECT allowed FROM rate_limit_take('deny', 'granted', 1, 0, 1);
SELECT txid_current_if_assigned() IS NOT NULL AS transaction_id_assigned;
SELECT n_tup_ins + n_tup_upd + n_tup_del - :rows_before AS rows_written
    FROM pg_stat_xact_user_tables WHERE relid = :'state_table'::regclass;
COMMIT;

--
-- The worked examples of README.md and docs/examples.md, run as written (with a fixed clock).
--
SET ratelimit.fixed_clock = 1000;

-- Example 1: a per-user API limit with tiers, and its HTTP headers.
SELECT name, rate, per, burst FROM rate_limit_define('api-free', 60, '1 minute', burst => 10);
SELECT name, rate, per, burst FROM rate_limit_define('api-pro', 600, '1 minute', burst => 100);
CREATE TEMP TABLE accounts (user_id int PRIMARY KEY, tier text NOT NULL);
INSERT INTO accounts VALUES (1, 'api-free'), (2, 'api-pro');
-- per request (here a batch endpoint costing 10), twice for each user:
PREPARE request(int) AS
SELECT d.allowed, d.retry_after, h.ratelimit_policy, h.ratelimit, h.retry_after AS retry_after_header
  FROM accounts AS a,
       LATERAL rate_limit_take(a.tier, 'user:' || a.user_id, 10) AS d,
       LATERAL rate_limit_headers(d) AS h
 WHERE a.user_id = $1;
EXECUTE request(1);
EXECUTE request(1);
EXECUTE request(2);
EXECUTE request(2);

-- Example 2: failed logins.  Five failures per 15 minutes per account; take
-- before verifying the password, keep the take only if it was wrong.
SELECT name, rate, per, burst FROM rate_limit_define('login-failures', 5, '15 minutes');
-- a wrong password: the failure counts
BEGIN;
SELECT allowed, retry_after FROM rate_limit_take('login-failures', 'alice@example.com');
COMMIT;
-- a right password: a success is not a failure
BEGIN;
SELECT allowed, retry_after FROM rate_limit_take('login-failures', 'alice@example.com');
ROLLBACK;
-- a right password, when the login commits other work on success
CREATE TEMP TABLE sessions (account text NOT NULL);
BEGIN;
SAVEPOINT attempt;
SELECT allowed, retry_after FROM rate_limit_take('login-failures', 'alice@example.com');
ROLLBACK TO SAVEPOINT attempt;
INSERT INTO sessions VALUES ('alice@example.com');
COMMIT;
SELECT count(*) AS sessions FROM sessions;
-- only the failure was counted (cost 0: look without taking)
SELECT remaining FROM rate_limit_check('login-failures', 'alice@example.com', 0);
-- four more wrong passwords, each in a login transaction of its own
DO $$
BEGIN
    FOR attempt IN 1 .. 4 LOOP
        PERFORM rate_limit_take('login-failures', 'alice@example.com');
        COMMIT;
    END LOOP;
END
$$;
SELECT remaining FROM rate_limit_check('login-failures', 'alice@example.com', 0);
-- the next attempt is refused, whatever the password, for retry_after seconds
BEGIN;
SELECT allowed, retry_after FROM rate_limit_take('login-failures', 'alice@example.com');
ROLLBACK;
SET ratelimit.fixed_clock = 1180;   -- 180 s later, one failure has expired
BEGIN;
SELECT allowed, retry_after FROM rate_limit_take('login-failures', 'alice@example.com');
ROLLBACK;

-- Example 3: an LLM token budget of 100,000 tokens an hour, at most 20,000
-- at once, up to 10,000 ahead: reserve the worst case before the call,
-- refund what it did not use.
SELECT name, rate, per, burst, max_reserved
  FROM rate_limit_define('llm', 100000, '1 hour', burst => 20000, max_reserved => 10000);
-- before the call (8,000 tokens at most); it may start after retry_after:
SELECT allowed, remaining, retry_after
  FROM rate_limit_take('llm', 'team:7', 8000, max_wait => '5 minutes');
-- after the call: it used 5,120 tokens
SELECT allowed, remaining, retry_after FROM rate_limit_refund('llm', 'team:7', 8000 - 5120);
-- a burst of calls: the second starts at once, the third waits 40 s for
-- refill; the fourth would wait longer than the 5 minutes it accepts and is
-- denied, changing nothing (retry_after: when it would start within them);
-- so is a smaller call accepting 1 minute, and one that would owe more than
-- max_reserved
SELECT allowed, remaining, retry_after
  FROM rate_limit_take('llm', 'team:7', 8000, max_wait => '5 minutes');
SELECT allowed, remaining, retry_after
  FROM rate_limit_take('llm', 'team:7', 8000, max_wait => '5 minutes');
SELECT allowed, remaining, retry_after
  FROM rate_limit_take('llm', 'team:7', 8000, max_wait => '5 minutes');
SELECT allowed, remaining, retry_after
  FROM rate_limit_take('llm', 'team:7', 1000, max_wait => '1 minute');
SELECT allowed, remaining, retry_after
  FROM rate_limit_take('llm', 'team:7', 12000, max_wait => '1 day');
-- without max_wait a call takes only what the bucket holds
SELECT allowed, remaining, retry_after FROM rate_limit_take('llm', 'team:7', 8000);

-- Example 4: a global sign-up limit: 100 an hour for the whole service, in
-- bursts of up to 20, the one key split over 4 rows.
SELECT name, rate, per, burst, shards
  FROM rate_limit_define('signups', 100, '1 hour', burst => 20, shards => 4);
-- per sign-up (remaining: at least 9 left, what the two shards it looked at hold):
SELECT allowed, remaining, retry_after FROM rate_limit_take('signups', '');
-- however the shards are picked, exactly the rest of the burst is granted
SELECT count(*) FILTER (WHERE d.allowed) AS granted
  FROM generate_series(1, 40) AS g, LATERAL rate_limit_take('signups', '', 1 + 0 * g) AS d;
SELECT sum(tokens) >= 0 AS never_negative FROM ratelimit.buckets WHERE name = 'signups';

-- Example 5: several limits at once, all or none, with one RateLimit list.
SELECT name FROM rate_limit_define('req', 100, '1 minute', burst => 20);
SELECT name FROM rate_limit_define('bytes', 1048576, '1 minute');
SELECT name FROM rate_limit_define('global', 10000, '1 minute', fixed_window => true);
SELECT d.allowed, d.binding_name, h.ratelimit
  FROM rate_limit_take_all(ARRAY['req', 'bytes', 'global'],
                           ARRAY['client:9', 'client:9', ''],
                           ARRAY[1, 4096, 1]) AS d,
       LATERAL rate_limit_headers(d) AS h;
SELECT h.ratelimit_policy
  FROM rate_limit_take_all(ARRAY['req', 'bytes', 'global'],
                           ARRAY['client:9', 'client:9', ''],
                           ARRAY[1, 4096, 1]) AS d,
       LATERAL rate_limit_headers(d) AS h;

-- Example 6: rolling out a limit in report-only mode.  (rate_limit_stats
-- is the native extension's, with the library preloaded before 17: its
-- counts are checked in native/stats.)
SELECT name, enforce FROM rate_limit_define('search', 2, '1 second', burst => 2, enforce => false);
SELECT d.allowed, d.remaining, d.retry_after, h.ratelimit, h.retry_after AS retry_after_header
  FROM rate_limit_take('search', 'client:9') AS d, LATERAL rate_limit_headers(d) AS h;
SELECT d.allowed, d.remaining, d.retry_after, h.ratelimit, h.retry_after AS retry_after_header
  FROM rate_limit_take('search', 'client:9') AS d, LATERAL rate_limit_headers(d) AS h;
SELECT d.allowed, d.remaining, d.retry_after, h.ratelimit, h.retry_after AS retry_after_header
  FROM rate_limit_take('search', 'client:9') AS d, LATERAL rate_limit_headers(d) AS h;
SELECT name, enforce FROM rate_limit_define('search', 2, '1 second', burst => 2);
SELECT d.allowed, d.remaining, d.retry_after, h.ratelimit, h.retry_after AS retry_after_header
  FROM rate_limit_take('search', 'client:9') AS d, LATERAL rate_limit_headers(d) AS h;

-- Example 7: "2 a minute and at most 1 at once", all or nothing (the
-- concurrency limits' example).
SELECT name FROM rate_limit_define('exports-rate', 2, '1 minute');
SELECT name FROM rate_limit_define_concurrency('exports-held', 1);        -- max_held
BEGIN;
SELECT allowed, binding_name FROM rate_limit_take_all(ARRAY['exports-rate', 'exports-held'],
                                                      ARRAY['t1', 't1']);
-- ... the export, in this transaction: the place is held until COMMIT or ROLLBACK
SELECT allowed, retry_after, binding_name
  FROM rate_limit_take_all(ARRAY['exports-rate', 'exports-held'], ARRAY['t1', 't1']);
COMMIT;
-- (no token was taken by the denial; the place is free again)
SELECT (rate_limit_check('exports-rate', 't1', 0)).remaining AS tokens_left,
       (rate_limit_check('exports-held', 't1', 0)).remaining AS places_free;

-- Example 8: at most N in any window W.  "10 a minute" as a bucket grants
-- 19 in under a minute; 5 a minute with a burst of 5 (5 + 5 <= 10) never
-- more than 10 in any minute.
SET ratelimit.fixed_clock = 5000;
SELECT name FROM rate_limit_define('ten-a-minute', 10, '1 minute');
SELECT count(*) FILTER (WHERE allowed) AS at_once
  FROM generate_series(1, 20) AS g, LATERAL rate_limit_take('ten-a-minute', 'client:9', 1 + 0 * g);
SET ratelimit.fixed_clock = 5059;
SELECT count(*) FILTER (WHERE allowed) AS within_59_seconds
  FROM generate_series(1, 20) AS g, LATERAL rate_limit_take('ten-a-minute', 'client:9', 1 + 0 * g);
SET ratelimit.fixed_clock = 6000;
SELECT name FROM rate_limit_define('at-most-ten-a-minute', 5, '1 minute', burst => 5);
SELECT count(*) FILTER (WHERE allowed) AS at_once
  FROM generate_series(1, 20) AS g, LATERAL rate_limit_take('at-most-ten-a-minute', 'client:9', 1 + 0 * g);
SET ratelimit.fixed_clock = 6059;
SELECT count(*) FILTER (WHERE allowed) AS within_59_seconds
  FROM generate_series(1, 20) AS g, LATERAL rate_limit_take('at-most-ten-a-minute', 'client:9', 1 + 0 * g);
SET ratelimit.fixed_clock = 6061;
SELECT count(*) FILTER (WHERE allowed) AS at_61_seconds
  FROM generate_series(1, 20) AS g, LATERAL rate_limit_take('at-most-ten-a-minute', 'client:9', 1 + 0 * g);

-- Example 9: leases, for work after the transaction (the leases' example).
SET ratelimit.fixed_clock = 7000;
SELECT name, lease FROM rate_limit_define_concurrency('llm-calls', 2, lease => '30 seconds');
CREATE TEMP TABLE jobs (id int PRIMARY KEY, lease uuid);
-- per request, in its transaction: a place for the call, kept with the job
INSERT INTO jobs SELECT 1, lease FROM rate_limit_lease('llm-calls', 'team:7');
INSERT INTO jobs SELECT 2, lease FROM rate_limit_lease('llm-calls', 'team:7');
SELECT allowed, remaining, retry_after FROM rate_limit_lease('llm-calls', 'team:7');
--  f | 0 | 30       (both places leased: the first comes back in 30 s at the latest)
-- ... the calls, after COMMIT, in workers; job 1's worker then releases its place:
SELECT rate_limit_release(lease) FROM jobs WHERE id = 1;     -- t (f once released or expired)
SELECT allowed, remaining FROM rate_limit_check('llm-calls', 'team:7');       -- t | 0
-- job 2's worker died: its place comes back when its lease expires, with no sweeper
SET ratelimit.fixed_clock = 7030;
SELECT allowed, remaining FROM rate_limit_check('llm-calls', 'team:7', 0);
-- Example 10: at most N in any window W, as a sliding window: exact in each
-- aligned minute, approximate across two.  Ten at the last second of a
-- minute, then five more halfway through the next: 15 within 51 seconds.
SET ratelimit.fixed_clock = 6159;
SELECT name FROM rate_limit_define_sliding_window('ten-in-a-minute', 10, '1 minute');
SELECT count(*) FILTER (WHERE allowed) AS at_once
  FROM generate_series(1, 20) AS g, LATERAL rate_limit_take('ten-in-a-minute', 'client:9', 1 + 0 * g);
SET ratelimit.fixed_clock = 6210;
SELECT count(*) FILTER (WHERE allowed) AS halfway_through_the_next_minute
  FROM generate_series(1, 20) AS g, LATERAL rate_limit_take('ten-in-a-minute', 'client:9', 1 + 0 * g);
SELECT allowed, remaining, retry_after, reset_after FROM rate_limit_take('ten-in-a-minute', 'client:9');
SET ratelimit.fixed_clock = 1180;

-- The headers example of the reference.
SELECT name FROM rate_limit_define('default', 100, '1 minute');
SELECT h.*
  FROM rate_limit_take('default', 'client:9', 50) AS d, LATERAL rate_limit_headers(d) AS h;

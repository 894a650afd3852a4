--
-- The README's worked examples, run as written (with a fixed clock).
--
SET ratelimit.fixed_clock = 1000;

-- Example 1: a per-user API limit with tiers.
SELECT rate_limit_define('api-free', 60, '1 minute', 10);
SELECT rate_limit_define('api-pro', 600, '1 minute', 100);
CREATE TEMP TABLE accounts (user_id int PRIMARY KEY, tier text NOT NULL);
INSERT INTO accounts VALUES (1, 'api-free'), (2, 'api-pro');
-- per request:
SELECT a.user_id, d.allowed, d.remaining, d.retry_after
  FROM accounts AS a, LATERAL rate_limit_take(a.tier, 'user:' || a.user_id, 10) AS d
 ORDER BY a.user_id;
SELECT a.user_id, d.allowed, d.remaining, d.retry_after
  FROM accounts AS a, LATERAL rate_limit_take(a.tier, 'user:' || a.user_id, 10) AS d
 ORDER BY a.user_id;

-- Example 2: failed logins.  Five failures per 15 minutes per account; take
-- before verifying the password, keep the take only if it was wrong.
SELECT rate_limit_define('login-failures', 5, '15 minutes');
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
-- at once: reserve the worst case before the call, refund what it did not use.
-- before the call (8,000 tokens at most); it may start after retry_after:
SELECT allowed, remaining, retry_after
  FROM rate_limit_take('llm', 'team:7', 8000, 100000.0 / 3600, 20000,
                       reserve => true, max_reserved => 10000);
-- after the call: it used 5,120 tokens
SELECT allowed, remaining, retry_after
  FROM rate_limit_refund('llm', 'team:7', 8000 - 5120, 100000.0 / 3600, 20000);
-- a burst of calls: the second waits 40 s for refill and the third 328 s;
-- the fourth would owe more than max_reserved and is denied, changing nothing
SELECT allowed, remaining, retry_after
  FROM rate_limit_take('llm', 'team:7', 8000, 100000.0 / 3600, 20000,
                       reserve => true, max_reserved => 10000);
SELECT allowed, remaining, retry_after
  FROM rate_limit_take('llm', 'team:7', 8000, 100000.0 / 3600, 20000,
                       reserve => true, max_reserved => 10000);
SELECT allowed, remaining, retry_after
  FROM rate_limit_take('llm', 'team:7', 8000, 100000.0 / 3600, 20000,
                       reserve => true, max_reserved => 10000);
SELECT allowed, remaining, retry_after
  FROM rate_limit_take('llm', 'team:7', 8000, 100000.0 / 3600, 20000,
                       reserve => true, max_reserved => 10000);

-- Example 4: a global sign-up limit: 100 an hour for the whole service, in
-- bursts of up to 20, the one key split over 4 rows.
SELECT rate_limit_define('signups', 100, '1 hour', 20, shards => 4);
-- per sign-up (remaining: at least 9 left, what the two shards it looked at hold):
SELECT allowed, remaining, retry_after FROM rate_limit_take('signups', '');
-- however the shards are picked, exactly the rest of the burst is granted
SELECT count(*) FILTER (WHERE d.allowed) AS granted
  FROM generate_series(1, 40) AS g, LATERAL rate_limit_take('signups', '', 1 + 0 * g) AS d;
SELECT sum(tokens) >= 0 AS never_negative FROM ratelimit.buckets WHERE name = 'signups';

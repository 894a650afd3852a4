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

-- Example 2: failed logins, forgiven on success.  Five failures per 15
-- minutes per account; a successful login resets the counter.
SELECT rate_limit_define('login-failures', 5, '15 minutes');
-- before checking the password:
SELECT allowed FROM rate_limit_check('login-failures', 'alice@example.com');
-- after each wrong password (five of them):
SELECT allowed, remaining FROM rate_limit_take('login-failures', 'alice@example.com');
SELECT allowed, remaining FROM rate_limit_take('login-failures', 'alice@example.com');
SELECT allowed, remaining FROM rate_limit_take('login-failures', 'alice@example.com');
SELECT allowed, remaining FROM rate_limit_take('login-failures', 'alice@example.com');
SELECT allowed, remaining FROM rate_limit_take('login-failures', 'alice@example.com');
SELECT allowed, retry_after FROM rate_limit_check('login-failures', 'alice@example.com');
-- after a right password (a role granted EXECUTE on rate_limit_reset):
SELECT rate_limit_reset('login-failures', 'alice@example.com');
SELECT allowed, remaining FROM rate_limit_check('login-failures', 'alice@example.com');

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
-- per sign-up (the first sees two full shards of 5: 4 + 5 of them, times 2):
SELECT allowed, remaining, retry_after FROM rate_limit_take('signups', '');
-- however the shards are picked, no more than the burst is ever granted
SELECT count(*) FILTER (WHERE d.allowed) <= 19 AS within_burst
  FROM generate_series(1, 40) AS g, LATERAL rate_limit_take('signups', '', 1 + 0 * g) AS d;
SELECT sum(tokens) >= 0 AS never_negative FROM ratelimit.buckets WHERE name = 'signups';

--
-- Report-only policies (rate_limit_define(..., enforce => false)): every
-- call is decided as the enforced policy would decide it, but answered as
-- allowed.  A grant takes and writes as enforced; a would-be denial takes
-- nothing and answers with the denial's numbers (remaining, retry_after,
-- reset_after, refill_after), so that the RateLimit header field says what
-- the enforced policy would say.  Defining the policy again with enforce
-- flipped keeps its buckets.
--
\i test/sql/include/error_of.sql
\set SHOW_CONTEXT never
SET ratelimit.fixed_clock = 1000;
SELECT name, burst, enforce FROM rate_limit_define('ro', 1, '1 second', 2, enforce => false);
SELECT name, enforce FROM rate_limit_policies WHERE name = 'ro';

-- Two grants take the burst; the third would be denied: allowed, with the
-- denial's numbers, and nothing taken.
SELECT * FROM rate_limit_take('ro', 'k', 1);
SELECT * FROM rate_limit_take('ro', 'k', 1);
SELECT * FROM rate_limit_take('ro', 'k', 1);
SELECT key, balance, tokens FROM rate_limit_buckets('ro');
-- A check answers the same; the headers show the would-be denial's
-- RateLimit field (nothing remaining, a token in a second), without a
-- Retry-After, which only a refused response carries.
SELECT * FROM rate_limit_check('ro', 'k', 1);
SELECT h.* FROM rate_limit_take('ro', 'k', 1) AS d, rate_limit_headers(d) AS h;

-- Half a second on: half a token.  A take of 1 would be denied and takes
-- nothing; a take of 0.5 is granted and takes it.
SET ratelimit.fixed_clock = 1000.5;
SELECT allowed, remaining, retry_after FROM rate_limit_take('ro', 'k', 1);
SELECT allowed, remaining, retry_after FROM rate_limit_take('ro', 'k', 0.5);
SELECT key, balance FROM rate_limit_buckets('ro');

-- Enforced again by the same call with enforce true: the bucket is kept,
-- and the same take is now refused.
SELECT name, enforce FROM rate_limit_define('ro', 1, '1 second', 2);
SELECT allowed, remaining, retry_after FROM rate_limit_take('ro', 'k', 1);
SELECT key, balance FROM rate_limit_buckets('ro');
SELECT name, enforce FROM rate_limit_define('ro', 1, '1 second', 2, enforce => false);
SELECT allowed, remaining, retry_after FROM rate_limit_take('ro', 'k', 1);
SELECT key, balance FROM rate_limit_buckets('ro');

-- enforce must not be NULL.
SELECT pg_temp.error_of($$SELECT rate_limit_define('ro', 1, enforce => NULL)$$);
SELECT name, enforce FROM rate_limit_policies WHERE name = 'ro';

-- A report-only policy starts no penalty box: after a would-be denial the
-- next take is decided by the bucket alone.
SET ratelimit.fixed_clock = 2000;
SELECT name, enforce FROM rate_limit_define('ro-box', 1, '1 second', 1, penalty => '10 seconds', enforce => false);
SELECT allowed, remaining, retry_after FROM rate_limit_take('ro-box', 'k', 1);
SELECT allowed, remaining, retry_after FROM rate_limit_take('ro-box', 'k', 1);
SELECT key, blocked_until FROM rate_limit_buckets('ro-box');
SET ratelimit.fixed_clock = 2001;
SELECT allowed, remaining, retry_after FROM rate_limit_take('ro-box', 'k', 1);

-- Reservations: granted within max_wait and max_reserved as enforced, into
-- debt; beyond them a would-be denial, allowed, taking nothing.
SET ratelimit.fixed_clock = 3000;
SELECT name, enforce FROM rate_limit_define('ro-res', 1, '1 second', 1, max_reserved => 1, enforce => false);
SELECT allowed, remaining, retry_after FROM rate_limit_take('ro-res', 'k', 1);
SELECT allowed, remaining, retry_after FROM rate_limit_take('ro-res', 'k', 1, '2 seconds');
SELECT allowed, remaining, retry_after FROM rate_limit_take('ro-res', 'k', 1, '2 seconds');
SELECT key, balance FROM rate_limit_buckets('ro-res');

-- rate_limit_take_all with a report-only member: its would-be denial
-- refuses nothing (its own decision says allowed false, and nothing is
-- taken from it); the enforced limits decide, and take.
SET ratelimit.fixed_clock = 4000;
SELECT (rate_limit_define('ro-all', 1, '1 second', 1, enforce => false)).enforce;
SELECT (rate_limit_define('en-all', 1, '1 second', 3)).enforce;
SELECT allowed, retry_after, binding_name, remaining,
       (SELECT array_agg(d.allowed) FROM unnest(decisions) AS d) AS each_allowed
  FROM rate_limit_take_all(ARRAY['en-all', 'ro-all'], ARRAY['k', 'k']);
SELECT allowed, retry_after, remaining,
       (SELECT array_agg(d.allowed) FROM unnest(decisions) AS d) AS each_allowed
  FROM rate_limit_take_all(ARRAY['en-all', 'ro-all'], ARRAY['k', 'k']);
SELECT h.* FROM rate_limit_take_all(ARRAY['ro-all', 'en-all'], ARRAY['k', 'k']) AS d,
                rate_limit_headers(d) AS h;
SELECT key, balance FROM rate_limit_buckets('en-all');
SELECT key, balance FROM rate_limit_buckets('ro-all');
-- The enforced limit empty: refused, nothing taken from either.
SELECT allowed, retry_after, binding_name, remaining,
       (SELECT array_agg(d.allowed) FROM unnest(decisions) AS d) AS each_allowed
  FROM rate_limit_take_all(ARRAY['en-all', 'ro-all'], ARRAY['k', 'k']);
SET ratelimit.fixed_clock = 4001;
-- A second on, both grant: both take.
SELECT allowed, remaining FROM rate_limit_take_all(ARRAY['en-all', 'ro-all'], ARRAY['k', 'k']);
-- Report-only members alone, both would deny: allowed, nothing taken.
SELECT (rate_limit_define('ro-all-2', 1, '1 second', 1, enforce => false)).enforce;
SELECT allowed FROM rate_limit_take('ro-all-2', 'k');
SELECT allowed, remaining,
       (SELECT array_agg(d.allowed) FROM unnest(decisions) AS d) AS each_allowed
  FROM rate_limit_take_all(ARRAY['ro-all', 'ro-all-2'], ARRAY['k', 'k']);
SELECT key, balance FROM rate_limit_buckets('ro-all');

SELECT rate_limit_drop(n) FROM unnest(ARRAY['ro', 'ro-box', 'ro-res', 'ro-all', 'ro-all-2', 'en-all']) AS n;
RESET ratelimit.fixed_clock;

-- test/sql/include/calls_0_1_0.sql: included by old_signatures.sql.
-- Every signature of 0.1.0, with its defaults and with every argument; the
-- columns of the 0.1.0 decision.  Leaves no bucket behind.
SELECT allowed, remaining, retry_after, reset_after, capacity FROM rate_limit_take('old', 'k', 3, 0.5, 5);
SELECT allowed, remaining, retry_after, reset_after, capacity FROM rate_limit_take('old', 'k', 3, 0.5, 5);
SELECT allowed, remaining, retry_after, reset_after, capacity FROM rate_limit_take('old', 'k', 3, 0.5, 5, true);
SELECT allowed, remaining, retry_after, reset_after, capacity FROM rate_limit_take('old', 'k', 3, 0.5, 5, true, 2);
SELECT allowed, remaining, retry_after, reset_after, capacity
  FROM rate_limit_take('old', 'k', 1, 0.5, 5, reserve => true, max_reserved => 2);
SELECT allowed, remaining, retry_after, reset_after, capacity FROM rate_limit_check('old', 'k', 1, 0.5, 5);
SELECT allowed, remaining, retry_after, reset_after, capacity FROM rate_limit_check('old', 'k', 1, 0.5, 5, true);
SELECT allowed, remaining, retry_after, reset_after, capacity FROM rate_limit_check('old', 'k', 1, 0.5, 5, true, 2);
SELECT allowed, remaining, retry_after, reset_after, capacity
  FROM rate_limit_check('old', 'k', 1, 0.5, 5, max_reserved => 10, reserve => true);
SELECT rate_limit_reset('old', 'k');
SELECT rate_limit_reset('old', 'k');

--
-- rate_limit_take_all: several limits, all or nothing.
--
SET ratelimit.fixed_clock = 1000;
\i test/sql/include/error_of.sql

-- A request limit and a bandwidth limit for the same client, and a global cap.
SELECT rate_limit_define('all-req', 1, '1 second', 3);
SELECT rate_limit_define('all-bytes', 1000, '1 second', 5000);
SELECT rate_limit_define('all-global', 10, '1 second', 10);

-- Granted: every bucket pays; the binding limit is the one left with the
-- smallest share of its burst.
SELECT * FROM rate_limit_take_all(ARRAY['all-req', 'all-bytes', 'all-global'],
                                  ARRAY['c1', 'c1', ''], ARRAY[1, 4000, 1]);
SELECT name, key, tokens FROM ratelimit.buckets WHERE name LIKE 'all-%' ORDER BY name, key;

-- Denied by one limit: none pays (the table is unchanged), retry_after is
-- the longest wait and the binding limit is the one that denied.
SELECT * FROM rate_limit_take_all(ARRAY['all-req', 'all-bytes', 'all-global'],
                                  ARRAY['c1', 'c1', ''], ARRAY[1, 2000, 1]);
SELECT name, key, tokens FROM ratelimit.buckets WHERE name LIKE 'all-%' ORDER BY name, key;
-- ... and waiting that long is enough.
SET ratelimit.fixed_clock = 1001;
SELECT * FROM rate_limit_take_all(ARRAY['all-req', 'all-bytes', 'all-global'],
                                  ARRAY['c1', 'c1', ''], ARRAY[1, 2000, 1]);

-- costs default to 1; the order given does not matter; repeated buckets add up.
SELECT allowed, remaining FROM rate_limit_take_all(ARRAY['all-global', 'all-req'], ARRAY['', 'c2']);
SELECT allowed, remaining, binding_name FROM rate_limit_take_all(ARRAY['all-req', 'all-req'], ARRAY['c3', 'c3'], ARRAY[1, 2]);
SELECT pg_temp.error_of($$SELECT rate_limit_take_all(ARRAY['all-req', 'all-req'], ARRAY['c4', 'c4'], ARRAY[2, 2])$$);

-- New keys start at the policy's initial balance, and all-or-nothing holds
-- for them too: a denial takes nothing.  It records only the first sighting
-- of the key that starts below a full bucket (at its initial balance, so it
-- starts earning); the key that starts full gets no row.
SELECT rate_limit_define('all-trial', 1, '1 second', 10, initial => 1);
SELECT allowed, binding_name FROM rate_limit_take_all(ARRAY['all-req', 'all-trial'], ARRAY['new', 'new'], ARRAY[1, 2]);
SELECT name, tokens FROM ratelimit.buckets WHERE key = 'new' ORDER BY name;
SELECT allowed, remaining FROM rate_limit_take_all(ARRAY['all-req', 'all-trial'], ARRAY['new', 'new'], ARRAY[1, 1]);

-- Transactional: ROLLBACK refunds every bucket.
BEGIN;
SELECT allowed FROM rate_limit_take_all(ARRAY['all-bytes', 'all-global'], ARRAY['c9', ''], ARRAY[5000, 5]);
ROLLBACK;
SELECT remaining FROM rate_limit_take_all(ARRAY['all-bytes', 'all-global'], ARRAY['c9', ''], ARRAY[0, 0]);

-- Errors.
SELECT pg_temp.error_of($$SELECT rate_limit_take_all(ARRAY[]::text[], ARRAY[]::text[])$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take_all(ARRAY['all-req'], ARRAY['a', 'b'])$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take_all(ARRAY['all-req'], ARRAY['a'], ARRAY[1, 2])$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take_all(ARRAY['all-req', NULL], ARRAY['a', 'b'])$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take_all(NULL, ARRAY['a'])$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take_all(ARRAY[['all-req'], ['all-req']], ARRAY[['a'], ['b']])$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take_all(array_fill('all-req'::text, ARRAY[65]), array_fill('k'::text, ARRAY[65]))$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take_all(ARRAY['all-req', 'undefined'], ARRAY['a', 'b'])$$);
SELECT pg_temp.error_of($$SELECT rate_limit_take_all(ARRAY['all-req'], ARRAY['a'], ARRAY['NaN'::float8])$$);
BEGIN TRANSACTION READ ONLY;
SELECT pg_temp.error_of($$SELECT rate_limit_take_all(ARRAY['all-req'], ARRAY['a'])$$);
COMMIT;

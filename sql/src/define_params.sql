-- sql/src/define_params.sql
--
-- The parameters of the functions that define a policy, with their
-- defaults, written once: define.sql, define_sliding.sql and
-- define_concurrency.sql make the functions of the native extension and
-- the portable limiter with them, router/ratelimit_router.sql the router's,
-- which run them on every partition.  :rl_define_params is the list of
-- rate_limit_define as CREATE FUNCTION takes it; :rl_define_types the
-- argument types that name the function in COMMENT, REVOKE and
-- regprocedure (an install fails where the two disagree;
-- test/cluster/signatures.sh compares what the three installs make of
-- them); :rl_define_sliding_params and :rl_define_sliding_types, and
-- :rl_define_concurrency_params and :rl_define_concurrency_types, those of
-- rate_limit_define_sliding_window and rate_limit_define_concurrency.
--
--   name         text                          the policy's name
--   rate         float8                        tokens refilled per period
--   per          interval DEFAULT '1 second'   the period
--   burst        float8   DEFAULT NULL         the most a bucket holds (NULL: rate)
--   initial      float8   DEFAULT NULL         a new key's balance (NULL: burst)
--   jitter       float8   DEFAULT '0'          retry_after's spread per key
--   fixed_window boolean  DEFAULT false        refill at once at each window
--   window_start interval DEFAULT NULL         the windows' offset (NULL: by key)
--   floor_rate   float8   DEFAULT '0'          granted once the burst is spent
--   shards       integer  DEFAULT 1            rows a key is split over
--   max_reserved float8   DEFAULT '0'          the most a key may owe
--   penalty      interval DEFAULT NULL         how long a denied key stays denied
--   storage      text     DEFAULT 'table'      'table' or 'memory'
--   enforce      boolean  DEFAULT true         false: report-only, never refuses
\set rl_define_params 'name text, rate float8, per interval DEFAULT ''1 second'', burst float8 DEFAULT NULL, initial float8 DEFAULT NULL, jitter float8 DEFAULT ''0'', fixed_window boolean DEFAULT false, window_start interval DEFAULT NULL, floor_rate float8 DEFAULT ''0'', shards integer DEFAULT 1, max_reserved float8 DEFAULT ''0'', penalty interval DEFAULT NULL, storage text DEFAULT ''table'', enforce boolean DEFAULT true'
\set rl_define_types 'text, float8, interval, float8, float8, float8, boolean, interval, float8, integer, float8, interval, text, boolean'

-- rate_limit_define_sliding_window:
--   name      text                        the policy's name
--   max_count float8                      the most a key takes in any window
--   "window"  interval                    the window's length
--   storage   text     DEFAULT 'table'    'table' or 'memory'
--   enforce   boolean  DEFAULT true       false: report-only, never refuses
\set rl_define_sliding_params 'name text, max_count float8, "window" interval, storage text DEFAULT ''table'', enforce boolean DEFAULT true'
\set rl_define_sliding_types 'text, float8, interval, text, boolean'
-- rate_limit_define_concurrency:
--   name      text                        the policy's name
--   max_held  integer                     the most places a key holds at once
--   lease     interval DEFAULT NULL       a lease's length (NULL: no lease)
--   storage   text     DEFAULT 'table'    'table' or 'memory'
--   enforce   boolean  DEFAULT true       false: report-only, never refuses
\set rl_define_concurrency_params 'name text, max_held integer, lease interval DEFAULT NULL, storage text DEFAULT ''table'', enforce boolean DEFAULT true'
\set rl_define_concurrency_types 'text, integer, interval, text, boolean'

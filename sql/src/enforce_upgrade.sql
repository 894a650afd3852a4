-- sql/src/enforce_upgrade.sql
--
-- The upgrade of rate_limit_define to 0.4.0, the same in the native
-- extension and the portable limiter (their update--0.3.0--0.4.0.sql):
-- policies gain enforce (false: report-only), the last parameter of
-- rate_limit_define, and the columns of concurrency limits (kind, lease,
-- lease_us; rate_limit_define_concurrency and
-- rate_limit_define_sliding_window, new, are granted to whoever may execute
-- rate_limit_define).  A new argument list makes a new function, so the old
-- one is renamed, the new one made from define.sql and given the grants of
-- the old, the view rate_limit_policies (which names it) replaced in place,
-- keeping its own grants, and only then the old function dropped.  The
-- checks the three define functions share (policy_options.sql, new) are
-- made before them.
\ir kind_check.sql
ALTER TABLE :rl_policies ADD COLUMN enforce boolean NOT NULL DEFAULT true,
    ADD COLUMN kind text COLLATE pg_catalog."C" NOT NULL DEFAULT 'bucket'::text,
    ADD COLUMN lease interval,
    ADD COLUMN lease_us bigint
        GENERATED ALWAYS AS (pg_catalog.round(pg_catalog.date_part('epoch', lease)
                                              OPERATOR(pg_catalog.*) '1000000'::float8)::bigint) STORED,
    ADD :rl_kind_check;
\set rl_define_0_3_0 :"rl_schema" .rate_limit_define_0_3_0(text, float8, interval, float8, float8, float8, boolean, interval, float8, integer, float8, interval, text)
ALTER FUNCTION :"rl_schema".rate_limit_define(text, float8, interval, float8, float8, float8, boolean, interval, float8, integer, float8, interval, text)
    RENAME TO rate_limit_define_0_3_0;
\ir policy_options.sql
--upgrade: REVOKE ALL ON FUNCTION :rl_check_policy_options(text, text, text, boolean) FROM PUBLIC;
\ir define.sql
--upgrade: REVOKE ALL ON FUNCTION :rl_define FROM PUBLIC;
\ir define_concurrency.sql
--upgrade: REVOKE ALL ON FUNCTION :"rl_schema".rate_limit_define_concurrency(text, integer, interval, text, boolean) FROM PUBLIC;
\ir define_sliding.sql
--upgrade: REVOKE ALL ON FUNCTION :"rl_schema".rate_limit_define_sliding_window(text, float8, interval, text, boolean) FROM PUBLIC;
-- Whoever could execute it still can.
\set rl_grants_from :rl_define_0_3_0
\set rl_grants_to :rl_define ', ' :"rl_schema" .rate_limit_define_concurrency(text, integer, interval, text, boolean) ', ' :"rl_schema" .rate_limit_define_sliding_window(text, float8, interval, text, boolean)
\ir copy_grants.sql
\ir policies_view.sql
DROP FUNCTION :rl_define_0_3_0;

--
-- Installing into a schema that an untrusted role may write (as "public" is
-- in a cluster upgraded from PostgreSQL 14 or older).  That role's operators
-- there, exact matches for the argument types the scripts compare, are never
-- bound into the extension's constraints and generated columns, and never
-- called by its functions.  Each one raises a warning when called.
--
DROP EXTENSION ratelimit;
CREATE ROLE ratelimit_untrusted NOLOGIN;
CREATE SCHEMA shared;
GRANT USAGE, CREATE ON SCHEMA shared TO PUBLIC;

SET ROLE ratelimit_untrusted;
DO $$
DECLARE
    op text;
    pair text[];
    n integer := 0;
BEGIN
    FOREACH op IN ARRAY ARRAY['=', '<>', '<', '<=', '>', '>=', '+', '-', '*', '/'] LOOP
        FOREACH pair SLICE 1 IN ARRAY ARRAY[['float8', 'int4'], ['float8', 'int8'],
                                            ['float8', 'numeric'], ['int4', 'float8'],
                                            ['int8', 'float8'], ['numeric', 'float8']] LOOP
            n := n + 1;
            EXECUTE format(
                $f$CREATE FUNCTION shared.hostile_%s(a %s, b %s) RETURNS %s
                   LANGUAGE plpgsql IMMUTABLE AS $b$
                   BEGIN
                       RAISE WARNING 'hostile operator %s(%s, %s) called';
                       RETURN a::float8 OPERATOR(pg_catalog.%s) b::float8;
                   END $b$ $f$,
                n, pair[1], pair[2],
                CASE WHEN op IN ('+', '-', '*', '/') THEN 'float8' ELSE 'boolean' END,
                op, pair[1], pair[2], op);
            EXECUTE format('CREATE OPERATOR shared.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = shared.hostile_%s)',
                           op, pair[1], pair[2], n);
        END LOOP;
    END LOOP;
    -- text || bigint, as in building a header value
    CREATE FUNCTION shared.hostile_concat(a text, b int8) RETURNS text
        LANGUAGE plpgsql IMMUTABLE AS $b$
        BEGIN
            RAISE WARNING 'hostile operator ||(text, int8) called';
            RETURN a OPERATOR(pg_catalog.||) b::text;
        END $b$;
    CREATE OPERATOR shared.|| (LEFTARG = text, RIGHTARG = int8, FUNCTION = shared.hostile_concat);
END
$$;
RESET ROLE;
SELECT count(*) AS hostile_operators FROM pg_operator WHERE oprnamespace = 'shared'::regnamespace;

-- The trap is live: an unqualified comparison resolved in this schema picks
-- the untrusted role's exact match over pg_catalog's float8 >= float8.
SET search_path = shared;
SELECT 2::float8 >= 1 AS trapped;
RESET search_path;

-- No object of the extension depends on an object of the untrusted role.
CREATE VIEW pg_temp.hostile_dependencies AS
SELECT pg_describe_object(d.classid, d.objid, d.objsubid) AS dependent,
       pg_describe_object(d.refclassid, d.refobjid, d.refobjsubid) AS hostile_object
  FROM pg_depend AS d
 WHERE ((d.refclassid = 'pg_operator'::regclass
         AND d.refobjid IN (SELECT oid FROM pg_operator WHERE pg_get_userbyid(oprowner) = 'ratelimit_untrusted'))
     OR (d.refclassid = 'pg_proc'::regclass
         AND d.refobjid IN (SELECT oid FROM pg_proc WHERE pg_get_userbyid(proowner) = 'ratelimit_untrusted')))
   AND NOT (d.classid = 'pg_operator'::regclass
            AND d.objid IN (SELECT oid FROM pg_operator WHERE pg_get_userbyid(oprowner) = 'ratelimit_untrusted'));

-- (a) Installed into that schema: by every upgrade script from 0.1.0, and
-- at the default version.
CREATE EXTENSION ratelimit SCHEMA shared VERSION '0.1.0';
SELECT * FROM pg_temp.hostile_dependencies ORDER BY 1, 2;
ALTER EXTENSION ratelimit UPDATE;
SELECT * FROM pg_temp.hostile_dependencies ORDER BY 1, 2;
DROP EXTENSION ratelimit;
CREATE EXTENSION ratelimit SCHEMA shared;
SELECT * FROM pg_temp.hostile_dependencies ORDER BY 1, 2;

-- (b) Every function runs without calling them (no warning below), with
-- every option a policy can have.
SET ratelimit.fixed_clock = 1000;
\i test/sql/include/error_of.sql
SELECT shared.rate_limit_define('hostile', 10, '1 minute', 5, initial => 2, jitter => 0.5, shards => 2);
SELECT shared.rate_limit_define('hostile-window', 10, '1 minute', 20, fixed_window => true,
                                window_start => '0 seconds');
SELECT shared.rate_limit_define('hostile-floor', 100, '1 hour', floor_rate => 7200);
SELECT name, tokens_per_second, window_us, window_start_us, floor_per_second
  FROM ratelimit.policies ORDER BY name;
SELECT allowed, remaining FROM shared.rate_limit_take('hostile', 'k');
SELECT allowed, remaining FROM shared.rate_limit_check('hostile-window', 'k', 3);
SELECT allowed, remaining FROM shared.rate_limit_take('hostile-floor', 'k', 100);
SELECT allowed, remaining FROM shared.rate_limit_refund('hostile', 'k', 1);
SELECT allowed FROM shared.rate_limit_take_all(ARRAY['hostile-window', 'hostile-floor'], ARRAY['k', 'k']);
SELECT allowed, remaining FROM shared.rate_limit_take('explicit', 'k', 1, 0.5, 3);
SELECT allowed, remaining FROM shared.rate_limit_refund('explicit', 'k', 1, 0.5, 3);
SELECT h.* FROM shared.rate_limit_take('hostile-floor', 'k', 0) AS d,
    LATERAL shared.rate_limit_headers(d, 'hostile-floor') AS h;
SELECT h.* FROM shared.rate_limit_take('explicit', 'k', 5, 0.5, 3, reserve => true) AS d,
    LATERAL shared.rate_limit_headers(d, 'explicit', 0.5) AS h;
SELECT name, max_reserved FROM shared.rate_limit_define('hostile-reserve', 10, '1 minute', 5, max_reserved => 2.5);
SELECT pg_temp.error_of($$SELECT shared.rate_limit_define('hostile-reserve', 1, max_reserved => -1)$$);
SELECT pg_temp.error_of($$SELECT shared.rate_limit_define('hostilé', 1)$$);
-- Header values from a decision alone, with every branch: a fractional quota
-- and period, rate 0, caps, a denial, a reserved debt, several limits.
SELECT h.* FROM shared.rate_limit_headers(ROW(false, 0.5, 6.5, 27, 5, 'h', 0.75, '250 milliseconds', 3)::shared.rate_limit_decision) AS h;
SELECT h.* FROM shared.rate_limit_headers(ROW(true, -2, 4, 40, 5, 'h', 0, '1 second', 'Infinity')::shared.rate_limit_decision) AS h;
SELECT h.* FROM shared.rate_limit_headers(ROW(false, 1e300, 1e300, 1e300, 1e301, 'h', 1e308, '1 microsecond', 1e300)::shared.rate_limit_decision) AS h;
SELECT h.* FROM shared.rate_limit_headers(ROW(true, 1, 0, 0, 1, 'h', 1e-320, '1 year', 0)::shared.rate_limit_decision) AS h;
SELECT h.* FROM shared.rate_limit_headers(
    ROW(false, 2.5, 'b', 'k', '{4, 0}',
        ARRAY[ROW(true, 4, 0, 6, 5, 'a', 10, '1 minute', 6), ROW(false, 0, 2.5, 10, 2, 'b', 2, '10 seconds', 5)]::shared.rate_limit_decision[]
       )::shared.rate_limit_all_decision) AS h;
SELECT pg_temp.error_of($$SELECT shared.rate_limit_headers(ROW(true, 1, 0, 0, 5, NULL, NULL, NULL, NULL)::shared.rate_limit_decision)$$);
SELECT pg_temp.error_of($$SELECT shared.rate_limit_headers(ROW(true, 1, 0, 0, 5, 'é', 1, '1 second', 1)::shared.rate_limit_decision)$$);
SELECT pg_temp.error_of($$SELECT shared.rate_limit_headers(ROW(true, 0, NULL, NULL, '{1}', NULL)::shared.rate_limit_all_decision)$$);
-- The entry points of 0.3.0 (and the decision fields the library writes).
SELECT h.* FROM shared.rate_limit_take('hostile-reserve', 'k', 1) AS d, LATERAL shared.rate_limit_headers(d) AS h;
SELECT allowed, remaining FROM shared.rate_limit_take('hostile-reserve', 'k', 6, max_wait => '1 minute');
SELECT allowed, remaining FROM shared.rate_limit_check('hostile-reserve', 'k', 1, max_wait => '1 minute');
SELECT allowed FROM shared.rate_limit_take_all(ARRAY['hostile-window', 'hostile-reserve'], ARRAY['k2', 'k2'], NULL, '1 minute');
SELECT allowed, remaining FROM shared.rate_limit_take_explicit('explicit-per', 'k', 1, 0.5, per => '1 minute', burst => 3);
SELECT allowed, remaining FROM shared.rate_limit_check_explicit('explicit-per', 'k', 1, 0.5, per => '1 minute', burst => 3);
SELECT allowed, remaining FROM shared.rate_limit_refund_explicit('explicit-per', 'k', 1, 0.5, per => '1 minute', burst => 3);
SELECT shared.rate_limit_reset('hostile', 'k');
SELECT shared.rate_limit_drop('hostile');
RESET ratelimit.fixed_clock;

-- Leave the extension as the other tests expect it.
DROP EXTENSION ratelimit;
DROP OWNED BY ratelimit_untrusted;
DROP SCHEMA shared;
DROP ROLE ratelimit_untrusted;
CREATE EXTENSION ratelimit;

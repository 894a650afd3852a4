--
-- Calls resolve through search_path: a function of the same name that someone
-- else creates can capture them.  Argument types count before schema order;
-- float8 arguments and schema-qualified calls reach the extension's function.
--
SET ratelimit.fixed_clock = 1000;
CREATE SCHEMA capture_impostor;
CREATE FUNCTION capture_impostor.rate_limit_take(name text, key text, cost int, rate int, burst int)
RETURNS text LANGUAGE sql AS $$ SELECT 'impostor' $$;
SET search_path = capture_impostor, public;

-- Integer literals match the impostor exactly; the extension's float8
-- arguments only by a cast: captured.
SELECT rate_limit_take('capture', 'k', 1, 10, 20);
-- Float literals and float8 casts: no integer overload accepts them.
SELECT rate_limit_take('capture', 'k', 1.0, 10.0, 20.0);
SELECT rate_limit_take('capture', 'k', 1::float8, 10::float8, 20::float8);
-- Schema-qualified: only the extension's function is considered.
SELECT public.rate_limit_take('capture', 'k', 1, 10, 20);

-- The impostor captures from a later schema too: types decide first.
SET search_path = public, capture_impostor;
SELECT rate_limit_take('capture', 'k', 1, 10, 20);

-- With the extension's own argument types in an earlier schema, an impostor
-- captures float8 calls as well; only the schema-qualified call escapes it.
CREATE FUNCTION capture_impostor.rate_limit_take(name text, key text, cost float8, rate float8, burst float8)
RETURNS text LANGUAGE sql AS $$ SELECT 'same-typed impostor' $$;
SET search_path = capture_impostor, public;
SELECT rate_limit_take('capture', 'k', 1::float8, 10::float8, 20::float8);
SELECT public.rate_limit_take('capture', 'k', 1::float8, 10::float8, 20::float8);

-- Every call that reached the extension took from the same bucket.
SELECT allowed, remaining FROM public.rate_limit_check('capture', 'k', 0, 10, 20);

RESET search_path;
DROP FUNCTION capture_impostor.rate_limit_take(text, text, int, int, int);
DROP FUNCTION capture_impostor.rate_limit_take(text, text, float8, float8, float8);
DROP SCHEMA capture_impostor;
SELECT rate_limit_reset('capture', 'k');
RESET ratelimit.fixed_clock;

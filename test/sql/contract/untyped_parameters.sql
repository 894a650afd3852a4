--
-- Drivers such as node-postgres send every parameter untyped: PostgreSQL
-- infers the types from the functions that could match.  Every signature
-- must resolve to exactly one function that way, so that no overload added
-- later makes an earlier call ambiguous (42725).
--
SET ratelimit.fixed_clock = 1000;
SELECT count(*) AS defined FROM rate_limit_define('untyped', 10, '1 minute', burst => 5, max_reserved => 5);

-- 0.1.0: take and check with explicit rate and burst, with and without reservation.
PREPARE take5 AS SELECT allowed, remaining FROM rate_limit_take($1, $2, $3, $4, $5);
EXECUTE take5('plain', 'k', '1', '2', '5');
PREPARE take6 AS SELECT allowed, remaining FROM rate_limit_take($1, $2, $3, $4, $5, $6);
EXECUTE take6('plain', 'k', '1', '2', '5', 'false');
PREPARE take7 AS SELECT allowed, remaining FROM rate_limit_take($1, $2, $3, $4, $5, $6, $7);
EXECUTE take7('plain', 'k', '6', '2', '5', 'true', '10');
PREPARE check5 AS SELECT allowed FROM rate_limit_check($1, $2, $3, $4, $5);
EXECUTE check5('plain', 'k', '1', '2', '5');
PREPARE check7 AS SELECT allowed FROM rate_limit_check($1, $2, $3, $4, $5, $6, $7);
EXECUTE check7('plain', 'k', '1', '2', '5', 'true', NULL);
PREPARE reset2 AS SELECT rate_limit_reset($1, $2);
EXECUTE reset2('plain', 'k');

-- 0.2.0: by policy, refunds, take_all, headers.
PREPARE take2 AS SELECT allowed, remaining FROM rate_limit_take($1, $2);
EXECUTE take2('untyped', 'k');
PREPARE take3 AS SELECT allowed, remaining FROM rate_limit_take($1, $2, $3);
EXECUTE take3('untyped', 'k', '1');
PREPARE check3 AS SELECT allowed, remaining FROM rate_limit_check($1, $2, $3);
EXECUTE check3('untyped', 'k', '1');
PREPARE refund3 AS SELECT remaining FROM rate_limit_refund($1, $2, $3);
EXECUTE refund3('untyped', 'k', '1');
PREPARE refund5 AS SELECT remaining FROM rate_limit_refund($1, $2, $3, $4, $5);
EXECUTE refund5('plain', 'k', '1', '2', '5');
PREPARE take_all3 AS SELECT allowed FROM rate_limit_take_all($1, $2, $3);
EXECUTE take_all3('{untyped}', '{j}', '{1}');
PREPARE take_all2 AS SELECT allowed FROM rate_limit_take_all($1, $2);
EXECUTE take_all2('{untyped}', '{j}');

-- 0.3.0: reservation by policy, explicit parameters in define's units.
PREPARE take4 AS SELECT allowed, remaining, retry_after FROM rate_limit_take($1, $2, $3, $4);
EXECUTE take4('untyped', 'k', '6', '1 minute');
PREPARE check4 AS SELECT allowed FROM rate_limit_check($1, $2, $3, $4);
EXECUTE check4('untyped', 'k', '1', '1 minute');
PREPARE take_all4 AS SELECT allowed FROM rate_limit_take_all($1, $2, $3, $4);
EXECUTE take_all4('{untyped}', '{j}', NULL, '1 minute');
PREPARE explicit5 AS SELECT allowed, remaining FROM rate_limit_take_explicit($1, $2, $3, $4, $5);
EXECUTE explicit5('explicit', 'k', '1', '60', '1 minute');
PREPARE explicit8 AS
    SELECT allowed, remaining FROM rate_limit_take_explicit($1, $2, $3, $4, $5, $6, $7, $8);
EXECUTE explicit8('explicit', 'k', '70', '60', '1 minute', '60', '2 minutes', '20');
PREPARE check_explicit5 AS SELECT allowed FROM rate_limit_check_explicit($1, $2, $3, $4, $5);
EXECUTE check_explicit5('explicit', 'k', '1', '60', '1 minute');
PREPARE refund_explicit5 AS SELECT remaining FROM rate_limit_refund_explicit($1, $2, $3, $4, $5);
EXECUTE refund_explicit5('explicit', 'k', '1', '60', '1 minute');

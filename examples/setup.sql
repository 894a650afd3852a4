-- The database side of the examples in examples/node and examples/python:
-- run once, by the role that manages limits, after CREATE EXTENSION ratelimit.

-- Every request: 5 a minute per client, 3 at once.
SELECT name, rate, per, burst FROM rate_limit_define('api', 5, '1 minute', burst => 3);
-- Orders: 2 a minute per client, taken inside the order's own transaction.
SELECT name, rate, per, burst FROM rate_limit_define('orders', 2, '1 minute');

-- The key of a client: its address, an IPv6 client by its /64 (one host
-- usually holds a whole /64, so limiting single addresses limits nothing).
-- IPv4 addresses mapped into IPv6 stay single addresses.
CREATE FUNCTION client_key(address inet) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT 'ip:' || CASE WHEN pg_catalog.family(address) = 6
                          AND NOT address << inet '::ffff:0:0/96'
                         THEN pg_catalog.network(pg_catalog.set_masklen(address, 64))::text
                         ELSE pg_catalog.host(address) END
$$;

-- The business table of the transactional example.
CREATE TABLE orders (
    id         bigserial PRIMARY KEY,
    client     text NOT NULL,
    item       text NOT NULL CHECK (item <> ''),
    created_at timestamptz NOT NULL DEFAULT now()
);

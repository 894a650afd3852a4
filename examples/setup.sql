-- The database side of the examples in examples/node and examples/python:
-- run once, by the role that manages limits, after CREATE EXTENSION ratelimit.

-- Every request: 5 a minute per client, 3 at once.
SELECT name, rate, per, burst FROM rate_limit_define('api', 5, '1 minute', burst => 3);
-- Orders: 2 a minute per client, taken inside the order's own transaction.
SELECT name, rate, per, burst FROM rate_limit_define('orders', 2, '1 minute');

-- The business table of the transactional example; client is the key the
-- packages give an address ('ip:192.0.2.1', an IPv6 client's /64).
CREATE TABLE orders (
    id         bigserial PRIMARY KEY,
    client     text NOT NULL,
    item       text NOT NULL CHECK (item <> ''),
    created_at timestamptz NOT NULL DEFAULT now()
);

// A web server limited by ratelimit, with node-postgres and node:http.
//
//   GET  /api            every request takes from the limit "api" first: one
//                        statement takes and returns the header values
//   POST /orders?item=X  the take from "orders" is part of the order's own
//                        transaction: an order that fails (no item) rolls its
//                        take back with it
//
// Settings (environment): PGHOST, PGPORT, PGDATABASE, PGUSER as for psql;
// HOST and PORT to listen on (127.0.0.1:8000); TRUST_PROXY=1 when a proxy in
// front appends the client's address to X-Forwarded-For; RATELIMIT_FAIL=open
// to serve requests unlimited while the database cannot be reached (default:
// closed, 503).  The database side is examples/setup.sql.
'use strict';

const http = require('node:http');
const { Pool, DatabaseError } = require('pg');

const pool = new Pool({ connectionTimeoutMillis: 3000 });
pool.on('error', () => {}); // an idle connection lost: the next query reconnects
const trustProxy = process.env.TRUST_PROXY === '1';
const failOpen = process.env.RATELIMIT_FAIL === 'open';

// One round trip: the take, and the values of the RateLimit-Policy,
// RateLimit and Retry-After header fields.
const TAKE = `
    SELECT d.allowed, h.ratelimit_policy, h.ratelimit, h.retry_after
      FROM rate_limit_take($1, client_key($2)) AS d, LATERAL rate_limit_headers(d) AS h`;

function clientAddress(req) {
  if (trustProxy) {
    const hops = (req.headers['x-forwarded-for'] || '')
      .split(',').map((h) => h.trim()).filter(Boolean);
    if (hops.length > 0) return hops[hops.length - 1]; // the address the proxy saw
  }
  return req.socket.remoteAddress;
}

function reply(res, status, body, headers = {}) {
  res.writeHead(status, { 'Content-Type': 'text/plain', ...headers });
  res.end(body);
}

function limitHeaders(row) {
  return { 'RateLimit-Policy': row.ratelimit_policy, RateLimit: row.ratelimit };
}

// An error that says the database cannot be reached, rather than one of its
// answers: no connection, or a connection lost or shut down.
function unreachable(err) {
  return !(err instanceof DatabaseError) || err.code.startsWith('08') || err.code.startsWith('57P0');
}

async function api(req, res) {
  let row;
  try {
    ({ rows: [row] } = await pool.query(TAKE, ['api', clientAddress(req)]));
  } catch (err) {
    if (!unreachable(err)) throw err;
    if (failOpen) return reply(res, 200, 'hello (unlimited: the limiter is unavailable)\n');
    return reply(res, 503, 'rate limiter unavailable\n', { 'Retry-After': '5' });
  }
  if (!row.allowed) {
    return reply(res, 429, 'too many requests\n',
      { ...limitHeaders(row), 'Retry-After': row.retry_after });
  }
  return reply(res, 200, 'hello\n', limitHeaders(row));
}

async function order(req, res, item) {
  let client;
  try {
    client = await pool.connect();
  } catch (err) {
    return reply(res, 503, 'orders need the database\n', { 'Retry-After': '5' });
  }
  const address = clientAddress(req);
  try {
    // The take belongs to the order's transaction: an order that fails
    // rolls its take back, and the client keeps the token.
    await client.query('BEGIN');
    const { rows: [row] } = await client.query(TAKE, ['orders', address]);
    if (!row.allowed) {
      await client.query('ROLLBACK');
      return reply(res, 429, 'too many orders\n',
        { ...limitHeaders(row), 'Retry-After': row.retry_after });
    }
    await client.query('INSERT INTO orders (client, item) VALUES (client_key($1), $2)',
      [address, item]);
    await client.query('COMMIT');
    return reply(res, 201, 'ordered\n', limitHeaders(row));
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    if (err.code === '23514') return reply(res, 400, 'an order needs an item\n');
    throw err;
  } finally {
    client.release();
  }
}

const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://localhost');
  let handled;
  if (req.method === 'GET' && url.pathname === '/api') {
    handled = api(req, res);
  } else if (req.method === 'POST' && url.pathname === '/orders') {
    handled = order(req, res, url.searchParams.get('item') || '');
  } else {
    handled = Promise.resolve(reply(res, 404, 'not found\n'));
  }
  handled.catch((err) => {
    console.error(err);
    if (!res.headersSent) reply(res, 500, 'internal error\n');
  });
});

const host = process.env.HOST || '127.0.0.1';
const port = Number(process.env.PORT || 8000);
server.listen(port, host, () => console.log(`listening on http://${host}:${port}`));

// A web server limited by ratelimit, with node-postgres and node:http.
//
//   GET  /api            every request takes from the limit "api" first: one
//                        statement takes and returns the header values
//   POST /orders?item=X  the take from "orders" is part of the order's own
//                        transaction: an order that fails (no item) rolls its
//                        take back with it
//
// Settings (environment): PGHOST, PGPORT, PGDATABASE, PGUSER as for psql;
// HOST and PORT to listen on (127.0.0.1:8000; PORT=0 picks a free one);
// TRUST_PROXY=ADDRESS, the address of a proxy in front that appends the
// client's address to X-Forwarded-For (the header is ignored from any other
// peer); RATELIMIT_FAIL=open to serve requests unlimited while no connection
// to the database can be made (default: closed, 503).  The database side is
// examples/setup.sql.
'use strict';

const http = require('node:http');
const { Client, DatabaseError, Pool } = require('pg');

// At most 10 connections; a statement that takes longer than 5 s fails
// rather than holding a request.
const pool = new Pool({
  max: 10, connectionTimeoutMillis: 3000, statement_timeout: 5000, keepAlive: true,
});
pool.on('error', () => {}); // an idle connection lost: the next query reconnects
const trustProxy = process.env.TRUST_PROXY || '';
const failOpen = process.env.RATELIMIT_FAIL === 'open';

// One round trip: the take, and the values of the RateLimit-Policy,
// RateLimit and Retry-After header fields.
const TAKE = `
    SELECT d.allowed, h.ratelimit_policy, h.ratelimit, h.retry_after
      FROM rate_limit_take($1, client_key($2)) AS d, LATERAL rate_limit_headers(d) AS h`;

function clientAddress(req) {
  const peer = req.socket.remoteAddress;
  if (trustProxy && peer === trustProxy) {
    // node joins repeated X-Forwarded-For lines with ", ": the last entry is
    // the one the proxy appended, the address it saw.
    const hops = (req.headers['x-forwarded-for'] || '')
      .split(',').map((h) => h.trim()).filter(Boolean);
    if (hops.length > 0) return hops[hops.length - 1];
  }
  return peer;
}

function reply(res, status, body, headers = {}) {
  res.writeHead(status, { 'Content-Type': 'text/plain', ...headers });
  res.end(body);
}

function limitHeaders(row, denied = false) {
  const headers = { 'RateLimit-Policy': row.ratelimit_policy, RateLimit: row.ratelimit };
  // NULL: no wait would do.
  if (denied && row.retry_after !== null) headers['Retry-After'] = row.retry_after;
  return headers;
}

// An error that says no connection to the database can be made or kept,
// rather than one of its answers (or a pool that is merely busy).
const CONNECTION_ERRORS = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOENT', 'ENOTFOUND',
  'EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT', 'EPIPE']);
async function unreachable(err) {
  if (err instanceof DatabaseError) return err.code.startsWith('08') || err.code.startsWith('57P0');
  if (err.message === 'timeout exceeded when trying to connect') {
    // Busy, or no connection can be made: one attempt of our own tells.
    const probe = new Client({ connectionTimeoutMillis: 3000 });
    try {
      await probe.connect();
      return false;
    } catch (probeErr) {
      return true;
    } finally {
      probe.end().catch(() => {});
    }
  }
  return CONNECTION_ERRORS.has(err.code) || err.message === 'Connection terminated unexpectedly';
}

async function api(req, res) {
  let row;
  try {
    ({ rows: [row] } = await pool.query(TAKE, ['api', clientAddress(req)]));
  } catch (err) {
    if (!(await unreachable(err))) throw err;
    if (failOpen) return reply(res, 200, 'hello (unlimited: the limiter is unavailable)\n');
    return reply(res, 503, 'rate limiter unavailable\n', { 'Retry-After': '5' });
  }
  if (!row.allowed) return reply(res, 429, 'too many requests\n', limitHeaders(row, true));
  return reply(res, 200, 'hello\n', limitHeaders(row));
}

async function order(req, res, item) {
  let client;
  try {
    client = await pool.connect();
  } catch (err) {
    if (!(await unreachable(err))) throw err;
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
      return reply(res, 429, 'too many orders\n', limitHeaders(row, true));
    }
    await client.query('INSERT INTO orders (client, item) VALUES (client_key($1), $2)',
      [address, item]);
    await client.query('COMMIT');
    return reply(res, 201, 'ordered\n', limitHeaders(row));
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    if (err.code === '23514') return reply(res, 400, 'an order needs an item\n');
    if (await unreachable(err)) return reply(res, 503, 'orders need the database\n', { 'Retry-After': '5' });
    throw err;
  } finally {
    client.release();
  }
}

const server = http.createServer((req, res) => {
  let url;
  try {
    url = new URL(req.url, 'http://localhost');
  } catch (err) {
    return reply(res, 400, 'bad request\n');
  }
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
server.listen(port, host, () => console.log(`listening on http://${host}:${server.address().port}`));

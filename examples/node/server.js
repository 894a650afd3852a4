// A web server limited by ratelimit, with Express and pg-ratelimit
// (clients/node).
//
//   GET  /api            every request takes from the limit "api" first
//   POST /orders?item=X  the take from "orders" is part of the order's own
//                        transaction: an order that fails (no item) rolls its
//                        take back with it
//
// Settings (environment): PGHOST, PGPORT, PGDATABASE, PGUSER as for psql;
// HOST and PORT to listen on (127.0.0.1:8000; PORT=0 picks a free one);
// TRUST_PROXY=ADDRESS, the address of a proxy in front that appends the
// client's address to X-Forwarded-For (Express's 'trust proxy'; the header
// is ignored from any other peer); RATELIMIT_FAIL=open to serve /api
// unlimited while the database cannot be reached (default: closed, 503).
// The database side is examples/setup.sql.  pg-ratelimit is installed from
// this repository: (cd ../../clients/node && npm ci && npm pack), then
// npm ci && npm install --no-save ../../clients/node/pg-ratelimit-0.4.0.tgz here.
'use strict';

const express = require('express');
const { Pool } = require('pg');
const { RateLimiter, addressKey } = require('pg-ratelimit');
const { rateLimit } = require('pg-ratelimit/express');

// At most 10 connections, 3 s to get one; a statement that takes longer
// than 5 s fails rather than holding a request.
const pool = new Pool({ max: 10, connectionTimeoutMillis: 3000, statement_timeout: 5000 });
const limiter = new RateLimiter(pool);
const app = express();
app.set('trust proxy', process.env.TRUST_PROXY || false);

// The limit's functions are found on search_path: the pool is all it needs.
app.get('/api', rateLimit({ pool, name: 'api', fail: process.env.RATELIMIT_FAIL === 'open' ? 'open' : 'closed' }),
  (req, res) => res.type('text/plain').send('hello\n'));

app.post('/orders', async (req, res) => {
  const client = addressKey(req.ip);
  // Denied: RateLimitedError (429); the INSERT fails: rolled back, take included.
  const { decision } = await limiter.transaction('orders', client, {}, (db) =>
    db.query('INSERT INTO orders (client, item) VALUES ($1, $2)', [client, req.query.item || '']));
  res.set(decision.headers).status(201).type('text/plain').send('ordered\n');
});

app.use((err, req, res, next) => {
  if (err.code === '23514') return res.status(400).type('text/plain').send('an order needs an item\n');
  // RateLimitedError (429) and RateLimitUnavailableError (503) carry their header fields.
  if (err.statusCode === 429 || err.statusCode === 503) {
    return res.set(err.headers).status(err.statusCode).type('text/plain').send(`${err.message}\n`);
  }
  next(err);
});

const server = app.listen(Number(process.env.PORT || 8000), process.env.HOST || '127.0.0.1', () => {
  const { address, port } = server.address();
  console.log(`listening on http://${address}:${port}`);
});

// The app test/cluster/clients.sh drives: Express or Fastify (FRAMEWORK),
// limited by pg-ratelimit as installed from its packed tarball.
//
//   GET  /api?cost=N     limit "api", keyed by X-User or by address, fails closed
//   GET  /open           limit "api", fails open
//   GET  /report         limit "api", report-only (body says when it would refuse)
//   GET  /both?bytes=N   "api" and "bytes" taken together (takeAll)
//   POST /orders?item=X  limit "orders" taken inside the order's transaction
//
// PG* as for psql; RL_SCHEMA: the limiter's schema (else search_path);
// prints "listening on http://127.0.0.1:PORT".
'use strict';

const { Pool } = require('pg');
const { RateLimiter, addressKey } = require('pg-ratelimit');

// Two connections, and one second to get one: a small pool that fills.
const pool = new Pool({ max: 2, connectionTimeoutMillis: 1000 });
const limiter = new RateLimiter(pool, { schema: process.env.RL_SCHEMA || undefined });
const user = (req) => req.headers['x-user'];
const cost = (req) => Number(req.query.cost || 1);

async function order(item) {
  const { decision } = await limiter.transaction('orders', 'orders:shop', {}, async (client) => {
    await client.query('INSERT INTO orders (item) VALUES ($1)', [item]);
  });
  return decision;
}

async function both(req) {
  const ip = addressKey(req.ip);
  return limiter.takeAll([['api', ip], ['bytes', ip, Number(req.query.bytes || 0)]]);
}

function express() {
  const app = require('express')();
  const { rateLimit } = require('pg-ratelimit/express');
  app.set('trust proxy', 'loopback');
  app.get('/api', rateLimit({ limiter, name: 'api', account: user, cost }), (req, res) => res.send('served'));
  app.get('/open', rateLimit({ limiter, name: 'api', account: user, fail: 'open' }), (req, res) => res.send('served'));
  app.get('/report', rateLimit({ limiter, name: 'api', account: user, reportOnly: true,
    onDenied: (d, req) => { req.wouldLimit = true; } }),
  (req, res) => res.send(req.wouldLimit ? 'served, would refuse' : 'served'));
  app.get('/both', async (req, res) => {
    const d = await both(req);
    res.set(d.headers).status(d.allowed ? 200 : 429).send(d.allowed ? 'served' : `denied by ${d.bindingName}`);
  });
  app.post('/orders', async (req, res) => {
    const d = await order(req.query.item || '');
    res.set(d.headers).status(201).send('ordered');
  });
  app.use((err, req, res, next) => {
    if (err.code === '23514') return res.status(400).send('an order needs an item');
    next(err); // RateLimitedError and RateLimitUnavailableError: their statusCode and headers
  });
  const server = app.listen(0, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${server.address().port}`));
}

async function fastify() {
  const app = require('fastify')({ trustProxy: '127.0.0.1' });
  const { rateLimit } = require('pg-ratelimit/fastify');
  app.get('/api', { onRequest: rateLimit({ limiter, name: 'api', account: user, cost }) }, async () => 'served');
  app.get('/open', { onRequest: rateLimit({ limiter, name: 'api', account: user, fail: 'open' }) }, async () => 'served');
  app.get('/report', { onRequest: rateLimit({ limiter, name: 'api', account: user, reportOnly: true,
    onDenied: (d, req) => { req.wouldLimit = true; } }) },
  async (req) => (req.wouldLimit ? 'served, would refuse' : 'served'));
  app.get('/both', async (req, reply) => {
    const d = await both(req);
    reply.headers(d.headers).code(d.allowed ? 200 : 429);
    return d.allowed ? 'served' : `denied by ${d.bindingName}`;
  });
  app.post('/orders', async (req, reply) => {
    try {
      const d = await order(req.query.item || '');
      return reply.headers(d.headers).code(201).send('ordered');
    } catch (err) {
      if (err.code === '23514') return reply.code(400).send('an order needs an item');
      throw err; // RateLimitedError and RateLimitUnavailableError: their statusCode and headers
    }
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  console.log(`listening on http://127.0.0.1:${app.server.address().port}`);
}

if (process.env.FRAMEWORK === 'fastify') fastify();
else express();

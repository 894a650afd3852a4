// The Express middleware and the Fastify hook in real apps on 127.0.0.1,
// over HTTP, with the portable limiter in PGlite: headers and 429, cost,
// keys by account and by address (IPv6 by /64 behind a trusted proxy),
// report-only, and failing open or closed.

import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { PGlite } from '@electric-sql/pglite';
import express from 'express';
import Fastify from 'fastify';
import { Pool } from 'pg';
import { RateLimiter, type Decision, type LimitOptions } from '../src';
import { rateLimit as expressLimit } from '../src/express';
import { rateLimit as fastifyLimit } from '../src/fastify';
import { asPool, portableDatabase } from './pglite';
import { assertLimit, assertWait, stopwatch } from './waits';

let db: PGlite;
let limiter: RateLimiter;
let deadPool: Pool;
let dead: RateLimiter;
let silentPool: Pool;
let silent: RateLimiter;
let silentServer: import('node:net').Server;
// The database's one session without the pool's queue, for a route whose take
// runs inside a transaction the test holds open (see 'a held place').
let session: RateLimiter;
const sockets: import('node:net').Socket[] = [];

before(async () => {
  db = await portableDatabase('limits');
  limiter = new RateLimiter(asPool(db), { schema: 'limits' });
  session = new RateLimiter({ query: (text, values) => db.query(text, values as any[]) }, { schema: 'limits' });
  // A pool whose every connection is refused: a port just closed.
  const probe = require('node:net').createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const port = (probe.address() as AddressInfo).port;
  await new Promise((resolve) => probe.close(resolve));
  deadPool = new Pool({ host: '127.0.0.1', port, user: 'x', database: 'x' });
  dead = new RateLimiter(deadPool);
  // A pool that never gets an answer: a server that accepts and stays silent.
  silentServer = require('node:net').createServer((s: import('node:net').Socket) => { sockets.push(s); });
  await new Promise<void>((resolve) => silentServer.listen(0, '127.0.0.1', resolve));
  silentPool = new Pool({ host: '127.0.0.1', port: (silentServer.address() as AddressInfo).port,
    user: 'x', database: 'x', max: 1, connectionTimeoutMillis: 200 });
  silent = new RateLimiter(silentPool);
});
after(async () => {
  for (const s of sockets) s.destroy();
  await silentPool?.end();
  await new Promise((resolve) => silentServer.close(resolve));
  await deadPool?.end();
  await db?.close();
});

type Reply = { status: number; policy: string | null; limit: string | null; retry: string | null; body: string };

async function get(base: string, path: string, headers: Record<string, string> = {}): Promise<Reply> {
  const res = await fetch(base + path, { headers });
  return {
    status: res.status,
    policy: res.headers.get('ratelimit-policy'),
    limit: res.headers.get('ratelimit'),
    retry: res.headers.get('retry-after'),
    body: await res.text(),
  };
}

// The same routes in both frameworks; `mount(path, options)` adds one.
type Mount = (path: string, options: LimitOptions<any>) => void;

function routes(mount: Mount, prefix: string, denials: Decision[]) {
  const p = (s: string) => `${prefix}-${s}`;
  mount('/plain', { limiter, name: p('api') });
  mount('/cost', { limiter, name: p('api'), cost: (req: any) => Number(req.query.n ?? 1) });
  mount('/account', { limiter, name: p('api'), account: (req: any) => req.headers['x-user'] });
  mount('/report', { limiter, name: p('api'), reportOnly: true, onDenied: (d) => denials.push(d) });
  mount('/open', { limiter: dead, name: p('api'), fail: 'open' });
  mount('/closed', { limiter: dead, name: p('api') });
  mount('/busy', { limiter: silent, name: p('api'), fail: 'open' });
  mount('/undefined', { limiter, name: 'no-such-policy' });
  mount('/held', { limiter: session, name: p('held'), onDenied: (d) => denials.push(d) });
}

// 5 an hour, burst 3: a token every 720 s (see waits.ts); and one place at once.
async function define(prefix: string) {
  await db.query(`SELECT limits.rate_limit_define($1, 5, '1 hour', burst => 3)`, [`${prefix}-api`]);
  await db.query(`SELECT limits.rate_limit_define_concurrency($1, 1)`, [`${prefix}-held`]);
}

function behaves(prefix: string, base: () => string, denials: Decision[]) {
  const q = `"${prefix}-api";q=5;w=3600`;
  // The field at a bucket's first take; later, t within assertLimit's bound.
  const r = (n: number) => `"${prefix}-api";r=${n};t=720`;

  test('200 with the header fields while the burst lasts, then 429 with Retry-After', async () => {
    const since = stopwatch();
    const replies = [];
    for (let i = 0; i < 4; i += 1) replies.push({ ...await get(base(), '/plain'), elapsed: since() });
    assert.deepEqual(replies.map((x) => [x.status, x.policy]), [[200, q], [200, q], [200, q], [429, q]]);
    assert.equal(replies[0].limit, r(2));
    assertLimit(replies[1].limit, r(1), replies[1].elapsed);
    assertLimit(replies[2].limit, r(0), replies[2].elapsed);
    assertLimit(replies[3].limit, r(0), replies[3].elapsed);
    assert.deepEqual(replies.slice(0, 3).map((x) => x.retry), [null, null, null]);
    assertWait(replies[3].retry, 720, replies[3].elapsed, 'Retry-After');
    assert.equal(replies[0].body, 'served');
  });

  test('cost from the request', async () => {
    const since = stopwatch();
    const first = await get(base(), '/cost?n=2', { 'x-forwarded-for': '192.0.2.7' });
    assert.deepEqual([first.status, first.limit], [200, r(1)]);
    const second = await get(base(), '/cost?n=2', { 'x-forwarded-for': '192.0.2.7' });
    assert.equal(second.status, 429);
    assertLimit(second.limit, r(1), since());
    const third = await get(base(), '/cost?n=1', { 'x-forwarded-for': '192.0.2.7' });
    assert.equal(third.status, 200);
    assertLimit(third.limit, r(0), since());
  });

  test('IPv6 behind the trusted proxy: one bucket per /64', async () => {
    const since = stopwatch();
    const a = await get(base(), '/plain', { 'x-forwarded-for': '198.51.100.1, 2001:db8:1:2::1' });
    const b = await get(base(), '/plain', { 'x-forwarded-for': '2001:db8:1:2::ffff' });
    assertLimit(b.limit, r(1), since());
    const c = await get(base(), '/plain', { 'x-forwarded-for': '2001:db8:1:3::1' });
    assert.deepEqual([a.limit, c.limit], [r(2), r(2)]);
    const { rows } = await db.query<{ key: string }>(
      `SELECT key FROM limits.rl_buckets WHERE name = $1 AND key LIKE 'ip:2001%' ORDER BY key`, [`${prefix}-api`]);
    assert.deepEqual(rows.map((x) => x.key), ['ip:2001:db8:1:2::/64', 'ip:2001:db8:1:3::/64']);
  });

  test('keyed by account when there is one', async () => {
    const since = stopwatch();
    const a = await get(base(), '/account', { 'x-user': '42', 'x-forwarded-for': '192.0.2.50' });
    const b = await get(base(), '/account', { 'x-user': '42', 'x-forwarded-for': '192.0.2.51' });
    assertLimit(b.limit, r(1), since());
    const c = await get(base(), '/account', { 'x-forwarded-for': '192.0.2.50' });
    assert.deepEqual([a.limit, c.limit], [r(2), r(2)]);
  });

  test('report-only: counted, never refused, the denial reported', async () => {
    const before = denials.length;
    const since = stopwatch();
    const replies = [];
    for (let i = 0; i < 4; i += 1) {
      replies.push({ ...await get(base(), '/report', { 'x-forwarded-for': '192.0.2.99' }), elapsed: since() });
    }
    assert.deepEqual(replies.map((x) => [x.status, x.retry]), [[200, null], [200, null], [200, null], [200, null]]);
    assert.equal(replies[0].limit, r(2));
    assertLimit(replies[1].limit, r(1), replies[1].elapsed);
    assertLimit(replies[2].limit, r(0), replies[2].elapsed);
    assertLimit(replies[3].limit, r(0), replies[3].elapsed);
    assert.equal(denials.length, before + 1);
    assert.equal(denials[denials.length - 1].allowed, false);
    // The same bucket as the limited route: it is spent.
    assert.equal((await get(base(), '/plain', { 'x-forwarded-for': '192.0.2.99' })).status, 429);
  });

  test('the database unreachable: served unlimited when failing open, 503 when closed', async () => {
    const open = await get(base(), '/open');
    assert.deepEqual([open.status, open.policy, open.limit, open.body], [200, null, null, 'served']);
    const closed = await get(base(), '/closed');
    assert.deepEqual([closed.status, closed.policy, closed.retry], [503, null, '1']);
  });

  test('no answer in time is never a reason to serve, even on a route that fails open', async () => {
    const busy = await get(base(), '/busy');
    assert.deepEqual([busy.status, busy.retry], [503, '1']);
  });

  test('a held place: 429 without Retry-After, its wait unknown (null)', async () => {
    const h = { 'x-forwarded-for': '192.0.2.200' };
    // PGlite has one session: the test's transaction holds the place, and the
    // route's take runs in it, denied as another transaction's would be.
    await db.query('BEGIN');
    try {
      const { rows } = await db.query<{ allowed: boolean }>(
        'SELECT allowed FROM limits.rate_limit_take($1, $2)', [`${prefix}-held`, 'ip:192.0.2.200']);
      assert.equal(rows[0].allowed, true);
      const before = denials.length;
      const denied = await get(base(), '/held', h);
      assert.deepEqual([denied.status, denied.policy, denied.limit, denied.retry, denied.body],
        [429, `"${prefix}-held";q=1`, `"${prefix}-held";r=0`, null, 'too many requests\n']);
      assert.equal(denials.length, before + 1);
      const d = denials[denials.length - 1];
      assert.deepEqual([d.allowed, d.retryAfter, d.resetAfter, d.refillAfter], [false, null, null, null]);
    } finally {
      await db.query('ROLLBACK');
    }
    // The place given back: served (the portable limiter grants a take in
    // autocommit, holding the place until its statement ends).
    const served = await get(base(), '/held', h);
    assert.deepEqual([served.status, served.limit, served.retry], [200, `"${prefix}-held";r=0`, null]);
  });

  test('an error of the limiter is surfaced, not served', async () => {
    assert.equal((await get(base(), '/undefined')).status, 500);
  });
}

describe('express', () => {
  let server: import('node:http').Server;
  const denials: Decision[] = [];
  before(async () => {
    await define('ex');
    const app = express();
    app.set('trust proxy', 'loopback');
    routes((path, options) => app.get(path, expressLimit(options), (_req, res) => { res.send('served'); }), 'ex', denials);
    app.use((_err: unknown, _req: unknown, res: any, _next: unknown) => { res.status(500).send('error'); });
    server = await new Promise((resolve) => { const s = app.listen(0, '127.0.0.1', () => resolve(s)); });
  });
  after(() => new Promise((resolve) => server.close(resolve)));
  behaves('ex', () => `http://127.0.0.1:${(server.address() as AddressInfo).port}`, denials);
});

describe('fastify', () => {
  const app = Fastify({ trustProxy: '127.0.0.1' });
  const denials: Decision[] = [];
  before(async () => {
    await define('fy');
    routes((path, options) => app.get(path, { onRequest: fastifyLimit(options) }, async () => 'served'), 'fy', denials);
    await app.listen({ port: 0, host: '127.0.0.1' });
  });
  after(() => app.close());
  behaves('fy', () => `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, denials);
});

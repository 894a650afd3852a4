// The client against the portable limiter in PGlite: decisions and header
// values of take, check, refund and takeAll, the transactional form, and
// leases (lease, release).

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import type { PGlite } from '@electric-sql/pglite';
import { RateLimitUnavailableError, RateLimitedError, RateLimiter } from '../src';
import { asPool, portableDatabase } from './pglite';
import { assertLimit, assertWait, stopwatch } from './waits';

let db: PGlite;
let limiter: RateLimiter;

// Policies that refill slowly (see waits.ts): "api" a token every 720 s,
// "orders" every 1800 s, "llm" every 8640 s; "exports" a concurrency limit,
// one place at once; "calls" two places at once as leases of an hour.
before(async () => {
  db = await portableDatabase('limits');
  await db.exec(`
    SELECT limits.rate_limit_define('api', 5, '1 hour', burst => 3);
    SELECT limits.rate_limit_define('orders', 2, '1 hour');
    SELECT limits.rate_limit_define('llm', 10, '1 day', burst => 10, max_reserved => 5);
    SELECT limits.rate_limit_define_concurrency('exports', 1);
    SELECT limits.rate_limit_define_concurrency('calls', 2, lease => '1 hour');
    CREATE TABLE orders (id serial PRIMARY KEY, item text NOT NULL CHECK (item <> ''));`);
  limiter = new RateLimiter(asPool(db), { schema: 'limits' });
});
after(async () => db?.close());

test('take: granted while the burst lasts, then denied with Retry-After', async () => {
  const since = stopwatch();
  const seen = [];
  for (let i = 0; i < 4; i += 1) seen.push({ ...await limiter.take('api', 'user:1'), elapsed: since() });
  assert.deepEqual(seen.map((d) => d.allowed), [true, true, true, false]);
  assert.equal(seen[0].headers.RateLimit, '"api";r=2;t=720');
  assertLimit(seen[1].headers.RateLimit, '"api";r=1;t=720', seen[1].elapsed);
  assertLimit(seen[2].headers.RateLimit, '"api";r=0;t=720', seen[2].elapsed);
  assertLimit(seen[3].headers.RateLimit, '"api";r=0;t=720', seen[3].elapsed);
  assert.equal(seen[0].headers['RateLimit-Policy'], '"api";q=5;w=3600');
  assert.equal(seen[0].headers['Retry-After'], undefined);
  const denied = seen[3];
  assertWait(denied.headers['Retry-After'], 720, denied.elapsed, 'Retry-After');
  assert.equal(denied.name, 'api');
  assert.equal(denied.capacity, 3);
  assert.equal(denied.quota, 5);
  assert.equal(denied.per, 3600);
  assert.ok(denied.retryAfter !== null && denied.retryAfter >= 720 - denied.elapsed && denied.retryAfter <= 720,
    `retryAfter ${denied.retryAfter}, ${denied.elapsed} s since the first take`);
  assert.ok(denied.remaining >= 0 && denied.remaining < 1);
});

test('cost, check and refund', async () => {
  const checked = await limiter.check('api', 'user:2', { cost: 3 });
  assert.equal(checked.allowed, true);
  assert.equal(checked.headers.RateLimit, '"api";r=0;t=720'); // what the take would leave
  const taken = await limiter.take('api', 'user:2', { cost: 2 });
  assert.equal(taken.headers.RateLimit, '"api";r=1;t=720');
  assert.equal((await limiter.check('api', 'user:2', { cost: 2 })).allowed, false);
  const refunded = await limiter.refund('api', 'user:2', 2);
  assert.ok(refunded.remaining > 2.99, `remaining ${refunded.remaining}`);
  assert.equal((await limiter.take('api', 'user:2', { cost: 3 })).allowed, true);
});

test('a reservation waits, within maxWait', async () => {
  const since = stopwatch();
  assert.equal((await limiter.take('llm', 'team:1', { cost: 10 })).allowed, true);
  const none = await limiter.take('llm', 'team:1', { cost: 4 });
  assert.equal(none.allowed, false);
  // One token every 8640 s: 4 tokens are 34560 s away.
  assert.equal((await limiter.take('llm', 'team:1', { cost: 4, maxWait: 34000 })).allowed, false);
  const reserved = await limiter.take('llm', 'team:1', { cost: 4, maxWait: 35000 });
  const elapsed = since();
  assert.equal(reserved.allowed, true);
  assert.ok(reserved.retryAfter !== null && reserved.retryAfter >= 34560 - elapsed && reserved.retryAfter <= 34560,
    `retryAfter ${reserved.retryAfter}, ${elapsed} s since the first take`);
  assert.ok(reserved.remaining < -3.9, `remaining ${reserved.remaining}`);
  await assert.rejects(limiter.take('llm', 'team:1', { maxWait: -1 }), RangeError);
});

test('takeAll: all or none, with one list per header field', async () => {
  const since = stopwatch();
  const granted = await limiter.takeAll([['api', 'user:3', 2], ['orders', 'user:3']]);
  assert.equal(granted.allowed, true);
  assert.deepEqual(granted.remaining.map(Math.floor), [1, 1]);
  assert.equal(granted.headers.RateLimit, '"api";r=1;t=720, "orders";r=1;t=1800');
  assert.equal(granted.headers['RateLimit-Policy'], '"api";q=5;w=3600, "orders";q=2;w=3600');
  const denied = await limiter.takeAll([['api', 'user:3', 1], ['orders', 'user:3', 2]]);
  assert.equal(denied.allowed, false);
  assert.equal(denied.bindingName, 'orders');
  assert.equal(denied.bindingKey, 'user:3');
  assertWait(denied.headers['Retry-After'], 1800, since(), 'Retry-After');
  // Nothing taken: the api bucket still holds its token.
  assertLimit((await limiter.check('api', 'user:3')).headers.RateLimit, '"api";r=0;t=720', since());
  assert.equal((await limiter.take('api', 'user:3')).allowed, true);
});

test('transaction: a failed request gives its take back, a good one keeps it', async () => {
  const since = stopwatch();
  await assert.rejects(limiter.transaction('orders', 'user:4', {}, async (client) => {
    await client.query('INSERT INTO orders (item) VALUES ($1)', ['']);
  }), /check constraint/);
  assert.equal((await limiter.check('orders', 'user:4', { cost: 2 })).allowed, true);
  const { result, decision } = await limiter.transaction('orders', 'user:4', {}, async (client) => {
    const { rows } = await client.query('INSERT INTO orders (item) VALUES ($1) RETURNING item', ['book']);
    return rows[0].item;
  });
  assert.equal(result, 'book');
  assert.equal(decision.headers.RateLimit, '"orders";r=1;t=1800');
  await limiter.transaction('orders', 'user:4', {}, async () => 'pen');
  let ran = false;
  const denied = await limiter.transaction('orders', 'user:4', {}, async () => { ran = true; })
    .then(() => assert.fail('granted'), (err: unknown) => err);
  assert.ok(denied instanceof RateLimitedError);
  assert.equal(denied.statusCode, 429);
  assertWait(denied.headers['Retry-After'], 1800, since(), 'Retry-After');
  assert.equal(ran, false);
  const { rows } = await db.query<{ items: string }>("SELECT string_agg(item, ',' ORDER BY id) AS items FROM orders");
  assert.equal(rows[0].items, 'book');
});

test('the take inside a caller\'s own transaction rolls back with it', async () => {
  await db.transaction(async (tx) => {
    const d = await limiter.take('orders', 'user:5', { cost: 2, client: tx });
    assert.equal(d.allowed, true);
    await tx.rollback();
  });
  assert.equal((await limiter.check('orders', 'user:5', { cost: 2 })).allowed, true);
});

test('a concurrency limit: waits unknown (null) while a place is held, no Retry-After for a denial', async () => {
  const free = await limiter.check('exports', 'team:1', { cost: 0 });
  assert.deepEqual([free.allowed, free.retryAfter, free.resetAfter, free.refillAfter], [true, 0, 0, 0]);
  // PGlite has one session: the second take, in the transaction holding the
  // one place, is denied as another transaction's would be.
  const { result: denied, decision: granted } = await limiter.transaction('exports', 'team:1', {},
    async (client) => limiter.take('exports', 'team:1', { client }));
  assert.deepEqual([granted.allowed, granted.remaining, granted.retryAfter, granted.resetAfter, granted.refillAfter],
    [true, 0, 0, null, null]);
  assert.deepEqual(granted.headers, { 'RateLimit-Policy': '"exports";q=1', RateLimit: '"exports";r=0' });
  assert.deepEqual([denied.allowed, denied.remaining, denied.retryAfter, denied.resetAfter, denied.refillAfter],
    [false, 0, null, null, null]);
  assert.deepEqual(denied.headers, { 'RateLimit-Policy': '"exports";q=1', RateLimit: '"exports";r=0' });
  assert.deepEqual(new RateLimitedError(denied).headers, denied.headers);
  await db.transaction(async (tx) => {
    assert.equal((await limiter.take('exports', 'team:2', { client: tx })).allowed, true);
    const all = await limiter.takeAll([['api', 'team:2'], ['exports', 'team:2']], { client: tx });
    assert.deepEqual([all.allowed, all.retryAfter, all.bindingName], [false, null, 'exports']);
    assert.equal(all.headers['Retry-After'], undefined);
    await tx.rollback();
  });
  // Both transactions ended: no place held.
  for (const key of ['team:1', 'team:2']) {
    assert.equal((await limiter.check('exports', key, { cost: 0 })).resetAfter, 0);
  }
});

// The limiter's clock (clock_timestamp()), in milliseconds.
async function serverMillis(): Promise<number> {
  const { rows } = await db.query<{ ms: number }>(
    "SELECT pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) * 1000 AS ms");
  return Number(rows[0].ms);
}

test('lease: granted with an id and its expiry, denied while max_held leases are held', async () => {
  const since = stopwatch();
  const before = await serverMillis();
  const first = await limiter.lease('calls', 'team:1');
  const second = await limiter.lease('calls', 'team:1');
  const after = await serverMillis();
  for (const [d, r] of [[first, 1], [second, 0]] as const) {
    assert.equal(d.allowed, true);
    assert.equal(d.remaining, r);
    assert.match(d.lease ?? '', /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    assert.ok(d.expiresAt instanceof Date, `expiresAt ${d.expiresAt}`);
    // An hour after the call, by the limiter's clock.
    const at = d.expiresAt.getTime() - 3600_000;
    assert.ok(at >= Math.floor(before) && at <= Math.ceil(after),
      `expiresAt ${d.expiresAt.toISOString()}: an hour after the call, between ${before} and ${after}`);
  }
  assert.notEqual(first.lease, second.lease);
  assert.equal(first.capacity, 2);
  assert.equal(first.name, 'calls');
  assert.equal(first.headers['RateLimit-Policy'], '"calls";q=2');
  assert.equal(first.headers['Retry-After'], undefined);
  const denied = await limiter.lease('calls', 'team:1');
  const elapsed = since();
  assertLimit(first.headers.RateLimit, '"calls";r=1;t=3600', elapsed);
  assertLimit(denied.headers.RateLimit, '"calls";r=0;t=3600', elapsed);
  assert.deepEqual([denied.allowed, denied.remaining, denied.lease, denied.expiresAt], [false, 0, null, null]);
  // Until the first lease expires (a release may come sooner).
  assertWait(denied.headers['Retry-After'], 3600, elapsed, 'Retry-After');
  assert.ok(denied.retryAfter !== null && denied.retryAfter > 3600 - elapsed && denied.retryAfter <= 3600,
    `retryAfter ${denied.retryAfter}, ${elapsed} s since the first lease`);
  // Another key has its own places.
  assert.equal((await limiter.lease('calls', 'team:2', { cost: 2 })).allowed, true);
});

test('release: true once, then false; the place comes back', async () => {
  const first = await limiter.lease('calls', 'team:3', { cost: 2 });
  assert.equal(first.allowed, true);
  assert.equal((await limiter.lease('calls', 'team:3')).allowed, false);
  assert.equal(await limiter.release(first.lease), true);
  assert.equal(await limiter.release(first.lease), false);
  const again = await limiter.lease('calls', 'team:3');
  assert.deepEqual([again.allowed, again.remaining], [true, 1]);
});

test('a lease taken in the caller\'s transaction is given back by its rollback, a release undone', async () => {
  const kept = await limiter.lease('calls', 'team:4');
  await db.transaction(async (tx) => {
    assert.equal((await limiter.lease('calls', 'team:4', { client: tx })).allowed, true);
    assert.equal(await limiter.release(kept.lease, { client: tx }), true);
    await tx.rollback();
  });
  const d = await limiter.check('calls', 'team:4', { cost: 0 });
  assert.equal(d.remaining, 1); // the lease kept, and only it
  assert.equal(await limiter.release(kept.lease), true);
});

test('release: a denial\'s null lease and an unknown one are false, a malformed id an error to surface', async () => {
  const denied = await limiter.lease('calls', 'team:1');
  assert.equal(denied.lease, null);
  assert.equal(await limiter.release(denied.lease), false);
  assert.equal(await limiter.release(randomUUID()), false);
  await assert.rejects(limiter.release('not-a-lease'),
    (err: any) => err.code === '22P02' && RateLimiter.classify(err) === null &&
      !(err instanceof RateLimitUnavailableError));
  // A policy without a lease: the limiter's error, as it came.
  await assert.rejects(limiter.lease('exports', 'team:1'),
    (err: any) => err.code === '22023' && RateLimiter.classify(err) === null);
});

test('an undefined policy is an error to surface, not unavailability', async () => {
  await assert.rejects(limiter.take('nope', 'k'), (err: any) => err.code === '42704' && err.name !== 'RateLimitUnavailableError');
});

test('unqualified calls resolve through search_path', async () => {
  const db2 = await portableDatabase('rl');
  try {
    await db2.exec(`SET search_path = rl; SELECT rate_limit_define('x', 1, '1 second')`);
    const d = await new RateLimiter(db2).take('x', '');
    assert.equal(d.headers['RateLimit-Policy'], '"x";q=1;w=1');
  } finally {
    await db2.close();
  }
});

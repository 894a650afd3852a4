// The concurrency limit "exports" (one place at once) through pg-ratelimit,
// as installed from its packed tarball, on a pg Pool against PostgreSQL
// (test/cluster/clients.sh runs it against the extension and the portable
// limiter). Prints one line per check, "WHAT: VALUE", for clients.sh to
// match:
//
//   autocommit      a take on the pool, outside a transaction: the
//                   extension's error (SQLSTATE and the error's name: never
//                   RateLimitUnavailableError), or the portable limiter's
//                   grant
//   granted         transaction()'s take while it holds the place: allowed,
//                   retryAfter, resetAfter, refillAfter, Retry-After header
//   denied          transaction() on the pool's other connection meanwhile:
//                   RateLimitedError, its statusCode, the decision's
//                   retryAfter, its Retry-After header
//   free            a check of no place (cost 0) once both ended: resetAfter
//   lease           lease() of "calls" (two places at once, as leases): allowed,
//                   remaining, whether lease is a UUID and expiresAt an hour
//                   after the call (by the server's clock, read around it)
//   lease denied    a third lease: allowed, lease, expiresAt, and whether
//                   Retry-After is the first lease's time left
//   release         release() of the first lease, of it again, of null
//
// PG* as for psql; RL_SCHEMA: the limiter's schema (else search_path).
'use strict';

const { Pool } = require('pg');
const { RateLimiter } = require('pg-ratelimit');

const pool = new Pool({ max: 2, connectionTimeoutMillis: 5000 });
const limiter = new RateLimiter(pool, { schema: process.env.RL_SCHEMA || undefined });
const key = `node:${process.pid}`;
const show = (v) => (v === undefined ? 'undefined' : JSON.stringify(v));

async function main() {
  try {
    const d = await limiter.take('exports', `${key}:autocommit`);
    console.log(`autocommit: granted ${show(d.allowed)} ${show(d.retryAfter)}`);
  } catch (err) {
    console.log(`autocommit: ${err.code} ${err.name}`);
  }
  await limiter.transaction('exports', key, {}, async (_client, d) => {
    console.log(`granted: ${[d.allowed, d.retryAfter, d.resetAfter, d.refillAfter, d.headers['Retry-After']]
      .map(show).join(' ')}`);
    try {
      await limiter.transaction('exports', key, {}, async () => 'ran');
      console.log('denied: granted');
    } catch (err) {
      console.log(`denied: ${err.name} ${err.statusCode} ${show(err.decision?.retryAfter)} ` +
        `${show(err.headers?.['Retry-After'])}`);
    }
  });
  console.log(`free: ${show((await limiter.check('exports', key, { cost: 0 })).resetAfter)}`);
  // The limiter's clock (clock_timestamp()), in milliseconds.
  const millis = async () => Number((await pool.query(
    "SELECT pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) * 1000 AS ms")).rows[0].ms);
  const before = await millis();
  const first = await limiter.lease('calls', key);
  const after = await millis();
  const ahead = first.expiresAt instanceof Date ? first.expiresAt.getTime() - 3600_000 : NaN;
  console.log(`lease: ${[first.allowed, first.remaining].map(show).join(' ')} ` +
    `${/^[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}$/.test(first.lease)} ` +
    `${ahead >= Math.floor(before) && ahead <= Math.ceil(after)}`);
  await limiter.lease('calls', key);
  const denied = await limiter.lease('calls', key);
  // Retry-After: until the first lease expires, an hour after it less the
  // whole seconds since.
  const since = Math.ceil(((await millis()) - before) / 1000);
  const wait = Number(denied.headers['Retry-After']);
  console.log(`lease denied: ${[denied.allowed, denied.lease, denied.expiresAt].map(show).join(' ')} ` +
    `${wait >= 3600 - since && wait <= 3600}`);
  const released = [];
  for (const lease of [first.lease, first.lease, null]) released.push(await limiter.release(lease));
  console.log(`release: ${released.map(show).join(' ')}`);
}

main().then(() => pool.end(), (err) => {
  console.log(`error: ${err.stack}`);
  process.exitCode = 1;
  return pool.end();
});

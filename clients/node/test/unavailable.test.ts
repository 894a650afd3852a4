// Keys by address, and what an error of the database means: unreachable
// (a route may fail open), busy (never open), or anything else (surfaced).
// Real node-postgres pools against a port nothing listens on and against
// a server that accepts connections and never answers. (A pool whose every
// connection is in use is test/cluster/clients.sh's, against a real server.)

import assert from 'node:assert/strict';
import { createServer, type Server, type Socket } from 'node:net';
import { test } from 'node:test';
import { Pool } from 'pg';
import { RateLimitUnavailableError, RateLimiter, addressKey } from '../src';

test('addressKey: IPv4 as is, IPv6 by /64, mapped IPv4 as IPv4', () => {
  assert.equal(addressKey('192.0.2.1'), 'ip:192.0.2.1');
  assert.equal(addressKey('2001:db8:1:2::1'), 'ip:2001:db8:1:2::/64');
  assert.equal(addressKey('2001:db8:1:2:ffff:ffff:ffff:ffff'), 'ip:2001:db8:1:2::/64');
  assert.equal(addressKey('2001:0db8:0000:0003:0:0:0:1'), 'ip:2001:db8:0:3::/64');
  assert.equal(addressKey('::ffff:192.0.2.9'), 'ip:192.0.2.9');
  assert.equal(addressKey('fe80::1%eth0'), 'ip:fe80::/64');
  assert.equal(addressKey('::1'), 'ip:::/64');
  assert.equal(addressKey(undefined), 'ip:unknown');
  assert.equal(addressKey('not an address'), 'ip:unknown');
});

test('classify: SQLSTATEs and socket errors', () => {
  const c = RateLimiter.classify;
  assert.equal(c(Object.assign(new Error('x'), { code: 'ECONNREFUSED' })), 'unreachable');
  assert.equal(c(Object.assign(new Error('x'), { code: 'ENOENT' })), 'unreachable');
  for (const code of ['08006', '08001', '57P01', '57P02', '57P03']) {
    assert.equal(c(Object.assign(new Error('x'), { code })), 'unreachable', code);
  }
  assert.equal(c(new Error('Connection terminated unexpectedly')), 'unreachable');
  assert.equal(c(new Error('timeout exceeded when trying to connect')), 'busy');
  assert.equal(c(new Error('Connection terminated due to connection timeout',
    { cause: new Error('Connection terminated unexpectedly') })), 'busy');
  for (const code of ['53300', '57014', 'ETIMEDOUT']) {
    assert.equal(c(Object.assign(new Error('x'), { code })), 'busy', code);
  }
  for (const code of ['42704', '22023', '42501', '40001', '57P04']) {
    assert.equal(c(Object.assign(new Error('x'), { code })), null, code);
  }
  assert.equal(c(new Error('Connection terminated')), null); // ended by the application itself
  assert.equal(c(new TypeError('bug')), null);
  assert.equal(c(new Error('wrapped', { cause: Object.assign(new Error('x'), { code: 'ECONNREFUSED' }) })), 'unreachable');
});

async function listening(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as { port: number }).port;
}

test('a real pool: connection refused is unreachable', async () => {
  const probe = createServer();
  const port = await listening(probe);
  await new Promise((resolve) => probe.close(resolve)); // now nothing listens there
  const pool = new Pool({ host: '127.0.0.1', port, user: 'x', database: 'x', connectionTimeoutMillis: 2000 });
  try {
    const err = await new RateLimiter(pool).take('api', 'k').then(() => assert.fail('answered'), (e) => e);
    assert.ok(err instanceof RateLimitUnavailableError, String(err));
    assert.equal(err.reason, 'unreachable');
    assert.equal((err.cause as { code?: string }).code, 'ECONNREFUSED');
    assert.equal(err.statusCode, 503);
  } finally {
    await pool.end();
  }
});

test('a real pool: a server that never answers is busy, not unreachable', async () => {
  const sockets: Socket[] = [];
  const silent = createServer((s) => { sockets.push(s); });
  const port = await listening(silent);
  const pool = new Pool({ host: '127.0.0.1', port, user: 'x', database: 'x', max: 1, connectionTimeoutMillis: 300 });
  try {
    const err = await new RateLimiter(pool).take('api', 'k').then(() => assert.fail('answered'), (e) => e);
    assert.ok(err instanceof RateLimitUnavailableError, String(err));
    assert.equal(err.reason, 'busy');
    assert.equal((err.cause as Error).message, 'Connection terminated due to connection timeout');
  } finally {
    for (const s of sockets) s.destroy();
    await pool.end();
    await new Promise((resolve) => silent.close(resolve));
  }
});

// A PGlite database with the portable limiter loaded, for the tests: the
// extension script of ratelimit_portable as `make` builds it for the
// current version, installed as CREATE EXTENSION would (its schema and
// owner in place of @extschema@ and @extowner@), less what only an
// extension's script may run: psql's guard, pg_extension_config_dump, and
// the block that hands the extension's objects to its owner (a psql
// install, as this one, belongs to the role that runs it).

import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import type { PoolLike, Queryable } from '../src';

// The checkout's build (from build/test), or RL_PORTABLE_SCRIPT when the
// package is tested outside the checkout.
const ROOT = join(__dirname, '..', '..', '..', '..');
function scriptPath(): string {
  if (process.env.RL_PORTABLE_SCRIPT) return process.env.RL_PORTABLE_SCRIPT;
  const control = readFileSync(join(ROOT, 'ratelimit_portable.control'), 'utf8');
  const version = /^default_version\s*=\s*'([^']+)'/m.exec(control)?.[1];
  const path = join(ROOT, 'portable', `ratelimit_portable--${version}.sql`);
  if (!existsSync(path)) throw new Error(`${path} is not built: run make in the checkout first`);
  return path;
}

export async function portableDatabase(schema = 'limits'): Promise<PGlite> {
  const db = await PGlite.create();
  const script = readFileSync(scriptPath(), 'utf8')
    .replace(/^\\echo .*$/m, '')
    .replace(/^SELECT pg_catalog\.pg_extension_config_dump\(.*$/m, '')
    .replace(/^DO \$owner\$[\s\S]*?^\$owner\$;$/m, '')
    .replaceAll('@extschema@', schema)
    .replaceAll('@extowner@', 'postgres');
  await db.exec(`CREATE SCHEMA ${schema}; SET search_path = ${schema};`);
  await db.exec(script);
  await db.exec('RESET search_path');
  return db;
}

/**
 * PGlite as a pg Pool: one connection, handed out to one caller at a time
 * (so that a transaction's statements are not interleaved with others').
 */
export function asPool(db: PGlite): PoolLike {
  let queue: Promise<void> = Promise.resolve();
  const query = (text: string, values?: unknown[]) => db.query(text, values as any[]);
  return {
    query: (text, values) => {
      const result = queue.then(() => query(text, values));
      queue = result.then(() => {}, () => {});
      return result;
    },
    connect: () => new Promise((resolve) => {
      queue = queue.then(() => new Promise<void>((release) => {
        resolve({ query, release: () => release() });
      }));
    }),
  };
}

export type { Queryable };

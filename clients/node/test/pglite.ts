// A PGlite database with the portable limiter loaded, for the tests: the
// extension script of ratelimit_portable, installed as CREATE EXTENSION
// would (its schema and owner in place of @extschema@ and @extowner@),
// less the lines only an extension's script may run.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import type { PoolLike, Queryable } from '../src';

// The repository's copy (from build/test), or RL_PORTABLE_SCRIPT when the
// package is tested outside the repository.
const SCRIPT = process.env.RL_PORTABLE_SCRIPT ||
  join(__dirname, '..', '..', '..', '..', 'portable', 'ratelimit_portable--0.3.0.sql');

export async function portableDatabase(schema = 'limits'): Promise<PGlite> {
  const db = await PGlite.create();
  const script = readFileSync(SCRIPT, 'utf8')
    .replace(/^\\echo .*$/m, '')                                        // psql's guard
    .replace(/^SELECT pg_catalog\.pg_extension_config_dump\(.*$/m, '')  // CREATE EXTENSION only
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

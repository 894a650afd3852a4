// The client: one SQL statement per call, on a pg Pool (or on any object
// with pg's query(text, values) → { rows }, such as a pooled client inside
// the caller's transaction, or PGlite), against the ratelimit extension or
// the portable limiter alike.

import {
  AcquireTimeoutError, RateLimitedError, RateLimitUnavailableError, isAcquireTimeout,
  isBusyError, isConnectionError,
} from './errors';

/** What runs a statement: a pg Pool, a pg (pooled) client, a PGlite database or transaction. */
export interface Queryable {
  query(text: string, values?: unknown[]): Promise<{ rows: any[] }>;
}

/** A pooled client, as pg's Pool.connect() hands it out. */
export interface PoolClientLike extends Queryable {
  release(err?: Error | boolean): void;
}

/** A pg Pool: query() for single statements, connect() for transactions. */
export interface PoolLike extends Queryable {
  connect(): Promise<PoolClientLike>;
}

/** The values of the response header fields a decision gives. */
export interface RateLimitHeaders {
  'RateLimit-Policy': string;
  RateLimit: string;
  /**
   * Present on a denial only (whole seconds, rounded up), and not when its
   * wait is unknown (a held place of a concurrency limit denied it).
   */
  'Retry-After'?: string;
}

/**
 * The answer of rate_limit_take, rate_limit_check and rate_limit_refund. A
 * wait is null when nobody can know it: a concurrency limit's `retryAfter`
 * when a held place denied the take (a place comes back when a holder's
 * transaction ends), its `resetAfter` and `refillAfter` while any place is held.
 */
export interface Decision {
  allowed: boolean;
  /** Tokens left; negative while reserved debt is outstanding. */
  remaining: number;
  /**
   * Seconds: denied, until the same call would succeed; granted by
   * reservation, until the work may start. Null: denied by a held place.
   */
  retryAfter: number | null;
  /** Seconds until the bucket is full again; null while a place of a concurrency limit is held. */
  resetAfter: number | null;
  /** The policy's burst. */
  capacity: number;
  name: string;
  /** Tokens per `per` seconds: the policy's rate. */
  quota: number;
  per: number;
  /** Seconds until more quota arrives; null while a place of a concurrency limit is held. */
  refillAfter: number | null;
  headers: RateLimitHeaders;
}

/**
 * The answer of rate_limit_lease: the decision (places of a concurrency
 * limit defined with a lease: `remaining` the places free, `retryAfter` when
 * denied the seconds until enough leases expire, though a release may come
 * sooner), the lease's id and when it expires. Both null when denied, and
 * for a cost of 0 (a look).
 */
export interface LeaseDecision extends Decision {
  /** The lease's id (a UUID), for `release()`: keep it as you would a session token. */
  lease: string | null;
  /** When the lease expires, by the limiter's clock. */
  expiresAt: Date | null;
}

/** The answer of rate_limit_take_all. */
export interface AllDecision {
  allowed: boolean;
  /** Seconds, as Decision's; null when a held place of a concurrency limit denied the call. */
  retryAfter: number | null;
  /** The limit that denied, or when granted the one left with the smallest share of its burst. */
  bindingName: string;
  bindingKey: string;
  /** Tokens per limit, in the order given. */
  remaining: number[];
  /** Each field a list, one item per limit in the order given. */
  headers: RateLimitHeaders;
}

export interface CallOptions {
  /** Tokens to take (default 1). */
  cost?: number;
  /** Seconds a reservation may wait (the policy must allow debt: max_reserved). */
  maxWait?: number;
  /**
   * Where to run the statement instead of the pool: a client inside the
   * caller's transaction, so that its ROLLBACK gives the tokens back.
   */
  client?: Queryable;
}

export interface RateLimiterOptions {
  /** The schema the limiter's functions live in; unqualified (search_path) if not given. */
  schema?: string;
  /**
   * Milliseconds to wait for a pooled connection in transaction(), when the
   * pool itself has no connectionTimeoutMillis (default 5000).
   */
  acquireTimeoutMillis?: number;
}

function quoteIdent(name: string): string {
  return '"' + name.replace(/"/g, '""') + '"';
}

function headersOf(row: { ratelimit_policy: string; ratelimit: string; retry_after_header: string | null }): RateLimitHeaders {
  const headers: RateLimitHeaders = { 'RateLimit-Policy': row.ratelimit_policy, RateLimit: row.ratelimit };
  if (row.retry_after_header !== null && row.retry_after_header !== undefined) {
    headers['Retry-After'] = String(row.retry_after_header);
  }
  return headers;
}

// float8 columns come back as numbers from pg and PGlite; text just in case a
// type parser was changed.
const num = (v: unknown): number => (typeof v === 'number' ? v : Number(v));
// A wait: null (SQL NULL) when nobody can know it.
const wait = (v: unknown): number | null => (v === null || v === undefined ? null : num(v));
// timestamptz comes back as a Date from pg and PGlite; text if a type parser was changed.
const timestamp = (v: unknown): Date | null =>
  (v === null || v === undefined ? null : v instanceof Date ? v : new Date(String(v)));

function decisionOf(row: any): Decision {
  return {
    allowed: row.allowed,
    remaining: num(row.remaining),
    retryAfter: wait(row.retry_after),
    resetAfter: wait(row.reset_after),
    capacity: num(row.capacity),
    name: row.name,
    quota: num(row.quota),
    per: num(row.per_seconds),
    refillAfter: wait(row.refill_after),
    headers: headersOf(row),
  };
}

/**
 * Rate limits from the database: each method is one statement, run on the
 * pool (autocommit: its own short transaction), or on `options.client`
 * (inside the caller's transaction).
 */
export class RateLimiter {
  readonly pool: Queryable;
  private readonly acquireTimeoutMillis: number;
  private readonly sql: Record<'take' | 'check' | 'refund' | 'takeAll' | 'lease' | 'release', string>;

  constructor(pool: Queryable, options: RateLimiterOptions = {}) {
    this.pool = pool;
    // pg's Pool emits 'error' when an idle connection is lost (the server
    // restarted, say); unheard, that would end the process. The next query
    // makes a new connection.
    const emitter = pool as Partial<import('node:events').EventEmitter>;
    if (typeof emitter.on === 'function' && typeof emitter.listenerCount === 'function' &&
        emitter.listenerCount('error') === 0) {
      emitter.on('error', () => {});
    }
    this.acquireTimeoutMillis = options.acquireTimeoutMillis ?? 5000;
    const s = options.schema ? quoteIdent(options.schema) + '.' : '';
    // Arguments cast to the functions' own types, so that no overload with
    // other argument types can capture the call.
    const single = (fn: string, args: string, more = '') => `
      SELECT d.allowed, d.remaining, d.retry_after, d.reset_after, d.capacity, d.name, d.quota,
             pg_catalog.date_part('epoch', d.per) AS per_seconds, d.refill_after,
             h.ratelimit_policy, h.ratelimit, h.retry_after AS retry_after_header${more}
        FROM ${s}${fn}(${args}) AS d, LATERAL ${s}rate_limit_headers(d) AS h`;
    const takeArgs = '$1::text, $2::text, $3::pg_catalog.float8, $4::pg_catalog.interval';
    this.sql = {
      take: single('rate_limit_take', takeArgs),
      check: single('rate_limit_check', takeArgs),
      refund: single('rate_limit_refund', '$1::text, $2::text, $3::pg_catalog.float8'),
      lease: single('rate_limit_lease', '$1::text, $2::text, $3::pg_catalog.float8', ', d.lease, d.expires_at'),
      release: `SELECT ${s}rate_limit_release($1::pg_catalog.uuid) AS released`,
      takeAll: `
        SELECT d.allowed, d.retry_after, d.binding_name, d.binding_key, d.remaining,
               h.ratelimit_policy, h.ratelimit, h.retry_after AS retry_after_header
          FROM ${s}rate_limit_take_all($1::text[], $2::text[], $3::pg_catalog.float8[],
                                       $4::pg_catalog.interval) AS d,
               LATERAL ${s}rate_limit_headers(d) AS h`,
    };
  }

  /** Takes `cost` tokens (default 1) from the bucket (name, key). */
  async take(name: string, key: string, options: CallOptions = {}): Promise<Decision> {
    return this.single(this.sql.take, [name, key, options.cost ?? 1, interval(options.maxWait)], options.client);
  }

  /** The answer a take would get now, without taking anything. */
  async check(name: string, key: string, options: CallOptions = {}): Promise<Decision> {
    return this.single(this.sql.check, [name, key, options.cost ?? 1, interval(options.maxWait)], options.client);
  }

  /** Gives `amount` tokens back (the role needs EXECUTE on rate_limit_refund). */
  async refund(name: string, key: string, amount: number, options: { client?: Queryable } = {}): Promise<Decision> {
    return this.single(this.sql.refund, [name, key, amount], options.client);
  }

  /**
   * Takes `cost` places (default 1) of (name, key), a concurrency limit
   * defined with a lease, as one lease: held until it expires or is
   * released, also after the transaction that took it commits (its
   * rollback gives it back, on `options.client`).
   */
  async lease(name: string, key: string, options: { cost?: number; client?: Queryable } = {}): Promise<LeaseDecision> {
    const row = await this.run(this.sql.lease, [name, key, options.cost ?? 1], options.client);
    return { ...decisionOf(row), lease: row.lease ?? null, expiresAt: timestamp(row.expires_at) };
  }

  /**
   * Gives a lease's places back now: true once, false for a lease no longer
   * in force (unknown, expired, already released) or null (a denial's).
   */
  async release(lease: string | null, options: { client?: Queryable } = {}): Promise<boolean> {
    const row = await this.run(this.sql.release, [lease ?? null], options.client);
    return row.released;
  }

  /** Takes from every limit or from none: `limits` as [name, key, cost?]. */
  async takeAll(limits: Array<[string, string, number?]>,
    options: { maxWait?: number; client?: Queryable } = {}): Promise<AllDecision> {
    const values = [limits.map((l) => l[0]), limits.map((l) => l[1]), limits.map((l) => l[2] ?? 1),
      interval(options.maxWait)];
    const row = await this.run(this.sql.takeAll, values, options.client);
    return {
      allowed: row.allowed,
      retryAfter: wait(row.retry_after),
      bindingName: row.binding_name,
      bindingKey: row.binding_key,
      remaining: (row.remaining as unknown[]).map(num),
      headers: headersOf(row),
    };
  }

  /**
   * The transactional form: takes from (name, key) inside a transaction on a
   * connection of the pool, runs `work` in that transaction, and commits.
   * A denied take rolls back and throws RateLimitedError (statusCode 429,
   * `headers` with Retry-After when its wait is known); an error of `work`
   * rolls back, giving the tokens back, and is thrown again. The pool must
   * have connect() (pg's Pool).
   */
  async transaction<T>(name: string, key: string, options: Omit<CallOptions, 'client'>,
    work: (client: Queryable, decision: Decision) => Promise<T>): Promise<{ result: T; decision: Decision }> {
    const pool = this.pool as Partial<PoolLike>;
    if (typeof pool.connect !== 'function') {
      throw new TypeError('RateLimiter.transaction needs a pool with connect() (pg.Pool)');
    }
    const client = await this.classified(() => this.acquire(pool as PoolLike));
    let broken: Error | undefined;
    try {
      await this.classified(() => client.query('BEGIN'));
      const decision = await this.take(name, key, { ...options, client });
      if (!decision.allowed) {
        await client.query('ROLLBACK');
        throw new RateLimitedError(decision);
      }
      const result = await work(client, decision);
      await this.classified(() => client.query('COMMIT'));
      return { result, decision };
    } catch (err) {
      if (!(err instanceof RateLimitedError)) {
        await client.query('ROLLBACK').catch((e: Error) => { broken = e; });
      }
      throw err;
    } finally {
      client.release(broken);
    }
  }

  /**
   * Why an error means the limiter had no answer: `'unreachable'` (no
   * connection to the database can be made or kept), `'busy'` (the pool or
   * the server gave no answer in time), or null (any other error: a bug or
   * a misconfiguration, to surface).
   */
  static classify(err: unknown): 'unreachable' | 'busy' | null {
    if (err instanceof RateLimitUnavailableError) return err.reason;
    if (isAcquireTimeout(err) || isBusyError(err)) return 'busy';
    if (isConnectionError(err)) return 'unreachable';
    return null;
  }

  private async acquire(pool: PoolLike): Promise<PoolClientLike> {
    // pg's Pool has its own connectionTimeoutMillis; without one, bound the wait here.
    const own = (pool as { options?: { connectionTimeoutMillis?: number } }).options?.connectionTimeoutMillis;
    if (own) return pool.connect();
    let timer: NodeJS.Timeout | undefined;
    let timedOut = false;
    const pending = pool.connect();
    try {
      return await Promise.race([pending, new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          timedOut = true;
          reject(new AcquireTimeoutError(this.acquireTimeoutMillis));
        }, this.acquireTimeoutMillis);
      })]);
    } finally {
      clearTimeout(timer);
      if (timedOut) pending.then((c) => c.release(), () => {});
    }
  }

  private async run(text: string, values: unknown[], client?: Queryable): Promise<any> {
    const { rows } = await this.classified(() => (client ?? this.pool).query(text, values));
    return rows[0];
  }

  private async single(text: string, values: unknown[], client?: Queryable): Promise<Decision> {
    return decisionOf(await this.run(text, values, client));
  }

  // Errors that mean no answer become RateLimitUnavailableError; others pass.
  private async classified<T>(op: () => Promise<T>): Promise<T> {
    try {
      return await op();
    } catch (err) {
      const reason = RateLimiter.classify(err);
      if (reason) throw new RateLimitUnavailableError(reason, err);
      throw err;
    }
  }
}

function interval(seconds: number | undefined): string | null {
  if (seconds === undefined || seconds === null) return null;
  if (!Number.isFinite(seconds) || seconds < 0) throw new RangeError('maxWait must be a finite number of seconds ≥ 0');
  return `${seconds} seconds`;
}

// What the Express and Fastify middleware share: the options, the key of a
// request, and the decision turned into a status and header fields.

import { RateLimitUnavailableError } from './errors';
import { addressKey } from './keys';
import { RateLimiter, type Decision, type Queryable } from './client';

export interface LimitOptions<Req> {
  /** The client (`new RateLimiter(pool, { schema })`), or `pool` instead. */
  limiter?: RateLimiter;
  /** A pg Pool, for a RateLimiter of its own with the functions on search_path. */
  pool?: Queryable;
  /** The policy's name (rate_limit_define). */
  name: string;
  /**
   * The account of an authenticated request (its key becomes `user:ID`);
   * requests without one are keyed by address.
   */
  account?: (req: Req) => string | number | null | undefined;
  /** The whole key instead (overrides `account` and the address). */
  key?: (req: Req) => string | Promise<string>;
  /** Tokens a request takes: a number (default 1) or a function of the request. */
  cost?: number | ((req: Req) => number);
  /**
   * When the database cannot be reached (see RateLimitUnavailableError):
   * `'closed'` (the default) answers 503, `'open'` serves the request
   * unlimited. A busy pool or server always answers 503.
   */
  fail?: 'open' | 'closed';
  /**
   * Decide and count, but never refuse: a denied request is served, with
   * the RateLimit-Policy and RateLimit fields and no Retry-After, and
   * `onDenied` is told.
   */
  reportOnly?: boolean;
  /** Called for every denial (also in report-only mode, where the request goes on). */
  onDenied?: (decision: Decision, req: Req) => void;
  /** Called when the database cannot be reached and the route fails open. */
  onFailOpen?: (error: RateLimitUnavailableError, req: Req) => void;
}

/** What to do with a request. */
export type Outcome =
  | { action: 'serve'; headers: Record<string, string>; decision?: Decision }
  | { action: 'refuse'; status: 429 | 503; headers: Record<string, string>; body: string; decision?: Decision };

/** The key of a request: its account (`user:ID`) if it has one, else its address. */
export async function requestKey<Req>(options: LimitOptions<Req>, req: Req, address: string | undefined): Promise<string> {
  if (options.key) return options.key(req);
  const account = options.account?.(req);
  if (account !== null && account !== undefined && account !== '') return `user:${account}`;
  return addressKey(address);
}

/** The options with their limiter: `limiter`, or one over `pool`. */
export function withLimiter<Req, T extends LimitOptions<Req>>(options: T): T & { limiter: RateLimiter } {
  if (options.limiter) return options as T & { limiter: RateLimiter };
  if (!options.pool) throw new TypeError('rateLimit needs a limiter or a pool');
  return { ...options, limiter: new RateLimiter(options.pool) };
}

/**
 * Takes for one request and says what to answer. Throws what is neither an
 * answer nor unavailability. `options` as withLimiter returns them.
 */
export async function decide<Req>(options: LimitOptions<Req> & { limiter: RateLimiter }, req: Req,
  address: string | undefined): Promise<Outcome> {
  const cost = typeof options.cost === 'function' ? options.cost(req) : options.cost ?? 1;
  let decision: Decision;
  try {
    const key = await requestKey(options, req, address);
    decision = await options.limiter.take(options.name, key, { cost });
  } catch (err) {
    if (!(err instanceof RateLimitUnavailableError)) throw err;
    if (err.reason === 'unreachable' && options.fail === 'open') {
      options.onFailOpen?.(err, req);
      return { action: 'serve', headers: {} };
    }
    return { action: 'refuse', status: 503, headers: { ...err.headers }, body: 'rate limiter unavailable\n' };
  }
  const { 'Retry-After': retryAfter, ...fields } = decision.headers;
  if (decision.allowed) return { action: 'serve', headers: fields, decision };
  options.onDenied?.(decision, req);
  if (options.reportOnly) return { action: 'serve', headers: fields, decision };
  return { action: 'refuse', status: 429, headers: { ...decision.headers }, body: 'too many requests\n', decision };
}

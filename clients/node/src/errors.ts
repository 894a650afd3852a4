// What went wrong when the limiter could not answer: the database cannot be
// reached (the one case a route may fail open for), no answer came in time
// (a busy pool or server: 503, never open), or anything else (a bug or a
// misconfiguration to surface, never a reason to serve a request unlimited).

import type { Decision, AllDecision } from './client';

/** Why the limiter had no answer: see {@link RateLimitUnavailableError}. */
export type UnavailableReason = 'unreachable' | 'busy';

/**
 * The limiter had no answer. `reason` is `'unreachable'` when no connection
 * to the database could be made or kept (a connection refused or reset, no
 * such socket, SQLSTATE class 08, 57P01 to 57P03 while the server shuts down
 * or starts), and `'busy'` when no answer came in time: every connection of
 * the pool stayed in use for longer than the acquire timeout, a connection
 * attempt timed out, the server refused more connections (53300) or
 * cancelled the statement (57014, statement_timeout). Only `'unreachable'`
 * lets a fail-open route through. `statusCode` (503) and `headers`
 * (Retry-After) are what Express's and Fastify's default error handlers send.
 */
export class RateLimitUnavailableError extends Error {
  readonly reason: UnavailableReason;
  readonly statusCode = 503;
  readonly headers: Record<string, string> = { 'Retry-After': '1' };
  constructor(reason: UnavailableReason, cause?: unknown) {
    super(reason === 'unreachable'
      ? 'rate limiter unavailable: the database cannot be reached'
      : 'rate limiter unavailable: no answer in time (the pool or the server is busy)', { cause });
    this.name = 'RateLimitUnavailableError';
    this.reason = reason;
  }
}

/**
 * A take that was denied, thrown by `RateLimiter.transaction` after its
 * rollback. `statusCode` (429) and `headers` (the decision's, Retry-After
 * included unless its wait is unknown) are what Express's and Fastify's
 * default error handlers send.
 */
export class RateLimitedError extends Error {
  readonly decision: Decision | AllDecision;
  readonly statusCode = 429;
  readonly headers: Record<string, string>;
  constructor(decision: Decision | AllDecision) {
    super('rate limited');
    this.name = 'RateLimitedError';
    this.decision = decision;
    this.headers = { ...decision.headers };
  }
}

/** The acquire timeout of the limiter's own wait for a pooled connection. */
export class AcquireTimeoutError extends Error {
  constructor(millis: number) {
    super(`no connection of the pool was free within ${millis} ms`);
    this.name = 'AcquireTimeoutError';
  }
}

// Errors of the socket under a connection (Node's system error codes).
const SOCKET_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'ENOENT', 'ENOTFOUND', 'EAI_AGAIN',
  'EHOSTUNREACH', 'EHOSTDOWN', 'ENETUNREACH', 'ENETDOWN', 'EPIPE',
]);

// node-postgres' own words for a connection lost or never made.
const CONNECTION_MESSAGES = [
  'Connection terminated unexpectedly',        // the server went away mid-connection
  'Client has encountered a connection error and is not queryable', // lost its connection
  'Client was closed and is not queryable',
];

/**
 * True if `err` says that no connection to the database can be made or
 * kept, rather than being one of the database's answers: SQLSTATE class 08
 * (connection exception), 57P01 to 57P03 (the server shuts down, or cannot
 * accept connections yet), a socket error, or node-postgres' message for a
 * lost connection. Looks through `cause` chains. A pool that is merely busy
 * is not such an error (see `RateLimiter.classify`).
 */
export function isConnectionError(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e != null && depth < 8; depth += 1) {
    if (typeof e !== 'object') return false;
    const { code, message } = e as { code?: unknown; message?: unknown };
    if (typeof code === 'string') {
      // Before SQLSTATEs: EPIPE has their shape.
      if (SOCKET_CODES.has(code)) return true;
      if (/^[0-9A-Z]{5}$/.test(code)) {
        // A SQLSTATE: the server answered.
        return code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03';
      }
    }
    if (typeof message === 'string' && CONNECTION_MESSAGES.includes(message)) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/**
 * True if `err` says the database gave no answer in time, though it may be
 * reachable: a connection attempt that timed out, a TCP timeout, too many
 * connections (53300), a statement cancelled (57014, statement_timeout).
 * Never a reason to serve a request unlimited.
 */
export function isBusyError(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e != null && depth < 8; depth += 1) {
    if (typeof e !== 'object') return false;
    const { code, message } = e as { code?: unknown; message?: unknown };
    if (code === 'ETIMEDOUT' || code === '53300' || code === '57014') return true;
    if (message === 'Connection terminated due to connection timeout' || message === 'timeout expired' ||
        message === 'Query read timeout') {
      return true;
    }
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/** True if `err` is a pool's timeout while waiting for a connection. */
export function isAcquireTimeout(err: unknown): boolean {
  if (err instanceof AcquireTimeoutError) return true;
  // pg-pool's connectionTimeoutMillis, reached while waiting for a client
  // that another request holds (a connection being made that times out
  // says "Connection terminated due to connection timeout" instead).
  return typeof err === 'object' && err !== null &&
    (err as { message?: unknown }).message === 'timeout exceeded when trying to connect';
}

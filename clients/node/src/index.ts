export {
  RateLimiter, type AllDecision, type CallOptions, type Decision, type LeaseDecision, type PoolClientLike,
  type PoolLike, type Queryable, type RateLimitHeaders, type RateLimiterOptions,
} from './client';
export {
  AcquireTimeoutError, RateLimitedError, RateLimitUnavailableError, isAcquireTimeout, isBusyError,
  isConnectionError, type UnavailableReason,
} from './errors';
export { addressKey } from './keys';
export { decide, requestKey, withLimiter, type LimitOptions, type Outcome } from './middleware';

// Express middleware: `app.use(rateLimit({ limiter, name: 'api' }))`, or per
// route. The address is Express's req.ip, which honours the app's
// 'trust proxy' setting: name your proxies there, never `true` blindly.

import { decide, withLimiter, type LimitOptions } from './middleware';

export type { LimitOptions } from './middleware';

/** What the middleware uses of Express's request (so no @types/express is needed). */
export interface ExpressRequestLike {
  ip?: string;
}

/** What the middleware uses of Express's response. */
export interface ExpressResponseLike {
  set(fields: Record<string, string>): unknown;
  status(code: number): { type(type: string): { send(body: string): unknown } };
}

/** A middleware that takes from the limit `options.name` for each request. */
export function rateLimit<Req extends ExpressRequestLike = ExpressRequestLike>(options: LimitOptions<Req>) {
  const limit = withLimiter<Req, LimitOptions<Req>>(options);
  return (req: Req, res: ExpressResponseLike, next: (err?: unknown) => void): void => {
    decide(limit, req, req.ip).then((outcome) => {
      res.set(outcome.headers);
      if (outcome.action === 'serve') return next();
      res.status(outcome.status).type('text/plain').send(outcome.body);
    }, next);
  };
}

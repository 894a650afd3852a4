// Fastify hook: `fastify.addHook('onRequest', rateLimit({ limiter, name: 'api' }))`,
// or per route (`{ onRequest: rateLimit(...) }`). The address is request.ip,
// which honours the server's trustProxy option.

import type { FastifyReply, FastifyRequest } from 'fastify';
import { decide, withLimiter, type LimitOptions } from './middleware';

export type { LimitOptions } from './middleware';

/** An onRequest (or preHandler) hook that takes from the limit `options.name`. */
export function rateLimit(options: LimitOptions<FastifyRequest>) {
  const limit = withLimiter<FastifyRequest, LimitOptions<FastifyRequest>>(options);
  return async function rateLimitHook(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | void> {
    const outcome = await decide(limit, request, request.ip);
    reply.headers(outcome.headers);
    if (outcome.action === 'refuse') {
      // Returning the reply ends the request here.
      return reply.code(outcome.status).type('text/plain').send(outcome.body);
    }
  };
}

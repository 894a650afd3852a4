"""ASGI middleware (Starlette, FastAPI, any ASGI app) and a FastAPI
dependency, over an AsyncRateLimiter.

    app.add_middleware(RateLimitMiddleware, limiter=limiter, name="api")
    @app.get("/search", dependencies=[Depends(RateLimit(limiter, "search", cost=5))])

The address is the ASGI scope's client, which the server sets from
X-Forwarded-For only for the proxies it trusts (uvicorn's
--forwarded-allow-ips, 127.0.0.1 by default; --no-proxy-headers to ignore
the header)."""

from __future__ import annotations

from typing import Any, Optional

from ._core import RateLimitUnavailable
from ._decide import Limit, Outcome, answer, unavailable
from .client import AsyncRateLimiter


async def _decide(limiter: AsyncRateLimiter, limit: Limit, request, address: Optional[str]) -> Outcome:
    try:
        decision = await limiter.take(limit.name, limit.key_of(request, address), limit.cost_of(request))
    except RateLimitUnavailable as err:
        return unavailable(limit, err, request)
    return answer(limit, decision, request)


class RateLimitMiddleware:
    """Takes from the limit ``name`` for every HTTP request; options as
    ``Limit``'s. The callables get a ``starlette.requests.Request``."""

    def __init__(self, app, limiter: AsyncRateLimiter, name: str, **options: Any):
        self.app = app
        self.limiter = limiter
        self.limit = Limit(name, **options)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        from starlette.requests import Request

        request = Request(scope)
        outcome = await _decide(self.limiter, self.limit, request, (scope.get("client") or (None,))[0])
        extra = [(k.lower().encode("latin-1"), str(v).encode("latin-1")) for k, v in outcome.headers.items()]
        if not outcome.serve:
            body = outcome.body.encode()
            await send({"type": "http.response.start", "status": outcome.status,
                        "headers": extra + [(b"content-type", b"text/plain; charset=utf-8"),
                                            (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return

        async def send_with_fields(message):
            if message["type"] == "http.response.start":
                message = dict(message, headers=list(message.get("headers", [])) + extra)
            await send(message)

        await self.app(scope, receive, send_with_fields)


class RateLimit:
    """A FastAPI dependency: ``Depends(RateLimit(limiter, "api", cost=...))``.
    A refusal raises HTTPException (429 with Retry-After when the wait is
    known, or 503); a grant sets the header fields on the response. Returns
    the decision (None when served unlimited)."""

    def __init__(self, limiter: AsyncRateLimiter, name: str, **options: Any):
        self.limiter = limiter
        self.limit = Limit(name, **options)

    async def __call__(self, request: "Request", response: "Response"):  # noqa: F821
        from fastapi import HTTPException

        outcome = await _decide(self.limiter, self.limit, request, request.client.host if request.client else None)
        if not outcome.serve:
            raise HTTPException(status_code=outcome.status, detail=outcome.body.strip(), headers=outcome.headers)
        response.headers.update(outcome.headers)
        return outcome.decision


def _annotate():
    # FastAPI reads the parameters' annotations to inject Request and Response.
    try:
        from starlette.requests import Request
        from starlette.responses import Response
    except ImportError:  # Starlette not installed: the middleware is not used either
        return
    RateLimit.__call__.__annotations__.update(request=Request, response=Response)


_annotate()

"""The FastAPI app test/cluster/clients.sh drives, limited by pg_ratelimit
as installed from its wheel: the routes of node_app.js.

PG* as for psql; RL_SCHEMA: the limiter's schema (else search_path);
prints "listening on http://127.0.0.1:PORT"."""

import os
import socket

import psycopg
import uvicorn
from fastapi import Depends, FastAPI, Request
from fastapi.responses import PlainTextResponse
from psycopg_pool import AsyncConnectionPool

from pg_ratelimit import AsyncRateLimiter, RateLimited, RateLimitUnavailable, address_key
from pg_ratelimit.asgi import RateLimit, RateLimitMiddleware

# Two connections, and one second to get one: a small pool that fills.
pool = AsyncConnectionPool("", min_size=1, max_size=2, timeout=1, open=False,
                           kwargs={"autocommit": True, "connect_timeout": 2})
limiter = AsyncRateLimiter(pool, schema=os.environ.get("RL_SCHEMA") or None)
app = FastAPI(on_startup=[pool.open], on_shutdown=[pool.close])


def user(request):
    return request.headers.get("x-user")


def cost(request):
    return float(request.query_params.get("cost", 1))


def would_refuse(decision, request):
    request.state.would_refuse = True


# The middleware limits /api; the other routes use the dependency.
class OnlyApi(RateLimitMiddleware):
    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"] == "/api":
            return await super().__call__(scope, receive, send)
        return await self.app(scope, receive, send)


app.add_middleware(OnlyApi, limiter=limiter, name="api", account=user, cost=cost)


@app.get("/api", response_class=PlainTextResponse)
async def api():
    return "served"


@app.get("/open", response_class=PlainTextResponse,
         dependencies=[Depends(RateLimit(limiter, "api", account=user, fail="open"))])
async def open_route():
    return "served"


@app.get("/report", response_class=PlainTextResponse,
         dependencies=[Depends(RateLimit(limiter, "api", account=user, report_only=True, on_denied=would_refuse))])
async def report(request: Request):
    return "served, would refuse" if getattr(request.state, "would_refuse", False) else "served"


@app.get("/both")
async def both(request: Request, bytes: float = 0):
    ip = address_key(request.client.host)
    d = await limiter.take_all([("api", ip), ("bytes", ip, bytes)])
    return PlainTextResponse("served" if d.allowed else f"denied by {d.binding_name}",
                             status_code=200 if d.allowed else 429, headers=d.headers)


@app.post("/orders")
async def orders(item: str = ""):
    try:
        async with limiter.transaction("orders", "orders:shop") as (conn, decision):
            await conn.execute("INSERT INTO orders (item) VALUES (%s)", (item,))
    except psycopg.errors.CheckViolation:
        return PlainTextResponse("an order needs an item", status_code=400)
    except (RateLimited, RateLimitUnavailable) as err:
        return PlainTextResponse(str(err), status_code=err.status_code, headers=err.headers)
    return PlainTextResponse("ordered", status_code=201, headers=decision.headers)


if __name__ == "__main__":
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # connections queue until uvicorn accepts them
    print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    # X-Forwarded-For counts from 127.0.0.1 only: uvicorn's trusted proxies.
    config = uvicorn.Config(app, proxy_headers=True, forwarded_allow_ips="127.0.0.1", log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])

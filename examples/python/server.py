"""A web server limited by ratelimit, with FastAPI and pg_ratelimit
(clients/python).

    GET  /api            every request takes from the limit "api" first
    POST /orders?item=X  the take from "orders" is part of the order's own
                         transaction: an order that fails (no item) rolls its
                         take back with it

Settings (environment): PGHOST, PGPORT, PGDATABASE, PGUSER as for psql;
HOST and PORT to listen on (127.0.0.1:8000; PORT=0 picks a free one);
TRUST_PROXY=ADDRESS, the address of a proxy in front that appends the
client's address to X-Forwarded-For (uvicorn's forwarded_allow_ips; the
header is ignored from any other peer); RATELIMIT_FAIL=open to serve /api
unlimited while the database cannot be reached (default: closed, 503).
The database side is examples/setup.sql.  Needs FastAPI, uvicorn,
psycopg and psycopg_pool (requirements.txt) and pg_ratelimit, installed
from this repository: pip install ../../clients/python.
"""

import os
import socket

import psycopg
import uvicorn
from fastapi import Depends, FastAPI, Request
from fastapi.responses import PlainTextResponse
from psycopg_pool import AsyncConnectionPool

from pg_ratelimit import AsyncRateLimiter, RateLimited, RateLimitUnavailable, address_key
from pg_ratelimit.asgi import RateLimit

# At most 10 connections, 3 s to get one; a statement that takes longer
# than 5 s fails rather than holding a request.
# The limiter opens the pool at its first use.
pool = AsyncConnectionPool("", min_size=1, max_size=10, timeout=3, open=False, kwargs={
    "autocommit": True, "connect_timeout": 3, "options": "-c statement_timeout=5s"})
limiter = AsyncRateLimiter(pool)
app = FastAPI(on_shutdown=[pool.close])
FAIL = "open" if os.environ.get("RATELIMIT_FAIL") == "open" else "closed"


@app.get("/api", response_class=PlainTextResponse, dependencies=[Depends(RateLimit(limiter, "api", fail=FAIL))])
async def api():
    return "hello\n"


@app.post("/orders")
async def orders(request: Request, item: str = ""):
    client = address_key(request.client.host)
    try:
        async with limiter.transaction("orders", client) as (conn, decision):
            await conn.execute("INSERT INTO orders (client, item) VALUES (%s, %s)", (client, item))
    except psycopg.errors.CheckViolation:  # rolled back, take included
        return PlainTextResponse("an order needs an item\n", status_code=400)
    except (RateLimited, RateLimitUnavailable) as err:  # 429 or 503, with their header fields
        return PlainTextResponse(f"{err}\n", status_code=err.status_code, headers=err.headers)
    return PlainTextResponse("ordered\n", status_code=201, headers=decision.headers)


if __name__ == "__main__":
    sock = socket.socket()
    sock.bind((os.environ.get("HOST", "127.0.0.1"), int(os.environ.get("PORT", "8000"))))
    sock.listen(128)
    host, port = sock.getsockname()[:2]
    print(f"listening on http://{host}:{port}", flush=True)
    trusted = os.environ.get("TRUST_PROXY", "")
    uvicorn.Server(uvicorn.Config(app, proxy_headers=bool(trusted), forwarded_allow_ips=trusted or None,
                                  log_level="warning")).run(sockets=[sock])

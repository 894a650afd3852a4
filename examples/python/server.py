"""A web server limited by ratelimit, with psycopg 3 and the standard library.

    GET  /api            every request takes from the limit "api" first: one
                         statement takes and returns the header values
    POST /orders?item=X  the take from "orders" is part of the order's own
                         transaction: an order that fails (no item) rolls its
                         take back with it

Settings (environment): PGHOST, PGPORT, PGDATABASE, PGUSER as for psql;
HOST and PORT to listen on (127.0.0.1:8000; PORT=0 picks a free one);
TRUST_PROXY=ADDRESS, the address of a proxy in front that appends the
client's address to X-Forwarded-For (the header is ignored from any other
peer); RATELIMIT_FAIL=open to serve requests unlimited while no connection
to the database can be made (default: closed, 503).  The database side is
examples/setup.sql.
"""

import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

TRUST_PROXY = os.environ.get("TRUST_PROXY", "")
FAIL_OPEN = os.environ.get("RATELIMIT_FAIL") == "open"

# One round trip: the take, and the values of the RateLimit-Policy,
# RateLimit and Retry-After header fields.
TAKE = """
    SELECT d.allowed, h.ratelimit_policy, h.ratelimit, h.retry_after
      FROM rate_limit_take(%s, client_key(%s)) AS d, LATERAL rate_limit_headers(d) AS h
"""

# At most 10 connections, whatever the number of requests; a statement that
# takes longer than 5 s fails rather than holding a request.
POOL = ConnectionPool(
    min_size=1, max_size=10, timeout=3, open=False,
    kwargs={"autocommit": True, "connect_timeout": 3,
            "options": "-c statement_timeout=5s", "keepalives_idle": 10})


def unreachable(err):
    """An error that says no connection to the database can be made or kept,
    rather than one of its answers (or a pool that is merely busy)."""
    if isinstance(err, PoolTimeout):
        # Busy, or no connection can be made: one attempt of our own tells.
        try:
            psycopg.connect(connect_timeout=3).close()
            return False
        except psycopg.OperationalError:
            return True
    return isinstance(err, psycopg.OperationalError) and (
        err.sqlstate is None or err.sqlstate.startswith(("08", "57P0")))


class Handler(BaseHTTPRequestHandler):
    def client_address_text(self):
        peer = self.client_address[0]
        if TRUST_PROXY and peer == TRUST_PROXY:
            # Every X-Forwarded-For line, in order: the last entry is the one
            # the proxy appended, the address it saw.
            forwarded = ",".join(self.headers.get_all("X-Forwarded-For", []))
            hops = [h.strip() for h in forwarded.split(",") if h.strip()]
            if hops:
                return hops[-1]
        return peer

    def reply(self, status, body, headers=()):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(body.encode())

    @staticmethod
    def limit_headers(row, denied=False):
        headers = [("RateLimit-Policy", row[1]), ("RateLimit", row[2])]
        if denied and row[3] is not None:  # NULL: no wait would do
            headers.append(("Retry-After", row[3]))
        return headers

    def unavailable(self):
        """The database cannot be reached: fail open or closed."""
        if FAIL_OPEN:
            return True
        self.reply(503, "rate limiter unavailable\n", [("Retry-After", "5")])
        return False

    def do_GET(self):
        if urlsplit(self.path).path != "/api":
            return self.reply(404, "not found\n")
        try:
            with POOL.connection() as conn:
                row = conn.execute(TAKE, ("api", self.client_address_text())).fetchone()
        except (psycopg.Error, PoolTimeout) as err:
            if not unreachable(err):
                raise
            if self.unavailable():
                self.reply(200, "hello (unlimited: the limiter is unavailable)\n")
            return
        if not row[0]:
            return self.reply(429, "too many requests\n", self.limit_headers(row, denied=True))
        self.reply(200, "hello\n", self.limit_headers(row))

    def do_POST(self):
        url = urlsplit(self.path)
        if url.path != "/orders":
            return self.reply(404, "not found\n")
        item = parse_qs(url.query).get("item", [""])[0]
        client = self.client_address_text()
        try:
            # The take belongs to the order's transaction: an order that
            # fails rolls its take back, and the client keeps the token.
            with POOL.connection() as conn, conn.transaction():
                row = conn.execute(TAKE, ("orders", client)).fetchone()
                if not row[0]:
                    raise Denied(row)
                conn.execute("INSERT INTO orders (client, item) VALUES (client_key(%s), %s)",
                             (client, item))
        except Denied as denied:
            return self.reply(429, "too many orders\n", self.limit_headers(denied.row, denied=True))
        except psycopg.errors.CheckViolation:
            return self.reply(400, "an order needs an item\n")
        except (psycopg.Error, PoolTimeout) as err:
            if not unreachable(err):
                raise
            if self.unavailable():
                self.reply(503, "orders need the database\n")
            return
        self.reply(201, "ordered\n", self.limit_headers(row))

    def handle_one_request(self):
        try:
            super().handle_one_request()
        except (psycopg.Error, PoolTimeout) as err:  # a bug to surface, not a reason to serve
            self.log_error("%s", err)
            self.reply(500, "internal error\n")

    def log_message(self, format, *args):  # quiet: the test reads the replies
        pass


class Denied(Exception):
    """Rolls the order's transaction back when the limit denies it."""

    def __init__(self, row):
        super().__init__("denied")
        self.row = row


if __name__ == "__main__":
    POOL.open(wait=False)
    server = ThreadingHTTPServer((os.environ.get("HOST", "127.0.0.1"), int(os.environ.get("PORT", "8000"))),
                                 Handler)
    host, port = server.server_address[:2]
    print(f"listening on http://{host}:{port}", flush=True)
    server.serve_forever()

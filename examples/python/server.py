"""A web server limited by ratelimit, with psycopg 3 and the standard library.

    GET  /api            every request takes from the limit "api" first: one
                         statement takes and returns the header values
    POST /orders?item=X  the take from "orders" is part of the order's own
                         transaction: an order that fails (no item) rolls its
                         take back with it

Settings (environment): PGHOST, PGPORT, PGDATABASE, PGUSER as for psql;
HOST and PORT to listen on (127.0.0.1:8000); TRUST_PROXY=1 when a proxy in
front appends the client's address to X-Forwarded-For; RATELIMIT_FAIL=open
to serve requests unlimited while the database cannot be reached (default:
closed, 503).  The database side is examples/setup.sql.
"""

import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import psycopg

TRUST_PROXY = os.environ.get("TRUST_PROXY") == "1"
FAIL_OPEN = os.environ.get("RATELIMIT_FAIL") == "open"

# One round trip: the take, and the values of the RateLimit-Policy,
# RateLimit and Retry-After header fields.
TAKE = """
    SELECT d.allowed, h.ratelimit_policy, h.ratelimit, h.retry_after
      FROM rate_limit_take(%s, client_key(%s)) AS d, LATERAL rate_limit_headers(d) AS h
"""

_local = threading.local()


def unreachable(err):
    """An error that says the database cannot be reached, rather than one of
    its answers: no connection, or a connection lost or shut down."""
    return err.sqlstate is None or err.sqlstate.startswith(("08", "57P0"))


def connection():
    """The thread's connection, opened on first use and after a failure."""
    conn = getattr(_local, "conn", None)
    if conn is None or conn.closed or conn.broken:
        conn = psycopg.connect(autocommit=True, connect_timeout=3)
        _local.conn = conn
    return conn


class Handler(BaseHTTPRequestHandler):
    def client_address_text(self):
        if TRUST_PROXY:
            hops = [h.strip() for h in self.headers.get("X-Forwarded-For", "").split(",") if h.strip()]
            if hops:
                return hops[-1]  # the address the proxy saw
        return self.client_address[0]

    def reply(self, status, body, headers=()):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(body.encode())

    @staticmethod
    def limit_headers(row):
        return [("RateLimit-Policy", row[1]), ("RateLimit", row[2])]

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
            row = connection().execute(TAKE, ("api", self.client_address_text())).fetchone()
        except psycopg.Error as err:
            if not unreachable(err):
                raise
            if self.unavailable():
                self.reply(200, "hello (unlimited: the limiter is unavailable)\n")
            return
        if not row[0]:
            return self.reply(429, "too many requests\n",
                              self.limit_headers(row) + [("Retry-After", row[3])])
        self.reply(200, "hello\n", self.limit_headers(row))

    def do_POST(self):
        url = urlsplit(self.path)
        if url.path != "/orders":
            return self.reply(404, "not found\n")
        item = parse_qs(url.query).get("item", [""])[0]
        client = self.client_address_text()
        try:
            conn = connection()
            # The take belongs to the order's transaction: an order that
            # fails rolls its take back, and the client keeps the token.
            with conn.transaction():
                row = conn.execute(TAKE, ("orders", client)).fetchone()
                if not row[0]:
                    raise Denied(row)
                conn.execute("INSERT INTO orders (client, item) VALUES (client_key(%s), %s)",
                             (client, item))
        except Denied as denied:
            return self.reply(429, "too many orders\n",
                              self.limit_headers(denied.row) + [("Retry-After", denied.row[3])])
        except psycopg.errors.CheckViolation:
            return self.reply(400, "an order needs an item\n")
        except psycopg.Error as err:
            if not unreachable(err):
                raise
            if self.unavailable():
                self.reply(503, "orders need the database\n")
            return
        self.reply(201, "ordered\n", self.limit_headers(row))

    def handle_one_request(self):
        try:
            super().handle_one_request()
        except psycopg.Error as err:  # a bug to surface, not a reason to serve
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
    address = (os.environ.get("HOST", "127.0.0.1"), int(os.environ.get("PORT", "8000")))
    server = ThreadingHTTPServer(address, Handler)
    print(f"listening on http://{address[0]}:{address[1]}", flush=True)
    server.serve_forever()

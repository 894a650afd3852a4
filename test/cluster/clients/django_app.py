"""The Django app test/cluster/clients.sh drives, limited by pg_ratelimit
as installed from its wheel: the routes of node_app.js, served by a
threaded WSGI server. The limiter's pool is psycopg 3's; orders are
written through Django's own connection (psycopg2), and their take is
made on it, inside the view's transaction.atomic().

PG* as for psql; RL_SCHEMA: the limiter's schema (else search_path);
prints "listening on http://127.0.0.1:PORT"."""

import os
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import django
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.http import HttpResponse
from django.urls import path
from psycopg_pool import ConnectionPool

from pg_ratelimit import RateLimited, RateLimiter, RateLimitUnavailable, address_key, forwarded_address
from pg_ratelimit.django import rate_limit

SCHEMA = os.environ.get("RL_SCHEMA") or None
# Two connections, and one second to get one: a small pool that fills.
pool = ConnectionPool("", min_size=1, max_size=2, timeout=1, open=False,
                      kwargs={"autocommit": True, "connect_timeout": 2})
limiter = RateLimiter(pool, schema=SCHEMA)
TRUSTED = ["127.0.0.1"]


def user(request):
    return request.headers.get("X-User")


def cost(request):
    return float(request.GET.get("cost", 1))


def would_refuse(decision, request):
    request.would_refuse = True


def served(request):
    return HttpResponse("served", content_type="text/plain")


# The middleware limits /api (RATELIMIT below); the other routes use the decorator.
def api(request):
    return served(request)


@rate_limit(limiter, "api", account=user, fail="open", trusted_proxies=TRUSTED)
def open_route(request):
    return served(request)


@rate_limit(limiter, "api", account=user, report_only=True, on_denied=would_refuse, trusted_proxies=TRUSTED)
def report(request):
    text = "served, would refuse" if getattr(request, "would_refuse", False) else "served"
    return HttpResponse(text, content_type="text/plain")


def both(request):
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR")
    ip = address_key(forwarded_address(request.META.get("REMOTE_ADDR"), [forwarded] if forwarded else [], TRUSTED))
    d = limiter.take_all([("api", ip), ("bytes", ip, float(request.GET.get("bytes", 0)))])
    response = HttpResponse("served" if d.allowed else f"denied by {d.binding_name}",
                            status=200 if d.allowed else 429, content_type="text/plain")
    for name, value in d.headers.items():
        response[name] = value
    return response


def orders(request):
    try:
        with transaction.atomic():
            decision = limiter.take("orders", "orders:shop", conn=connection)
            if not decision.allowed:
                raise RateLimited(decision)
            with connection.cursor() as cur:
                cur.execute("INSERT INTO orders (item) VALUES (%s)", [request.GET.get("item", "")])
    except IntegrityError:
        return HttpResponse("an order needs an item", status=400, content_type="text/plain")
    except (RateLimited, RateLimitUnavailable) as err:
        response = HttpResponse(str(err), status=err.status_code, content_type="text/plain")
        for name, value in err.headers.items():
            response[name] = value
        return response
    response = HttpResponse("ordered", status=201, content_type="text/plain")
    for name, value in decision.headers.items():
        response[name] = value
    return response


class OnlyApi:
    """pg_ratelimit's middleware, for /api alone."""

    def __init__(self, get_response):
        from pg_ratelimit.django import RateLimitMiddleware
        self.limited = RateLimitMiddleware(get_response)
        self.get_response = get_response

    def __call__(self, request):
        return (self.limited if request.path == "/api" else self.get_response)(request)


urlpatterns = [path("api", api), path("open", open_route), path("report", report), path("both", both),
               path("orders", orders)]

settings.configure(
    DEBUG=False, ALLOWED_HOSTS=["127.0.0.1"], ROOT_URLCONF=__name__, SECRET_KEY="test only",
    MIDDLEWARE=[f"{__name__}.OnlyApi"],
    DATABASES={"default": {
        "ENGINE": "django.db.backends.postgresql", "NAME": os.environ["PGDATABASE"],
        "HOST": os.environ["PGHOST"], "PORT": os.environ["PGPORT"], "USER": os.environ["PGUSER"]}},
    RATELIMIT={"LIMITER": limiter, "NAME": "api", "ACCOUNT": user, "COST": cost, "TRUSTED_PROXIES": TRUSTED},
)
django.setup()


class Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass


if __name__ == "__main__":
    from django.core.wsgi import get_wsgi_application
    pool.open()
    server = make_server("127.0.0.1", 0, get_wsgi_application(), server_class=Server, handler_class=Quiet)
    print(f"listening on http://127.0.0.1:{server.server_port}", flush=True)
    server.serve_forever()

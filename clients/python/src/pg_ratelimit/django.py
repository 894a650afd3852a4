"""Django middleware, over a (sync) RateLimiter.

    # settings.py
    MIDDLEWARE = [..., "pg_ratelimit.django.RateLimitMiddleware"]
    RATELIMIT = {"LIMITER": "myapp.limits.limiter", "NAME": "api"}

RATELIMIT's keys: LIMITER (a RateLimiter, or the dotted path of one), NAME,
and optionally ACCOUNT, KEY, COST (callables of the request, or dotted
paths; COST also a number), FAIL ("closed" or "open"), REPORT_ONLY,
ON_DENIED, ON_FAIL_OPEN, and TRUSTED_PROXIES: the addresses of your own
proxies, from which the last X-Forwarded-For entry is the client (Django
itself only knows REMOTE_ADDR). ``rate_limit(...)`` decorates a single
view with the same options in lower case."""

from __future__ import annotations

import functools
from typing import Any

from ._core import RateLimitUnavailable, forwarded_address
from ._decide import Limit, answer, unavailable


def _resolve(value):
    if isinstance(value, str):
        from django.utils.module_loading import import_string
        return import_string(value)
    return value


def _address(request, trusted) -> str:
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR")
    return forwarded_address(request.META.get("REMOTE_ADDR"), [forwarded] if forwarded else [], trusted)


def _limited(limiter, limit: Limit, trusted, request, view):
    from django.http import HttpResponse

    try:
        decision = limiter.take(limit.name, limit.key_of(request, _address(request, trusted)), limit.cost_of(request))
        outcome = answer(limit, decision, request)
    except RateLimitUnavailable as err:
        outcome = unavailable(limit, err, request)
    response = view(request) if outcome.serve else HttpResponse(
        outcome.body, status=outcome.status, content_type="text/plain")
    for name, value in outcome.headers.items():
        response[name] = value
    return response


def _options(settings: dict) -> dict:
    names = {"ACCOUNT": "account", "KEY": "key", "COST": "cost", "FAIL": "fail", "REPORT_ONLY": "report_only",
             "ON_DENIED": "on_denied", "ON_FAIL_OPEN": "on_fail_open"}
    return {names[k]: _resolve(v) if k not in ("FAIL",) else v for k, v in settings.items() if k in names}


class RateLimitMiddleware:
    def __init__(self, get_response):
        from django.conf import settings

        config = dict(settings.RATELIMIT)
        self.get_response = get_response
        self.limiter = _resolve(config["LIMITER"])
        self.limit = Limit(config["NAME"], **_options(config))
        self.trusted = tuple(config.get("TRUSTED_PROXIES", ()))

    def __call__(self, request):
        return _limited(self.limiter, self.limit, self.trusted, request, self.get_response)


def rate_limit(limiter, name: str, *, trusted_proxies=(), **options: Any):
    """A view decorator: ``@rate_limit(limiter, "orders", cost=...)``."""
    limit = Limit(name, **options)

    def decorate(view):
        @functools.wraps(view)
        def limited(request, *args, **kwargs):
            return _limited(_resolve(limiter), limit, tuple(trusted_proxies), request,
                            lambda r: view(r, *args, **kwargs))
        return limited
    return decorate

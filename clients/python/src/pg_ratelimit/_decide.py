"""What every middleware does with a request: its key, its cost, the take,
and the answer (serve with these header fields, or refuse)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ._core import Decision, RateLimitUnavailable, address_key


@dataclass
class Limit:
    """A limit on requests.

    ``name``: the policy. ``account(request)``: the account of an
    authenticated request (key ``user:ID``); otherwise the key is the
    client's address (IPv6 by /64). ``key(request)``: the whole key
    instead. ``cost``: a number or ``cost(request)``. ``fail``: ``"closed"``
    (503 while the database cannot be reached) or ``"open"`` (serve
    unlimited then); no answer in time is 503 either way. ``report_only``:
    take and count, never refuse. ``on_denied(decision, request)``: told of
    every denial; ``on_fail_open(error, request)``: of every request served
    unlimited.
    """

    name: str
    account: Optional[Callable[[Any], Any]] = None
    key: Optional[Callable[[Any], str]] = None
    cost: Any = 1
    fail: str = "closed"
    report_only: bool = False
    on_denied: Optional[Callable[[Decision, Any], None]] = None
    on_fail_open: Optional[Callable[[RateLimitUnavailable, Any], None]] = None

    def __post_init__(self):
        if self.fail not in ("open", "closed"):
            raise ValueError("fail must be 'open' or 'closed'")

    def key_of(self, request, address: Optional[str]) -> str:
        if self.key is not None:
            return self.key(request)
        account = self.account(request) if self.account is not None else None
        if account is not None and account != "":
            return f"user:{account}"
        return address_key(address)

    def cost_of(self, request) -> float:
        return float(self.cost(request) if callable(self.cost) else self.cost)


@dataclass
class Outcome:
    """``serve`` with ``headers``, or refuse with ``status``, ``headers`` and ``body``."""

    serve: bool
    headers: dict = field(default_factory=dict)
    status: int = 200
    body: str = ""
    decision: Optional[Decision] = None


def unavailable(limit: Limit, err: RateLimitUnavailable, request) -> Outcome:
    if err.reason == "unreachable" and limit.fail == "open":
        if limit.on_fail_open is not None:
            limit.on_fail_open(err, request)
        return Outcome(serve=True)
    return Outcome(serve=False, status=503, headers=dict(err.headers), body="rate limiter unavailable\n")


def answer(limit: Limit, decision: Decision, request) -> Outcome:
    fields = {k: v for k, v in decision.headers.items() if k != "Retry-After"}
    if decision.allowed:
        return Outcome(serve=True, headers=fields, decision=decision)
    if limit.on_denied is not None:
        limit.on_denied(decision, request)
    if limit.report_only:
        return Outcome(serve=True, headers=fields, decision=decision)
    return Outcome(serve=False, status=429, headers=dict(decision.headers), body="too many requests\n",
                   decision=decision)

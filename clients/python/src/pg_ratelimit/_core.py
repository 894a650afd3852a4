"""What the sync and async clients share: the statements, the decisions,
the key of a client known by its address, and what an error means."""

from __future__ import annotations

import datetime
import ipaddress
import uuid
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence, Union


@dataclass(frozen=True)
class Decision:
    """The answer of rate_limit_take, rate_limit_check and rate_limit_refund.

    The waits are seconds, or None when nobody can know them: a concurrency
    limit's ``retry_after`` when a held place denied the take (a place comes
    back when a holder's transaction ends), its ``reset_after`` and
    ``refill_after`` while any place is held."""

    allowed: bool
    remaining: float
    retry_after: Optional[float]
    reset_after: Optional[float]
    capacity: float
    name: str
    quota: float
    per: float
    refill_after: Optional[float]
    headers: dict = field(default_factory=dict)


@dataclass(frozen=True)
class LeaseDecision(Decision):
    """The answer of rate_limit_lease: the decision (places of a concurrency
    limit defined with a lease: ``remaining`` the places free,
    ``retry_after`` when denied the seconds until enough leases expire,
    though a release may come sooner), the lease's id (keep it as you would
    a session token) and when it expires, by the limiter's clock. Both None
    when denied, and for a cost of 0 (a look)."""

    lease: Optional[uuid.UUID] = None
    expires_at: Optional[datetime.datetime] = None


@dataclass(frozen=True)
class AllDecision:
    """The answer of rate_limit_take_all: ``retry_after`` None when a held
    place of a concurrency limit denied the call."""

    allowed: bool
    retry_after: Optional[float]
    binding_name: str
    binding_key: str
    remaining: list
    headers: dict = field(default_factory=dict)


class RateLimitUnavailable(Exception):
    """The limiter had no answer.

    ``reason`` is ``"unreachable"`` when no connection to the database could
    be made or kept (refused, no socket, lost; SQLSTATE class 08, 57P01 to
    57P03), the one case a route may fail open for, and ``"busy"`` when no
    answer came in time (the pool stayed full, a connection attempt timed
    out, 53300, 57014): 503, never open.
    """

    status_code = 503

    def __init__(self, reason: str, cause: Optional[BaseException] = None):
        super().__init__(
            "rate limiter unavailable: the database cannot be reached" if reason == "unreachable"
            else "rate limiter unavailable: no answer in time (the pool or the server is busy)")
        self.reason = reason
        self.headers = {"Retry-After": "1"}
        self.__cause__ = cause


class RateLimited(Exception):
    """A denied take, raised by ``transaction()`` after its rollback:
    ``status_code`` 429, ``headers`` with Retry-After (none when the wait is
    unknown: a denial by a held place of a concurrency limit)."""

    status_code = 429

    def __init__(self, decision):
        super().__init__("rate limited")
        self.decision = decision
        self.headers = dict(decision.headers)


def address_key(address: Optional[str]) -> str:
    """``ip:`` and the IPv4 address, or the IPv6 address's /64 (one host
    usually holds a whole /64); an IPv4 address mapped into IPv6 is the IPv4
    address; no address at all is ``ip:unknown``. The same keys as the Node
    package's and as PostgreSQL's network(set_masklen(address, 64))."""
    if not address:
        return "ip:unknown"
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return "ip:unknown"
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.version == 4:
        return f"ip:{ip}"
    return f"ip:{ipaddress.ip_network((ip, 64), strict=False)}"


def forwarded_address(peer: Optional[str], forwarded_for: Sequence[str], trusted: Sequence[str]) -> Optional[str]:
    """The client's address: the last X-Forwarded-For entry (the one the
    proxy appended, across every line of the header) when the peer is a
    trusted proxy, else the peer."""
    if peer and peer in trusted:
        hops = [h.strip() for line in forwarded_for for h in line.split(",") if h.strip()]
        if hops:
            return hops[-1]
    return peer


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class Statements:
    """The one statement of each call, optionally schema-qualified.  The
    arguments are cast to the functions' own types, so that no overload
    with other argument types can capture the call."""

    def __init__(self, schema: Optional[str] = None):
        s = _quote_ident(schema) + "." if schema else ""

        def single(fn: str, args: str, more: str = "") -> str:
            return (
                "SELECT d.allowed, d.remaining, d.retry_after, d.reset_after, d.capacity, d.name, d.quota,"
                " pg_catalog.date_part('epoch', d.per), d.refill_after,"
                f" h.ratelimit_policy, h.ratelimit, h.retry_after{more}"
                f" FROM {s}{fn}({args}) AS d, LATERAL {s}rate_limit_headers(d) AS h")

        take_args = "%s::text, %s::text, %s::pg_catalog.float8, %s::pg_catalog.interval"
        self.take = single("rate_limit_take", take_args)
        self.check = single("rate_limit_check", take_args)
        self.refund = single("rate_limit_refund", "%s::text, %s::text, %s::pg_catalog.float8")
        self.lease = single("rate_limit_lease", "%s::text, %s::text, %s::pg_catalog.float8",
                            ", d.lease, d.expires_at")
        self.release = f"SELECT {s}rate_limit_release(%s::pg_catalog.uuid)"
        self.take_all = (
            "SELECT d.allowed, d.retry_after, d.binding_name, d.binding_key, d.remaining,"
            " h.ratelimit_policy, h.ratelimit, h.retry_after"
            f" FROM {s}rate_limit_take_all(%s::text[], %s::text[], %s::pg_catalog.float8[],"
            " %s::pg_catalog.interval) AS d,"
            f" LATERAL {s}rate_limit_headers(d) AS h")


def interval(seconds: Optional[float]) -> Optional[str]:
    if seconds is None:
        return None
    seconds = float(seconds)
    if not (seconds >= 0 and seconds != float("inf")):
        raise ValueError("max_wait must be a finite number of seconds >= 0")
    return f"{seconds!r} seconds"


def _headers(policy: str, limit: str, retry: Any) -> dict:
    headers = {"RateLimit-Policy": policy, "RateLimit": limit}
    if retry is not None:
        headers["Retry-After"] = str(retry)
    return headers


def _wait(value: Any) -> Optional[float]:
    """A wait in seconds, None (SQL NULL) when nobody can know it."""
    return None if value is None else float(value)


def decision_of(row: Sequence[Any]) -> Decision:
    return Decision(
        allowed=row[0], remaining=float(row[1]), retry_after=_wait(row[2]), reset_after=_wait(row[3]),
        capacity=float(row[4]), name=row[5], quota=float(row[6]), per=float(row[7]),
        refill_after=_wait(row[8]), headers=_headers(row[9], row[10], row[11]))


def lease_decision_of(row: Sequence[Any]) -> LeaseDecision:
    d = decision_of(row)
    lease = row[12]
    if lease is not None and not isinstance(lease, uuid.UUID):
        lease = uuid.UUID(str(lease))  # a driver that gives text
    return LeaseDecision(**vars(d), lease=lease, expires_at=row[13])


def release_args(lease: Union[uuid.UUID, str, None]):
    """The lease as text (each driver adapts str): None is NULL, which the
    limiter answers false."""
    return (None if lease is None else str(lease),)


def all_decision_of(row: Sequence[Any]) -> AllDecision:
    return AllDecision(
        allowed=row[0], retry_after=_wait(row[1]), binding_name=row[2], binding_key=row[3],
        remaining=[float(x) for x in row[4]], headers=_headers(row[5], row[6], row[7]))


def take_all_args(limits, max_wait):
    names = [limit[0] for limit in limits]
    keys = [limit[1] for limit in limits]
    costs = [float(limit[2]) if len(limit) > 2 else 1.0 for limit in limits]
    return (names, keys, costs, interval(max_wait))


# libpq's words when no connection can be made or kept (it gives no SQLSTATE then).
_UNREACHABLE_WORDS = (
    "connection refused", "no such file or directory", "could not translate host name",
    "name or service not known", "no route to host", "network is unreachable",
    "server closed the connection unexpectedly", "terminating connection",
    "the database system is shutting down", "the database system is starting up",
    "the database system is in recovery mode", "connection is closed", "the connection is lost",
    "connection reset by peer", "broken pipe", "ssl syscall error: eof detected",
    "consuming input failed", "sending query failed", "no connection to the server",
)
_BUSY_WORDS = ("timeout expired", "sorry, too many clients already", "canceling statement due to statement timeout")


def _chain(err: BaseException):
    seen = set()
    e: Optional[BaseException] = err
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def classify(err: BaseException) -> Optional[str]:
    """``"unreachable"``, ``"busy"`` or None (any other error: a bug or a
    misconfiguration to surface, never a reason to serve unlimited).

    Reads psycopg 3's ``sqlstate`` and psycopg2's ``pgcode`` (Django's
    errors wrap them), and, for connection errors without one, libpq's
    message. A pool's timeout (PoolTimeout) is not decided here: the
    clients probe the database to tell a busy pool from a dead database.
    """
    for e in _chain(err):
        if isinstance(e, RateLimitUnavailable):
            return e.reason
        state = getattr(e, "sqlstate", None) or getattr(e, "pgcode", None)
        if state:
            if state.startswith("08") or state in ("57P01", "57P02", "57P03"):
                return "unreachable"
            if state in ("53300", "57014"):
                return "busy"
            return None
        if type(e).__name__ in ("OperationalError", "InterfaceError"):
            text = str(e).lower()
            if any(w in text for w in _BUSY_WORDS):
                return "busy"
            if any(w in text for w in _UNREACHABLE_WORDS):
                return "unreachable"
        if isinstance(e, (ConnectionRefusedError, FileNotFoundError, ConnectionResetError, BrokenPipeError)):
            return "unreachable"
    return None


def is_pool_timeout(err: BaseException) -> bool:
    return type(err).__name__ == "PoolTimeout"

"""Keys, addresses behind proxies, what an error means, and decisions
turned into answers, without a database."""

import datetime
import uuid

import psycopg
import pytest

from pg_ratelimit import RateLimitUnavailable, address_key, classify, forwarded_address
from pg_ratelimit._core import all_decision_of, decision_of, interval, lease_decision_of
from pg_ratelimit._decide import Limit, answer


def test_address_key():
    assert address_key("192.0.2.1") == "ip:192.0.2.1"
    assert address_key("2001:db8:1:2::1") == "ip:2001:db8:1:2::/64"
    assert address_key("2001:db8:1:2:ffff:ffff:ffff:ffff") == "ip:2001:db8:1:2::/64"
    assert address_key("2001:0db8:0000:0003:0:0:0:1") == "ip:2001:db8:0:3::/64"
    assert address_key("::ffff:192.0.2.9") == "ip:192.0.2.9"
    assert address_key("fe80::1%eth0") == "ip:fe80::/64"
    assert address_key("::1") == "ip:::/64"
    assert address_key(None) == "ip:unknown"
    assert address_key("not an address") == "ip:unknown"


def test_forwarded_address():
    trusted = ("127.0.0.1",)
    assert forwarded_address("127.0.0.1", ["203.0.113.7, 2001:db8::1"], trusted) == "2001:db8::1"
    assert forwarded_address("127.0.0.1", ["2001:db8::9", "2001:db8:4::1"], trusted) == "2001:db8:4::1"
    assert forwarded_address("192.0.2.5", ["2001:db8::1"], trusted) == "192.0.2.5"
    assert forwarded_address("127.0.0.1", [], trusted) == "127.0.0.1"


def _with_state(cls, state):
    err = cls("x")
    err.sqlstate = state  # as psycopg's server errors have it
    return err


class WithState(Exception):
    sqlstate = None


@pytest.mark.parametrize("state", ["08006", "08001", "57P01", "57P02", "57P03"])
def test_unreachable_states(state):
    assert classify(_with_state(WithState, state)) == "unreachable"


@pytest.mark.parametrize("state", ["53300", "57014"])
def test_busy_states(state):
    assert classify(_with_state(WithState, state)) == "busy"


@pytest.mark.parametrize("state", ["42704", "22023", "42501", "40001", "57P04"])
def test_other_states(state):
    assert classify(_with_state(WithState, state)) is None


def test_psycopg_errors():
    assert classify(psycopg.errors.AdminShutdown("terminating connection due to administrator command")) == "unreachable"
    assert classify(psycopg.errors.UndefinedObject("no policy")) is None
    refused = psycopg.OperationalError(
        'connection failed: connection to server at "127.0.0.1", port 1 failed: Connection refused')
    assert classify(refused) == "unreachable"
    assert classify(psycopg.OperationalError("connection failed: timeout expired")) == "busy"
    assert classify(psycopg.OperationalError("something else")) is None
    assert classify(ValueError("bug")) is None
    wrapped = RuntimeError("wrapped")
    wrapped.__cause__ = refused
    assert classify(wrapped) == "unreachable"
    assert classify(RateLimitUnavailable("busy")) == "busy"


def test_real_refused_connection():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    with pytest.raises(psycopg.OperationalError) as info:
        psycopg.connect(host="127.0.0.1", port=port, user="x", dbname="x", connect_timeout=2)
    assert classify(info.value) == "unreachable"


def test_interval():
    assert interval(None) is None
    assert interval(2.5) == "2.5 seconds"
    with pytest.raises(ValueError):
        interval(-1)
    with pytest.raises(ValueError):
        interval(float("inf"))


# Rows as the statements return them: a concurrency limit's waits are NULL
# when nobody can know them, and rate_limit_headers gives no Retry-After then.
DENIED_BY_A_PLACE = (False, 0.0, None, None, 1.0, "exports", 0.0, 1.0, None,
                     '"exports";q=1', '"exports";r=0', None)


def test_unknown_waits_are_none():
    d = decision_of(DENIED_BY_A_PLACE)
    assert (d.allowed, d.retry_after, d.reset_after, d.refill_after) == (False, None, None, None)
    assert d.headers == {"RateLimit-Policy": '"exports";q=1', "RateLimit": '"exports";r=0'}
    granted = decision_of((True, 0.0, 0.0, None, 1.0, "exports", 0.0, 1.0, None,
                           '"exports";q=1', '"exports";r=0', None))
    assert (granted.retry_after, granted.reset_after, granted.refill_after) == (0.0, None, None)
    all_denied = all_decision_of((False, None, "exports", "t1", [2.0, 0.0],
                                  '"api";q=5;w=3600, "exports";q=1', '"api";r=2;t=720, "exports";r=0', None))
    assert (all_denied.retry_after, all_denied.remaining) == (None, [2.0, 0.0])
    assert "Retry-After" not in all_denied.headers


def test_denial_with_an_unknown_wait_is_429_without_retry_after():
    denials = []
    limit = Limit("exports", on_denied=lambda d, r: denials.append(d))
    outcome = answer(limit, decision_of(DENIED_BY_A_PLACE), None)
    assert (outcome.serve, outcome.status) == (False, 429)
    assert outcome.headers == {"RateLimit-Policy": '"exports";q=1', "RateLimit": '"exports";r=0'}
    assert [d.retry_after for d in denials] == [None]
    served = answer(Limit("exports", report_only=True), decision_of(DENIED_BY_A_PLACE), None)
    assert (served.serve, served.headers) == (True, outcome.headers)


def test_lease_decisions():
    lease = uuid.UUID("6f1c4f8e-2a8b-4c4e-9d51-0b8f3a6e2c10")
    expires = datetime.datetime(2026, 11, 26, 12, 0, tzinfo=datetime.timezone.utc)
    head = (1.0, 0.0, 3600.0, 2.0, "calls", 0.0, 1.0, 3600.0, '"calls";q=2', '"calls";r=1;t=3600', None)
    granted = lease_decision_of((True,) + head + (lease, expires))
    assert (granted.allowed, granted.remaining, granted.lease, granted.expires_at) == (True, 1.0, lease, expires)
    assert granted.headers == {"RateLimit-Policy": '"calls";q=2', "RateLimit": '"calls";r=1;t=3600'}
    # A driver that gives text (psycopg2 without its uuid adapter): a UUID all the same.
    assert lease_decision_of((True,) + head + (str(lease), expires)).lease == lease
    denied = lease_decision_of((False, 0.0, 3600.0, 3600.0, 2.0, "calls", 0.0, 1.0, 3600.0,
                                '"calls";q=2', '"calls";r=0;t=3600', "3600", None, None))
    assert (denied.allowed, denied.lease, denied.expires_at) == (False, None, None)
    assert denied.headers["Retry-After"] == "3600"

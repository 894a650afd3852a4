"""Keys, addresses behind proxies, and what an error means, without a database."""

import psycopg
import pytest

from pg_ratelimit import RateLimitUnavailable, address_key, classify, forwarded_address
from pg_ratelimit._core import interval


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

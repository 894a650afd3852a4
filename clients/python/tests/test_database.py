"""The clients against a database: RL_TEST_DSN (a database with the
extension, or with the portable limiter in RL_TEST_SCHEMA), with the
policies test/cluster/clients.sh defines: "api" 5 an hour, burst 3;
"orders" 2 an hour; "bytes" 1000 a day; "exports", a concurrency limit of
one place at once; "calls", two places at once as leases of an hour.
Skipped without RL_TEST_DSN.

They refill so slowly (a token every 720 s, 1800 s, 86.4 s) that no delay
changes how many whole tokens remain: r is exact. Waits are not: at a
bucket's first take the wait for its next token is a whole interval, and
every second since shortens it by a second. So a later t or Retry-After
lies in [nominal - ceil(elapsed), nominal], elapsed measured by the test
from before that bucket's first take to after the answer."""

import asyncio
import contextlib
import datetime
import math
import os
import time
import uuid

import psycopg
import pytest

from pg_ratelimit import AsyncRateLimiter, RateLimited, RateLimiter, classify

DSN = os.environ.get("RL_TEST_DSN")
SCHEMA = os.environ.get("RL_TEST_SCHEMA") or None
pytestmark = pytest.mark.skipif(not DSN, reason="RL_TEST_DSN is not set")


@pytest.fixture(scope="module")
def limiter():
    from psycopg_pool import ConnectionPool
    with ConnectionPool(DSN, min_size=1, max_size=2, kwargs={"autocommit": True}) as pool:
        yield RateLimiter(pool, schema=SCHEMA)


def fresh():
    return f"test:{uuid.uuid4()}"


def stopwatch():
    """Seconds since this call: start it before a bucket's first take."""
    start = time.monotonic()
    return lambda: time.monotonic() - start


def assert_wait(value, nominal, elapsed):
    """value (whole seconds, as a header has them) is a wait that was nominal
    at the bucket's first take, at most elapsed seconds ago."""
    low = nominal - math.ceil(elapsed)
    assert str(value).isdigit() and low <= int(value) <= nominal, \
        f"{value}: expected whole seconds from {low} to {nominal} ({elapsed:.3f} s since the first take)"


def assert_limit(field, expected, elapsed):
    """A RateLimit field, item by item as expected has it at the bucket's
    first take ('"api";r=1;t=720'): names and r exactly, each t by assert_wait."""
    items, wanted = field.split(", "), expected.split(", ")
    assert len(items) == len(wanted), f"{field!r}: expected items as {expected!r}"
    for got, want in zip(items, wanted):
        head, nominal = want.rsplit("t=", 1)
        assert got.startswith(head + "t="), f"{field!r}: expected {expected!r} (t within its bound)"
        assert_wait(got[len(head) + 2:], int(nominal), elapsed)


def test_take_check_refund(limiter):
    key = fresh()
    since = stopwatch()
    seen = [(limiter.take("api", key), since()) for _ in range(4)]
    assert [d.allowed for d, _ in seen] == [True, True, True, False]
    assert seen[0][0].headers["RateLimit"] == '"api";r=2;t=720'
    for (d, elapsed), expected in zip(seen[1:], ['"api";r=1;t=720', '"api";r=0;t=720', '"api";r=0;t=720']):
        assert_limit(d.headers["RateLimit"], expected, elapsed)
    assert seen[0][0].headers["RateLimit-Policy"] == '"api";q=5;w=3600'
    assert "Retry-After" not in seen[0][0].headers
    d, elapsed = seen[3]
    assert_wait(d.headers["Retry-After"], 720, elapsed)
    assert (d.name, d.capacity, d.quota, d.per) == ("api", 3.0, 5.0, 3600.0)
    assert 720 - elapsed <= d.retry_after <= 720
    assert limiter.check("api", key).allowed is False
    refunded = limiter.refund("api", key, 2)
    assert 2 <= refunded.remaining < 3
    assert limiter.take("api", key, 2).allowed is True


def test_take_all(limiter):
    key = fresh()
    since = stopwatch()
    granted = limiter.take_all([("api", key), ("bytes", key, 600)])
    assert granted.allowed and granted.headers["RateLimit"] == '"api";r=2;t=720, "bytes";r=400;t=87'
    denied = limiter.take_all([("api", key), ("bytes", key, 600)])
    elapsed = since()
    assert not denied.allowed and (denied.binding_name, denied.binding_key) == ("bytes", key)
    assert_limit(denied.headers["RateLimit"], '"api";r=2;t=720, "bytes";r=400;t=87', elapsed)
    assert_wait(denied.headers["Retry-After"], 17280, elapsed)  # 200 bytes at 86.4 s each
    assert [int(x) for x in denied.remaining] == [2, 400]


def test_transaction(limiter):
    key = fresh()
    since = stopwatch()
    with pytest.raises(ZeroDivisionError):
        with limiter.transaction("orders", key, 2) as (conn, decision):
            assert decision.allowed
            1 / 0
    assert limiter.check("orders", key, 2).allowed  # rolled back: both tokens are there
    with limiter.transaction("orders", key, 2) as (conn, decision):
        assert conn.execute("SELECT 1").fetchone() == (1,)
    with pytest.raises(RateLimited) as info:
        with limiter.transaction("orders", key) as (conn, decision):
            pytest.fail("a denied take ran the block")
    assert info.value.status_code == 429
    assert_wait(info.value.headers["Retry-After"], 1800, since())


def test_take_in_the_callers_transaction(limiter):
    key = fresh()
    with psycopg.connect(DSN) as conn:
        assert limiter.take("orders", key, 2, conn=conn).allowed
        conn.rollback()
    assert limiter.check("orders", key, 2).allowed


def test_concurrency_limit_in_a_transaction(limiter):
    """A place is held until the transaction ends: waits nobody can know are
    None, a denial has no Retry-After."""
    key = fresh()
    free = limiter.check("exports", key, 0)
    assert (free.allowed, free.retry_after, free.reset_after, free.refill_after) == (True, 0.0, 0.0, 0.0)
    with limiter.transaction("exports", key) as (conn, granted):
        assert (granted.allowed, granted.remaining, granted.retry_after) == (True, 0.0, 0.0)
        assert (granted.reset_after, granted.refill_after) == (None, None)  # a place is held
        assert granted.headers == {"RateLimit-Policy": '"exports";q=1', "RateLimit": '"exports";r=0'}
        # Another transaction, on the pool's other connection: denied by the held place.
        with pytest.raises(RateLimited) as info:
            with limiter.transaction("exports", key):
                pytest.fail("a denied take ran the block")
        denied = info.value.decision
        assert (denied.allowed, denied.retry_after) == (False, None)
        assert (denied.reset_after, denied.refill_after) == (None, None)
        assert info.value.status_code == 429
        assert info.value.headers == {"RateLimit-Policy": '"exports";q=1', "RateLimit": '"exports";r=0'}
        # In the holder's own transaction: its place counts as taken.
        all_denied = limiter.take_all([("api", key), ("exports", key)], conn=conn)
        assert (all_denied.allowed, all_denied.retry_after, all_denied.binding_name) == (False, None, "exports")
        assert "Retry-After" not in all_denied.headers
    assert limiter.check("exports", key, 0).reset_after == 0.0  # committed: no place held


def test_concurrency_limit_in_the_callers_transaction(limiter):
    key = fresh()
    with psycopg.connect(DSN) as conn:
        granted = limiter.take("exports", key, conn=conn)
        assert (granted.allowed, granted.reset_after) == (True, None)
        denied = limiter.take("exports", key, conn=conn)
        assert (denied.allowed, denied.retry_after) == (False, None)
        conn.rollback()
    free = limiter.check("exports", key, 0)  # rolled back: the place is free
    assert (free.allowed, free.reset_after) == (True, 0.0)


def test_concurrency_limit_outside_a_transaction(limiter):
    """A take on the pool runs in autocommit: the extension refuses it with
    25P01, raised as is (never a reason to fail open); the portable limiter
    grants it, the place held until the statement ends."""
    key = fresh()
    if SCHEMA:
        d = limiter.take("exports", key)
        assert (d.allowed, d.retry_after) == (True, 0.0)
        assert limiter.check("exports", key, 0).reset_after == 0.0
        return
    with pytest.raises(psycopg.errors.NoActiveSqlTransaction) as info:
        limiter.take("exports", key)
    assert info.value.sqlstate == "25P01" and classify(info.value) is None
    assert "can only be used in transaction blocks" in str(info.value)


def test_asgi_concurrency_limit():
    """The ASGI middleware takes in autocommit: on the portable limiter a
    denial by a place another transaction holds is 429 without Retry-After;
    on the extension the take's 25P01 is raised, even on a route that fails
    open."""
    from psycopg_pool import AsyncConnectionPool
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route
    from starlette.testclient import TestClient

    from pg_ratelimit.asgi import RateLimitMiddleware

    key = fresh()
    denials = []
    pool = AsyncConnectionPool(DSN, min_size=1, max_size=2, kwargs={"autocommit": True}, open=False)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        await pool.close()  # in the app's event loop, where the pool was opened

    app = Starlette(routes=[Route("/", lambda request: PlainTextResponse("served"))], lifespan=lifespan)
    app.add_middleware(RateLimitMiddleware, limiter=AsyncRateLimiter(pool, schema=SCHEMA), name="exports",
                       key=lambda request: key, fail="open", on_denied=lambda d, request: denials.append(d))
    with TestClient(app) as client:
        if not SCHEMA:
            with pytest.raises(psycopg.errors.NoActiveSqlTransaction):
                client.get("/")
            return
        with psycopg.connect(DSN) as holder:
            holder.execute(f"SELECT {SCHEMA}.rate_limit_take('exports', %s)", (key,))
            denied = client.get("/")
        assert (denied.status_code, denied.text) == (429, "too many requests\n")
        assert (denied.headers["ratelimit-policy"], denied.headers["ratelimit"]) == ('"exports";q=1', '"exports";r=0')
        assert "retry-after" not in denied.headers
        assert [(d.allowed, d.retry_after) for d in denials] == [(False, None)]
        served = client.get("/")  # the holder committed
        assert (served.status_code, served.text, served.headers["ratelimit"]) == (200, "served", '"exports";r=0')
        assert "retry-after" not in served.headers


def server_now(limiter):
    """The limiter's clock (clock_timestamp())."""
    with limiter.pool.connection() as conn:
        return conn.execute("SELECT pg_catalog.clock_timestamp()").fetchone()[0]


HOUR = datetime.timedelta(hours=1)


def test_lease_granted_then_denied_while_max_held_leases_are_held(limiter):
    key = fresh()
    since = stopwatch()
    before = server_now(limiter)
    first, second = limiter.lease("calls", key), limiter.lease("calls", key)
    after = server_now(limiter)
    for d, remaining in ((first, 1.0), (second, 0.0)):
        assert (d.allowed, d.remaining, d.capacity, d.name) == (True, remaining, 2.0, "calls")
        assert isinstance(d.lease, uuid.UUID)
        # An hour after the call, by the limiter's clock.
        assert before + HOUR <= d.expires_at <= after + HOUR, (before, d.expires_at, after)
    assert first.lease != second.lease
    assert first.headers["RateLimit-Policy"] == '"calls";q=2' and "Retry-After" not in first.headers
    denied = limiter.lease("calls", key)
    elapsed = since()
    assert_limit(first.headers["RateLimit"], '"calls";r=1;t=3600', elapsed)
    assert (denied.allowed, denied.remaining, denied.lease, denied.expires_at) == (False, 0.0, None, None)
    # Until the first lease expires (a release may come sooner).
    assert_limit(denied.headers["RateLimit"], '"calls";r=0;t=3600', elapsed)
    assert_wait(denied.headers["Retry-After"], 3600, elapsed)
    assert 3600 - elapsed < denied.retry_after <= 3600
    assert limiter.lease("calls", fresh(), 2).allowed  # another key has its own places


def test_release_true_once_then_false(limiter):
    key = fresh()
    first = limiter.lease("calls", key, 2)
    assert first.allowed and not limiter.lease("calls", key).allowed
    assert limiter.release(first.lease) is True
    assert limiter.release(first.lease) is False
    again = limiter.lease("calls", key)
    assert (again.allowed, again.remaining) == (True, 1.0)
    assert limiter.release(str(again.lease)) is True  # its text form too


def test_lease_in_the_callers_transaction(limiter):
    """A rollback gives a lease back, and undoes a release."""
    key = fresh()
    kept = limiter.lease("calls", key)
    with psycopg.connect(DSN) as conn:
        assert limiter.lease("calls", key, conn=conn).allowed
        assert limiter.release(kept.lease, conn=conn) is True
        conn.rollback()
    assert limiter.check("calls", key, 0).remaining == 1.0  # the lease kept, and only it
    assert limiter.release(kept.lease) is True


def test_release_of_none_unknown_or_malformed_leases(limiter):
    """None (a denial's lease) and an unknown lease are False; a malformed id
    is the server's error, raised as is (not unavailability)."""
    key = fresh()
    limiter.lease("calls", key, 2)
    denied = limiter.lease("calls", key)
    assert denied.lease is None and limiter.release(denied.lease) is False
    assert limiter.release(uuid.uuid4()) is False
    with pytest.raises(psycopg.errors.InvalidTextRepresentation) as info:
        limiter.release("not-a-lease")
    assert classify(info.value) is None
    with pytest.raises(psycopg.errors.InvalidParameterValue) as info:
        limiter.lease("exports", key)  # a concurrency limit without a lease
    assert classify(info.value) is None


def test_undefined_policy_is_raised(limiter):
    with pytest.raises(psycopg.errors.UndefinedObject):
        limiter.take("no-such-policy", "k")


def test_async():
    from psycopg_pool import AsyncConnectionPool

    async def run():
        # Not opened: the limiter opens it, once, for the first calls at once.
        pool = AsyncConnectionPool(DSN, min_size=1, max_size=2, kwargs={"autocommit": True}, open=False)
        try:
            limiter = AsyncRateLimiter(pool, schema=SCHEMA)
            key = fresh()
            first = await asyncio.gather(*(limiter.check("api", key) for _ in range(3)))
            assert [d.allowed for d in first] == [True] * 3
            assert (await limiter.take("api", key, 3)).headers["RateLimit"] == '"api";r=0;t=720'
            assert (await limiter.check("api", key)).allowed is False
            assert (await limiter.refund("api", key, 1)).remaining >= 1
            assert (await limiter.take_all([("api", key), ("bytes", key, 1)])).allowed
            with pytest.raises(ZeroDivisionError):
                async with limiter.transaction("orders", key, 2):
                    1 / 0
            async with limiter.transaction("orders", key, 2) as (conn, decision):
                assert decision.headers["RateLimit"] == '"orders";r=0;t=1800'
            with pytest.raises(RateLimited):
                async with limiter.transaction("orders", key):
                    pass
            leased = await limiter.lease("calls", key, 2)
            assert leased.allowed and isinstance(leased.lease, uuid.UUID)
            assert (await limiter.lease("calls", key)).lease is None
            assert [await limiter.release(leased.lease), await limiter.release(leased.lease)] == [True, False]
            assert await limiter.release(None) is False
        finally:
            await pool.close()

    asyncio.run(run())

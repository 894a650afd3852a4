"""The clients against a database: RL_TEST_DSN (a database with the
extension, or with the portable limiter in RL_TEST_SCHEMA), with the
policies test/cluster/clients.sh defines: "api" 5 a minute, burst 3;
"orders" 2 a minute; "bytes" 1000 a day. Skipped without RL_TEST_DSN."""

import asyncio
import os
import uuid

import psycopg
import pytest

from pg_ratelimit import AsyncRateLimiter, RateLimited, RateLimiter

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


def test_take_check_refund(limiter):
    key = fresh()
    seen = [limiter.take("api", key) for _ in range(4)]
    assert [d.allowed for d in seen] == [True, True, True, False]
    assert [d.headers["RateLimit"] for d in seen] == ['"api";r=2;t=12', '"api";r=1;t=12', '"api";r=0;t=12',
                                                      '"api";r=0;t=12']
    assert seen[0].headers["RateLimit-Policy"] == '"api";q=5;w=60'
    assert "Retry-After" not in seen[0].headers and seen[3].headers["Retry-After"] == "12"
    d = seen[3]
    assert (d.name, d.capacity, d.quota, d.per) == ("api", 3.0, 5.0, 60.0)
    assert 11 < d.retry_after <= 12
    assert limiter.check("api", key).allowed is False
    refunded = limiter.refund("api", key, 2)
    assert 2 <= refunded.remaining < 3
    assert limiter.take("api", key, 2).allowed is True


def test_take_all(limiter):
    key = fresh()
    granted = limiter.take_all([("api", key), ("bytes", key, 600)])
    assert granted.allowed and granted.headers["RateLimit"].startswith('"api";r=2;t=12, "bytes";r=400;')
    denied = limiter.take_all([("api", key), ("bytes", key, 600)])
    assert not denied.allowed and (denied.binding_name, denied.binding_key) == ("bytes", key)
    assert denied.headers["Retry-After"] == "17280"
    assert [int(x) for x in denied.remaining] == [2, 400]


def test_transaction(limiter):
    key = fresh()
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
    assert info.value.status_code == 429 and info.value.headers["Retry-After"] == "30"


def test_take_in_the_callers_transaction(limiter):
    key = fresh()
    with psycopg.connect(DSN) as conn:
        assert limiter.take("orders", key, 2, conn=conn).allowed
        conn.rollback()
    assert limiter.check("orders", key, 2).allowed


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
            assert (await limiter.take("api", key, 3)).headers["RateLimit"] == '"api";r=0;t=12'
            assert (await limiter.check("api", key)).allowed is False
            assert (await limiter.refund("api", key, 1)).remaining >= 1
            assert (await limiter.take_all([("api", key), ("bytes", key, 1)])).allowed
            with pytest.raises(ZeroDivisionError):
                async with limiter.transaction("orders", key, 2):
                    1 / 0
            async with limiter.transaction("orders", key, 2) as (conn, decision):
                assert decision.headers["RateLimit"] == '"orders";r=0;t=30'
            with pytest.raises(RateLimited):
                async with limiter.transaction("orders", key):
                    pass
        finally:
            await pool.close()

    asyncio.run(run())

"""The clients: one SQL statement per call, on a psycopg_pool pool (or on
the caller's own connection, inside its transaction), against the
ratelimit extension or the portable limiter alike."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any, Iterator, AsyncIterator, Optional, Sequence, Tuple, Union

from ._core import (
    AllDecision, Decision, LeaseDecision, RateLimitUnavailable, RateLimited, Statements, all_decision_of,
    classify, decision_of, interval, is_pool_timeout, lease_decision_of, release_args, take_all_args,
)

Limit = Tuple[Any, ...]  # (name, key) or (name, key, cost)
PROBE_TIMEOUT = 2  # seconds a probe connection may take


def _probe_kwargs(pool) -> dict:
    kwargs = dict(getattr(pool, "kwargs", None) or {})
    kwargs.setdefault("connect_timeout", PROBE_TIMEOUT)
    kwargs["autocommit"] = True
    return kwargs


class _Base:
    def __init__(self, pool, *, schema: Optional[str] = None):
        self.pool = pool
        self.sql = Statements(schema)


class RateLimiter(_Base):
    """Rate limits from the database over a ``psycopg_pool.ConnectionPool``.

    Each method is one statement, on a connection of the pool (its own
    short transaction), or on ``conn`` (a psycopg connection, or any DB-API
    connection such as Django's ``django.db.connection``) inside the
    caller's transaction, so that its rollback gives the tokens back.
    """

    def take(self, name: str, key: str, cost: float = 1, *, max_wait: Optional[float] = None,
             conn=None) -> Decision:
        return decision_of(self._one(self.sql.take, (name, key, float(cost), interval(max_wait)), conn))

    def check(self, name: str, key: str, cost: float = 1, *, max_wait: Optional[float] = None,
              conn=None) -> Decision:
        return decision_of(self._one(self.sql.check, (name, key, float(cost), interval(max_wait)), conn))

    def refund(self, name: str, key: str, amount: float, *, conn=None) -> Decision:
        return decision_of(self._one(self.sql.refund, (name, key, float(amount)), conn))

    def take_all(self, limits: Sequence[Limit], *, max_wait: Optional[float] = None, conn=None) -> AllDecision:
        return all_decision_of(self._one(self.sql.take_all, take_all_args(limits, max_wait), conn))

    def lease(self, name: str, key: str, cost: float = 1, *, conn=None) -> LeaseDecision:
        """Takes ``cost`` places of (name, key), a concurrency limit defined
        with a lease, as one lease: held until it expires or is released,
        also after the transaction that took it commits (a rollback of
        ``conn``'s transaction gives it back)."""
        return lease_decision_of(self._one(self.sql.lease, (name, key, float(cost)), conn))

    def release(self, lease: Union[uuid.UUID, str, None], *, conn=None) -> bool:
        """Gives a lease's places back now: True once, False for a lease no
        longer in force (unknown, expired, already released) or None (a
        denial's)."""
        return self._one(self.sql.release, release_args(lease), conn)[0]

    @contextlib.contextmanager
    def transaction(self, name: str, key: str, cost: float = 1, *,
                    max_wait: Optional[float] = None) -> Iterator[Tuple[Any, Decision]]:
        """Takes inside a transaction on a connection of the pool and yields
        ``(conn, decision)``; commits when the block ends, rolls back (giving
        the tokens back) when it raises. A denied take rolls back and raises
        RateLimited."""
        with self._classified():
            cm = self.pool.connection()
            conn = cm.__enter__()
        try:
            with conn.transaction():
                decision = self.take(name, key, cost, max_wait=max_wait, conn=conn)
                if not decision.allowed:
                    raise RateLimited(decision)
                yield conn, decision
        except BaseException as err:
            cm.__exit__(type(err), err, err.__traceback__)
            raise
        cm.__exit__(None, None, None)

    def _one(self, sql: str, args, conn) -> Sequence[Any]:
        with self._classified():
            if conn is not None:
                with conn.cursor() as cur:
                    cur.execute(sql, args)
                    return cur.fetchone()
            with self.pool.connection() as pooled:
                return pooled.execute(sql, args).fetchone()

    @contextlib.contextmanager
    def _classified(self):
        try:
            yield
        except RateLimited:
            raise
        except Exception as err:
            reason = self._reason(err)
            if reason:
                raise RateLimitUnavailable(reason, err) from err
            raise

    def _reason(self, err: BaseException) -> Optional[str]:
        if not is_pool_timeout(err):
            return classify(err)
        # The pool gave no connection in time: busy, or no connection can be
        # made (psycopg_pool keeps trying in the background and waits just
        # the same). One connection of our own tells.
        import psycopg
        try:
            psycopg.connect(getattr(self.pool, "conninfo", ""), **_probe_kwargs(self.pool)).close()
        except Exception as probe_err:
            return "unreachable" if classify(probe_err) == "unreachable" else "busy"
        return "busy"


class AsyncRateLimiter(_Base):
    """The same over a ``psycopg_pool.AsyncConnectionPool``; ``conn`` a
    psycopg AsyncConnection. A pool made with ``open=False`` (an async pool
    can only open inside the event loop) is opened at its first use, once."""

    _opening = None

    async def _pool(self):
        if self._opening is None:
            # One opening, which concurrent first calls all wait for.
            self._opening = asyncio.ensure_future(
                self.pool.open() if getattr(self.pool, "closed", False) else asyncio.sleep(0))
        await self._opening
        return self.pool

    async def take(self, name: str, key: str, cost: float = 1, *, max_wait: Optional[float] = None,
                   conn=None) -> Decision:
        return decision_of(await self._one(self.sql.take, (name, key, float(cost), interval(max_wait)), conn))

    async def check(self, name: str, key: str, cost: float = 1, *, max_wait: Optional[float] = None,
                    conn=None) -> Decision:
        return decision_of(await self._one(self.sql.check, (name, key, float(cost), interval(max_wait)), conn))

    async def refund(self, name: str, key: str, amount: float, *, conn=None) -> Decision:
        return decision_of(await self._one(self.sql.refund, (name, key, float(amount)), conn))

    async def take_all(self, limits: Sequence[Limit], *, max_wait: Optional[float] = None,
                       conn=None) -> AllDecision:
        return all_decision_of(await self._one(self.sql.take_all, take_all_args(limits, max_wait), conn))

    async def lease(self, name: str, key: str, cost: float = 1, *, conn=None) -> LeaseDecision:
        """As RateLimiter.lease, to await."""
        return lease_decision_of(await self._one(self.sql.lease, (name, key, float(cost)), conn))

    async def release(self, lease: Union[uuid.UUID, str, None], *, conn=None) -> bool:
        """As RateLimiter.release, to await."""
        return (await self._one(self.sql.release, release_args(lease), conn))[0]

    @contextlib.asynccontextmanager
    async def transaction(self, name: str, key: str, cost: float = 1, *,
                          max_wait: Optional[float] = None) -> AsyncIterator[Tuple[Any, Decision]]:
        """As RateLimiter.transaction, for ``async with``."""
        try:
            cm = (await self._pool()).connection()
            conn = await cm.__aenter__()
        except Exception as err:
            unavailable = await self._unavailable(err)
            if unavailable is None:
                raise
            raise unavailable from err
        try:
            async with conn.transaction():
                decision = await self.take(name, key, cost, max_wait=max_wait, conn=conn)
                if not decision.allowed:
                    raise RateLimited(decision)
                yield conn, decision
        except BaseException as err:
            await cm.__aexit__(type(err), err, err.__traceback__)
            raise
        await cm.__aexit__(None, None, None)

    async def _one(self, sql: str, args, conn) -> Sequence[Any]:
        try:
            if conn is not None:
                async with conn.cursor() as cur:
                    await cur.execute(sql, args)
                    return await cur.fetchone()
            async with (await self._pool()).connection() as pooled:
                cur = await pooled.execute(sql, args)
                return await cur.fetchone()
        except Exception as err:
            unavailable = await self._unavailable(err)
            if unavailable is None:
                raise
            raise unavailable from err

    async def _unavailable(self, err: Exception) -> Optional[RateLimitUnavailable]:
        """RateLimitUnavailable for an error that means no answer, else None."""
        if is_pool_timeout(err):
            import psycopg
            try:
                probe = await psycopg.AsyncConnection.connect(
                    getattr(self.pool, "conninfo", ""), **_probe_kwargs(self.pool))
                await probe.close()
                reason = "busy"
            except Exception as probe_err:
                reason = "unreachable" if classify(probe_err) == "unreachable" else "busy"
        else:
            reason = classify(err)
        return RateLimitUnavailable(reason, err) if reason else None

"""Rate limits from the ratelimit PostgreSQL extension, or its portable
limiter, for psycopg 3 applications: ``RateLimiter`` (sync),
``AsyncRateLimiter``, ASGI middleware and a FastAPI dependency
(``pg_ratelimit.asgi``), Django middleware (``pg_ratelimit.django``)."""

from ._core import (
    AllDecision, Decision, LeaseDecision, RateLimitUnavailable, RateLimited, address_key, classify,
    forwarded_address,
)
from .client import AsyncRateLimiter, RateLimiter

__all__ = [
    "AllDecision", "AsyncRateLimiter", "Decision", "LeaseDecision", "RateLimitUnavailable", "RateLimited",
    "RateLimiter", "address_key", "classify", "forwarded_address",
]
__version__ = "0.4.0"

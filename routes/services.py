"""The application's objects, made once by its lifespan (app/) and handed to every request beside the request's own
state (request_types/state.py): what the routes build a resolver's context from."""

from __future__ import annotations

from typing import TypedDict

from starlette.types import Scope

from cdn.purge import BackgroundPurge
from chat.service import ChatService
from db.cache.client import RedisClient
from db.cache.store import CacheStore
from db.pool import ServingPool
from db.replicas.routing import ReplicaSet
from edge.near import NearResponses
from edge.ratelimit import RateLimiter
from settings import Settings


class Services(TypedDict):
    settings: Settings
    pool: ServingPool
    # None without Redis, the near tier without it too (or turned off), the purge without WOVEPAPER_PURGE_URL, the
    # replicas without WOVEPAPER_DATABASE_REPLICA_URLS.
    redis: RedisClient | None
    cache: CacheStore
    near: NearResponses | None
    chat: ChatService
    rate_limiter: RateLimiter
    purge: BackgroundPurge | None
    replicas: ReplicaSet | None


def services(scope: Scope) -> Services:
    """The lifespan's objects, as every request's scope carries them (a copy of the lifespan's state)."""
    served: Services = scope["state"]
    return served

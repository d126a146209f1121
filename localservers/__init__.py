"""Project-local PostgreSQL and Redis for `make run` and `make test` when no URL is set.

Both live under WOVEPAPER_LOCAL_DIR (default `.wovepaper/`, git-ignored) and stop when the process exits:
`postgres` (the embedded PostgreSQL), `redis` (a redis-server), `environment` (both, for the dev runner).
"""

from localservers.environment import LocalEnvironment, local_environment
from localservers.errors import LocalServiceError
from localservers.ports import free_port
from localservers.postgres import LocalPostgres, start_local_postgres, start_postgres, with_database
from localservers.redis import LOCAL_MAXMEMORY, MAX_SOCKET_PATH, LocalRedis, redis_server_binary, start_redis

__all__ = [
    "MAX_SOCKET_PATH",
    "LOCAL_MAXMEMORY",
    "LocalEnvironment",
    "LocalPostgres",
    "LocalRedis",
    "LocalServiceError",
    "free_port",
    "local_environment",
    "redis_server_binary",
    "start_local_postgres",
    "start_postgres",
    "start_redis",
    "with_database",
]

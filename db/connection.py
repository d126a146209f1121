"""The connection types the reads and writes take."""

from __future__ import annotations

import asyncpg
from asyncpg.pool import PoolConnectionProxy

# A plain connection or one acquired from the pool.
Conn = asyncpg.Connection | PoolConnectionProxy
# Statements that need no transaction of their own may run on the pool itself.
ConnOrPool = Conn | asyncpg.Pool

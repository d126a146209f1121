"""The databases the project creates itself: the local server's, the test suite's and the benchmarks'."""

from __future__ import annotations

import asyncpg

# PostgreSQL's own C.UTF-8 locale: the same code-point order as libc's C.UTF-8, but case mapping and character
# classes from PostgreSQL's Unicode tables instead of libc's wide-character calls. A paper's search vector
# lowercases every word: it costs about 14% less to compute, and a harvest's PostgreSQL time about 8% less.
_BUILTIN_LOCALE = "TEMPLATE template0 ENCODING 'UTF8' LOCALE_PROVIDER builtin BUILTIN_LOCALE 'C.UTF-8'"


async def create_database(admin: asyncpg.Connection, name: str) -> None:
    """CREATE DATABASE `name`: with the builtin C.UTF-8 locale on PostgreSQL 17 and later, else the server's default."""
    if admin.get_server_version().major >= 17:
        try:
            await admin.execute(f'CREATE DATABASE "{name}" {_BUILTIN_LOCALE}')
            return
        except asyncpg.DuplicateDatabaseError:
            raise
        except asyncpg.PostgresError:
            pass  # a server whose template0 cannot take it: its default locale is no less correct
    await admin.execute(f'CREATE DATABASE "{name}"')

"""A loopback TCP proxy that forwards bytes at once but passes a server's close on `close_delay_s` later.

It reproduces, every time, what a busy client sometimes sees when PostgreSQL terminates a backend: the FATAL
message has arrived, the end of the connection not yet."""

from __future__ import annotations

import asyncio
import contextlib


class DelayedCloseProxy:
    def __init__(self, upstream: tuple[str, int] | str, *, close_delay_s: float) -> None:
        """`upstream`: (host, port), or the path of a Unix socket."""
        self.upstream = upstream
        self.close_delay_s = close_delay_s
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    async def __aenter__(self) -> DelayedCloseProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            if isinstance(self.upstream, str):
                server_reader, server_writer = await asyncio.open_unix_connection(self.upstream)
            else:
                server_reader, server_writer = await asyncio.open_connection(*self.upstream)
            up = asyncio.create_task(self._pipe(client_reader, server_writer, delay=0))
            down = asyncio.create_task(self._pipe(server_reader, client_writer, delay=self.close_delay_s))
            await asyncio.gather(up, down, return_exceptions=True)
        finally:
            self._tasks.discard(task)
            with contextlib.suppress(Exception):
                client_writer.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, delay: float) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
            await asyncio.sleep(delay)
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

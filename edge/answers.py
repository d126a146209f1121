"""How the edge's steps hand over a whole response at once (an answer from memory), without ASGI messages."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

Header = tuple[bytes, bytes]
# Sends a whole response: status, headers (none of those the edge adds), body.
Answer = Callable[[int, list[Header], bytes], Awaitable[None]]
# Writes a whole response: status, every header, body.
Write = Callable[[int, list[Header], bytes], None]

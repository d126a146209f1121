"""Responses to a signed-in reader are theirs alone: `Cache-Control: private, no-store`, whatever was set before."""

from __future__ import annotations

PRIVATE = (b"cache-control", b"private, no-store")


def private(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """`headers` with any Cache-Control replaced by `private, no-store`."""
    return [*((k, v) for k, v in headers if k.lower() != b"cache-control"), PRIVATE]

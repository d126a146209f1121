"""The signed-in reader: who the request's verified bearer token names (edge/identity.py)."""

from __future__ import annotations

from resolvers.context import Context


def viewer_id(ctx: Context) -> str | None:
    return ctx.identity.viewer_id

"""Aliases shared by the schema modules."""

from __future__ import annotations

import strawberry

from resolvers.context import Context

Info = strawberry.Info[Context, None]

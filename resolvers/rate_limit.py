"""`rateLimit`: the running query's cost and the client's budget after it was charged."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from resolvers.context import Context


@dataclass(frozen=True, slots=True)
class RateLimitFigures:
    limit: int
    cost: int
    node_count: int
    remaining: int
    used: int
    reset_at: datetime


def rate_limit_figures(ctx: Context) -> RateLimitFigures:
    cost = getattr(ctx.cost, "cost", 1)
    node_count = getattr(ctx.cost, "node_count", 0)
    decision = ctx.rate_charge.decision if ctx.rate_charge is not None else None
    if decision is None:
        # Called in-process (no HTTP request): nothing was charged.
        limit = ctx.settings.anon_points_per_hour
        return RateLimitFigures(limit, cost, node_count, limit, 0, datetime.now(UTC))
    return RateLimitFigures(
        limit=decision.limit,
        cost=cost,
        node_count=node_count,
        remaining=decision.remaining,
        used=decision.used,
        reset_at=datetime.fromtimestamp(decision.reset_at, UTC),
    )

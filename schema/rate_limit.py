"""`Query.rateLimit`: what a query costs and what remains of the client's hourly budget (GitHub's shape)."""

from __future__ import annotations

from datetime import datetime

import strawberry

from resolvers.context import Info
from resolvers.rate_limit import rate_limit_figures


@strawberry.type(
    description=(
        "The client's budget of points per hour (per API key, else per client address) and this query's price. "
        "Points refill continuously; a query whose cost does not fit is refused with RATE_LIMITED (HTTP 429)."
    )
)
class RateLimit:
    limit: int = strawberry.field(description="Points per hour.")
    cost: int = strawberry.field(
        description="This query's points: the connection and list calls it needs (aggregates weighted) / 100, "
        "rounded up, at least 1."
    )
    node_count: int = strawberry.field(
        description="The most nodes this query can return: every list's size times the sizes of the lists above it."
    )
    remaining: int = strawberry.field(description="Points left now, after this query.")
    used: int = strawberry.field(description="Points spent and not yet refilled.")
    reset_at: datetime = strawberry.field(description="When the budget is full again.")


@strawberry.type
class RateLimitQuery:
    @strawberry.field(
        description="This query's cost and the client's budget. With `dryRun: true` the rest of the document is "
        "priced but not executed, and nothing is charged."
    )
    def rate_limit(self, info: Info, dry_run: bool = False) -> RateLimit | None:
        f = rate_limit_figures(info.context)
        return RateLimit(
            limit=f.limit, cost=f.cost, node_count=f.node_count, remaining=f.remaining, used=f.used, reset_at=f.reset_at
        )

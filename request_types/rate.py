"""A request's rate-limit points as the layers under the edge see them: the `Decision` a charge made, and the
`PointsCharge` the edge hands GraphQL (edge/ratelimit.py's `RateCharge`), which charges the operation's cost once it
is known."""

from __future__ import annotations

from typing import Final, NamedTuple, Protocol

RESOURCE: Final = "graphql"
_RESOURCE_HEADER: Final = (b"x-ratelimit-resource", RESOURCE.encode())


class Decision(NamedTuple):
    """What a charge decided, with a client's figures after it (a tuple: one is made per request)."""

    allowed: bool
    limit: int
    cost: int
    used: int
    remaining: int
    reset_at: int  # epoch seconds when the budget is full again
    retry_after: int  # seconds until `cost` fits (0 when allowed)

    def refusal(self) -> tuple[str, dict[str, int]]:
        """The RATE_LIMITED error's message and figures."""
        message = (
            f"This query costs {self.cost} points and {self.remaining} of {self.limit} remain this hour; "
            f"retry in {self.retry_after} s."
        )
        figures = {"cost": self.cost, "limit": self.limit, "remaining": self.remaining, "retryAfter": self.retry_after}
        return message, figures

    def headers(self) -> list[tuple[bytes, bytes]]:
        """GitHub's names."""
        return [
            (b"x-ratelimit-limit", b"%d" % self.limit),
            (b"x-ratelimit-remaining", b"%d" % self.remaining),
            (b"x-ratelimit-used", b"%d" % self.used),
            (b"x-ratelimit-reset", b"%d" % self.reset_at),
            _RESOURCE_HEADER,
        ]


class PointsCharge(Protocol):
    """One request's charge on its client's points for the hour."""

    # Whether limits are on (off: every charge is allowed, with unlimited figures).
    enabled: bool
    # The charge made, None until one is.
    decision: Decision | None

    async def charge(self, points: int) -> Decision: ...

"""How far behind the primary a replica is, in seconds: from the primary's WAL position sampled over time.

Each health round first samples the primary's written WAL position, then asks each replica how far it has
replayed. A replica that has replayed a sample's position has everything the primary had written when that sample
was taken, so its data is as old as the newest such sample (`caught_at`); its lag is the time since. This holds on
an idle primary (its position stops moving, the replica reaches it: no lag), and while replay is paused or the
stream is broken (the primary moves on, the replica's `caught_at` stays: the lag grows with the clock), where a
replica's own last-replayed-transaction time would say nothing. While the primary cannot be sampled, lags grow
too: nothing newer is known.
"""

from __future__ import annotations

from collections import deque
from typing import Final

# Samples older than the longest lag worth telling apart, plus this, are forgotten.
KEEP_BEYOND_S: Final = 5.0


class PrimaryTimeline:
    def __init__(self, window_s: float) -> None:
        self.window_s = window_s + KEEP_BEYOND_S
        self._samples: deque[tuple[float, int]] = deque()  # (when, position), oldest first

    def sample(self, when: float, position: int) -> None:
        self._samples.append((when, position))
        while len(self._samples) > 1 and self._samples[0][0] < when - self.window_s:
            self._samples.popleft()

    def caught_at(self, replayed: int | None) -> float | None:
        """When the primary had no more than `replayed` written, at the latest: the age of a replica's data. None when
        no sample is that old (the replica is further behind than the window)."""
        if replayed is None:
            return None
        for when, position in reversed(self._samples):
            if position <= replayed:
                return when
        return None

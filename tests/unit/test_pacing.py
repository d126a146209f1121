"""The ingest's duty cycle: it pauses in proportion to what it wrote, and not at all at its default."""

from __future__ import annotations

import pytest

from ingest.pacing import DutyCycle
from settings import Settings


class Sleeps:
    def __init__(self) -> None:
        self.seconds: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.seconds.append(seconds)


async def test_a_share_pauses_in_proportion_to_the_write() -> None:
    sleeps = Sleeps()
    quarter = DutyCycle(0.25, sleep=sleeps)
    await quarter.after(0.2)
    await quarter.after(1.0)
    # Busy 0.2 s then paused 0.6 s: writing a quarter of the time.
    assert sleeps.seconds == pytest.approx([0.6, 3.0])
    assert quarter.paused_s == pytest.approx(3.6)


async def test_owed_writes_are_paid_for_at_once_where_the_caller_chooses() -> None:
    sleeps = Sleeps()
    half = DutyCycle(0.5, sleep=sleeps)
    half.owe(0.25)
    half.owe(0.5)
    assert half.owing and sleeps.seconds == []
    await half.pay()
    assert sleeps.seconds == pytest.approx([0.75]) and not half.owing
    await half.pay()
    assert sleeps.seconds == pytest.approx([0.75])


async def test_all_of_the_time_never_pauses() -> None:
    sleeps = Sleeps()
    await DutyCycle(sleep=sleeps).after(5.0)
    await DutyCycle(0.5, sleep=sleeps).after(0.0)
    assert sleeps.seconds == []


@pytest.mark.parametrize("share", [0.0, -0.5, 1.5])
def test_a_share_outside_zero_to_one_is_refused(share: float) -> None:
    with pytest.raises(ValueError):
        DutyCycle(share)
    with pytest.raises(ValueError):
        Settings(ingest_share=share)

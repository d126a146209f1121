"""The ingest's duty cycle: it pauses in proportion to what it wrote, and not at all at its default."""

from __future__ import annotations

import pytest

from ingest.pacing import POLL_S, DutyCycle
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


class Strain:
    """Says the site is strained for the first `times` questions."""

    def __init__(self, times: int) -> None:
        self.times = times
        self.asked = 0

    async def __call__(self) -> str | None:
        self.asked += 1
        return "api-1:123: loop 240 ms late" if self.asked <= self.times else None


async def test_a_strained_site_is_waited_for_after_the_share() -> None:
    sleeps = Sleeps()
    pacing = DutyCycle(0.5, sleep=sleeps, strained=Strain(3), yield_s=30.0)
    await pacing.after(1.0)
    # The share's pause first, then three polls while the site said it was strained, then the write goes on.
    assert sleeps.seconds == pytest.approx([1.0, POLL_S, POLL_S, POLL_S])
    assert pacing.paused_s == pytest.approx(1.0) and pacing.yielded_s == pytest.approx(3 * POLL_S)


async def test_a_site_strained_for_good_still_lets_a_write_through() -> None:
    sleeps = Sleeps()
    strain = Strain(1_000)
    pacing = DutyCycle(strained=strain, sleep=sleeps, yield_s=1.0)
    await pacing.after(0.5)
    await pacing.after(0.5)
    # At most `yield_s` before each write, however long the strain lasts.
    assert sum(sleeps.seconds) == pytest.approx(2.0) and pacing.yielded_s == pytest.approx(2.0)
    assert strain.asked == 2 * round(1.0 / POLL_S)


async def test_yielding_makes_every_write_a_place_to_pay_even_at_the_whole_share() -> None:
    sleeps = Sleeps()
    pacing = DutyCycle(strained=Strain(1), sleep=sleeps, yield_s=30.0)
    assert not pacing.owing
    pacing.owe(0.2)
    assert pacing.owing
    await pacing.pay()
    assert sleeps.seconds == pytest.approx([POLL_S]) and not pacing.owing
    # Without a strain to ask, or with no time to give it, the whole share still never pauses.
    for idle in (DutyCycle(sleep=sleeps), DutyCycle(strained=Strain(5), sleep=sleeps, yield_s=0.0)):
        idle.owe(0.2)
        assert not idle.owing
        await idle.after(0.2)
    assert sleeps.seconds == pytest.approx([POLL_S])

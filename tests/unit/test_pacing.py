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


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def busy_site(loads: list[int], clock: Clock) -> tuple[list[int], object, object]:
    """A site whose API runs `loads[i]` statements at its i-th reading; sleeping moves the clock."""
    read: list[int] = []

    async def site_load(conn: object) -> int:
        read.append(loads[len(read)] if len(read) < len(loads) else 0)
        return read[-1]

    async def sleep(seconds: float) -> None:
        clock.now += seconds

    return read, site_load, sleep


async def test_a_write_waits_while_the_site_keeps_the_database_busy() -> None:
    from ingest.pacing import SAMPLES

    clock = Clock()
    # Two readings at the bound (a mean of 2, then of 2.4), then a quiet one (a mean of 1.2).
    read, site_load, sleep = busy_site([2] * SAMPLES + [3, 3, 2, 2, 2] + [1, 2, 1, 1, 1], clock)
    pacing = DutyCycle(yield_active=2, site_load=site_load, sleep=sleep, clock=clock)  # type: ignore[arg-type]
    await pacing.before_write(None)  # type: ignore[arg-type]
    assert len(read) == 3 * SAMPLES
    assert pacing.yielded_s == pytest.approx(clock.now) and clock.now > 0.5
    # Quiet at once: one reading, no wait beyond it.
    before = clock.now
    await pacing.before_write(None)  # type: ignore[arg-type]
    assert len(read) == 4 * SAMPLES and clock.now - before < 0.1


async def test_a_site_busy_for_good_slows_the_ingest_without_stopping_it() -> None:
    from ingest.pacing import MAX_YIELD_S

    clock = Clock()
    _, site_load, sleep = busy_site([9] * 100_000, clock)
    pacing = DutyCycle(yield_active=2, site_load=site_load, sleep=sleep, clock=clock)  # type: ignore[arg-type]
    await pacing.before_write(None)  # type: ignore[arg-type]
    assert MAX_YIELD_S <= clock.now < MAX_YIELD_S + 1


async def test_without_a_bound_a_write_never_reads_the_site() -> None:
    clock = Clock()
    read, site_load, sleep = busy_site([9] * 10, clock)
    pacing = DutyCycle(0.5, site_load=site_load, sleep=sleep, clock=clock)  # type: ignore[arg-type]
    await pacing.before_write(None)  # type: ignore[arg-type]
    assert read == [] and clock.now == 0
    with pytest.raises(ValueError):
        DutyCycle(yield_active=-1)

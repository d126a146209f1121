"""`wovepaper demo`: load the demo dataset with a progress bar on a terminal, plain lines otherwise."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import asyncpg

from db.queries.writes.papers import count_papers
from demo.loader import load_demo

if TYPE_CHECKING:
    from rich.progress import TaskID


# ------------------------------------------------------------------------------------------------ command


async def run_demo_command(dsn: str, *, papers: int, seed: int, if_empty: bool, echo: Callable[[str], None]) -> int:
    """`wovepaper demo`: a progress bar on a terminal, plain lines otherwise; returns the exit code."""
    import sys

    conn = await asyncpg.connect(dsn)
    try:
        if if_empty and await count_papers(conn):
            echo("demo: the database already has papers; nothing to do (--if-empty)")
            return 0
        if sys.stderr.isatty():
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            columns = (TextColumn("{task.description:<12}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
            with Progress(*columns, transient=False) as bar:
                tasks: dict[str, TaskID] = {}

                def show(stage: str, done: int, total: int) -> None:
                    if stage not in tasks:
                        tasks[stage] = bar.add_task(stage, total=total)
                    bar.update(tasks[stage], completed=done)

                result = await load_demo(conn, papers=papers, seed=seed, progress=show)
        else:
            last: dict[str, float] = {}

            def show(stage: str, done: int, total: int) -> None:
                # A line per stage start, end, and every ~10%, not a line per batch.
                step = done / total if total else 1.0
                if done in (0, total) or step - last.get(stage, 0.0) >= 0.1:
                    last[stage] = step
                    echo(f"demo: {stage} {done}/{total}")

            result = await load_demo(conn, papers=papers, seed=seed, progress=show)
    finally:
        await conn.close()
    echo(
        f"demo: {result.papers} papers, {result.researchers} researchers, {result.institutions} institutions, "
        f"{result.works} external works in {result.seconds:.1f} s"
    )
    return 0

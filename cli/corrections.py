"""`wovepaper corrections ...`: the operators' side of readers' corrections (list, show, approve, reject)."""

from __future__ import annotations

import asyncio
import getpass
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TypeVar

import asyncpg
import typer

from cli.common import corrections_app, database_url_or_exit, settings_or_exit

T = TypeVar("T")
STATUSES = ("pending", "applied", "rejected")
MAX_REASON_LENGTH = 2000


def _operator() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "operator"


OPERATOR = typer.Option(
    None, "--operator", help="Who decides, for the decision log (default: the system user running the command)."
)


async def _with_connection(dsn: str, work: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
    conn = await asyncpg.connect(dsn)
    try:
        return await work(conn)
    finally:
        await conn.close()


def _when(value: datetime | None) -> str:
    return f"{value:%Y-%m-%d %H:%M}" if value is not None else "-"


def _short(text: str | None, width: int = 60) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 1] + "…"


@corrections_app.command("list")
def corrections_list(
    status: str | None = typer.Option(None, "--status", help="Only these: pending, applied or rejected."),
    limit: int = typer.Option(50, "--limit", min=1, max=10_000, help="At most this many, newest first."),
) -> None:
    """Corrections, newest first: id, asked, kind, status, reader, profiles, papers, note."""
    from db.queries.corrections import fetch_correction_queue

    if status is not None and status.lower() not in STATUSES:
        typer.echo(f"error: --status is one of {', '.join(STATUSES)}", err=True)
        raise typer.Exit(2)
    dsn = database_url_or_exit(settings_or_exit())
    wanted = status.upper() if status else None
    rows = asyncio.run(_with_connection(dsn, lambda conn: fetch_correction_queue(conn, status=wanted, limit=limit)))
    typer.echo("id\tasked\tkind\tstatus\treader\tprofiles\tpapers\tnote")
    for c in rows:
        typer.echo(
            "\t".join(
                [
                    str(c.id),
                    _when(c.created_at),
                    c.kind,
                    c.status.lower() + (" (superseded)" if c.superseded_at else ""),
                    c.viewer_id,
                    ",".join(map(str, c.researcher_ids)),
                    ",".join(map(str, c.paper_ids)) or "-",
                    _short(c.note) or "-",
                ]
            )
        )
    if not rows:
        typer.echo("no corrections" + (f" {status.lower()}" if status else ""), err=True)


@corrections_app.command("show")
def corrections_show(correction_id: int = typer.Argument(..., min=1, help="The correction's id (`list`).")) -> None:
    """Everything about one correction: the request, the profiles and papers it names as they are now, what
    approving it would do, its decisions and the ingest's writes it has kept from undoing it."""
    from db.queries.corrections import fetch_corrections_by_ids, fetch_decisions, fetch_paper_labels, fetch_profiles

    dsn = database_url_or_exit(settings_or_exit())

    async def read(conn: asyncpg.Connection) -> list[str] | None:
        found = await fetch_corrections_by_ids(conn, [correction_id])
        if not found:
            return None
        c = found[0]
        profiles = await fetch_profiles(conn, c.researcher_ids)
        papers = await fetch_paper_labels(conn, c.paper_ids)
        superseded = f" (superseded since {_when(c.superseded_at)})" if c.superseded_at else ""
        lines = [
            f"correction {c.id}: {c.kind}, {c.status.lower()}{superseded}",
            f"asked by reader {c.viewer_id} at {_when(c.created_at)}",
        ]
        for rid in c.researcher_ids:
            p = profiles.get(rid)
            if p is None:
                lines.append(f"profile {rid}: no longer in the archive")
                continue
            now = f" (now {p.id})" if p.id != rid else ""
            owner = f"owned by reader {p.owner}" if p.owner else "unclaimed"
            lines.append(f"profile {rid}{now}: {p.name}, {p.paper_count} papers, ORCID {p.orcid or '-'}, {owner}")
        for pid in c.paper_ids:
            arxiv_id, title = papers.get(pid, ("?", "no longer in the archive"))
            lines.append(f"paper {pid}: arXiv:{arxiv_id} {_short(title, 80)}")
        if c.position is not None:
            lines.append(f"author {c.position}, named {c.author_name!r} when asked")
        lines.append(f"note: {c.note or '-'}")
        if c.status == "PENDING":
            lines.append(f"approving would: {_would(c.kind)}")
        if c.summary:
            lines.append(f"public log: {c.summary}")
        for d in await fetch_decisions(conn, c.id):
            why = f"; reason: {d.reason}" if d.reason else ""
            did = f"; changed: {d.changes}" if d.changes else ""
            lines.append(f"{d.decision.lower()} by {d.decided_by} at {_when(d.decided_at)}{why}{did}")
        if c.conflicts:
            last = _when(c.last_conflict_at)
            lines.append(f"kept from {c.conflicts} later write(s) that would have undone it; last {last}")
        return lines

    lines = asyncio.run(_with_connection(dsn, read))
    if lines is None:
        typer.echo(f"error: no correction {correction_id}", err=True)
        raise typer.Exit(1)
    for line in lines:
        typer.echo(line)


def _would(kind: str) -> str:
    return {
        "CLAIM": "make the reader the profile's owner (another reader's ownership ends)",
        "NOT_ME": "take the paper off the profile and keep it off",
        "IS_ME": "link the named author to the profile (from any other profile) and keep it there",
        "SPLIT": "move the papers to a new profile of the same name and keep them there",
        "MERGE": "merge the profiles into the one with most papers; the others' ids redirect to it",
    }.get(kind, "?")


@corrections_app.command("approve")
def corrections_approve(
    correction_id: int = typer.Argument(..., min=1, help="The correction's id (`list`)."),
    operator: str | None = OPERATOR,
) -> None:
    """Apply a pending correction as the reader asked; prints what it changed. The caches and the CDN forget it."""
    from db.queries.writes.corrections import CannotApply, NotPending
    from ingest.runner import run_decision

    settings = settings_or_exit()
    database_url_or_exit(settings)
    try:
        decided = asyncio.run(run_decision(settings, correction_id, approve=True, operator=_check_operator(operator)))
    except NotPending as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    except CannotApply as exc:
        typer.echo(f"error: correction {correction_id} cannot be applied: {exc}; nothing changed (reject it)", err=True)
        raise typer.Exit(1) from None
    assert decided.applied is not None
    typer.echo(f"applied correction {correction_id} ({decided.correction.kind}): {decided.applied.changes}")


@corrections_app.command("reject")
def corrections_reject(
    correction_id: int = typer.Argument(..., min=1, help="The correction's id (`list`)."),
    reason: str = typer.Option(..., "--reason", help="Why: the reader sees it with the correction."),
    operator: str | None = OPERATOR,
) -> None:
    """Refuse a pending correction, saying why; nothing in the archive changes."""
    from db.queries.writes.corrections import NotPending
    from ingest.runner import run_decision

    reason = reason.strip()
    if not reason or len(reason) > MAX_REASON_LENGTH or "\x00" in reason:
        typer.echo(f"error: --reason is 1 to {MAX_REASON_LENGTH} characters", err=True)
        raise typer.Exit(2)
    settings = settings_or_exit()
    database_url_or_exit(settings)
    try:
        decided = asyncio.run(
            run_decision(settings, correction_id, approve=False, operator=_check_operator(operator), reason=reason)
        )
    except NotPending as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(
        f"rejected correction {correction_id} ({decided.correction.kind}): status rejected, the reader sees the "
        "reason; nothing in the archive changed"
    )


def _check_operator(operator: str | None) -> str:
    name = (operator or _operator()).strip()
    if not 1 <= len(name) <= 200 or "\x00" in name:
        typer.echo("error: --operator is 1 to 200 characters", err=True)
        raise typer.Exit(2)
    return name

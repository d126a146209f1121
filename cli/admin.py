"""Operators' commands: merge researchers, API keys."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated

import asyncpg
import typer

if TYPE_CHECKING:
    pass

from cli.common import T, app, database_url_or_exit, keys_app, settings_or_exit


@app.command("merge-researchers")
def merge_researchers(
    absorbed: int = typer.Argument(..., min=1, help="Database id of the researcher to merge away."),
    survivor: int = typer.Argument(..., min=1, help="Database id of the researcher that absorbs it."),
) -> None:
    """Merge one researcher profile into another (two profiles of one person): the absorbed id, slug and
    Semantic Scholar id keep resolving to the survivor, and the changes feed lists the merge."""
    from ingest.runner import run_merge

    settings = settings_or_exit()
    database_url_or_exit(settings)
    if not asyncio.run(run_merge(settings, absorbed_id=absorbed, survivor_id=survivor)):
        typer.echo(
            f"error: no merge: researchers {absorbed} and {survivor} must both exist and differ, and not be two "
            "readers' claimed profiles (`wovepaper corrections` decides readers' merge requests)",
            err=True,
        )
        raise typer.Exit(1)
    typer.echo(f"merged researcher {absorbed} into {survivor}")


async def _with_connection(dsn: str, work: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
    conn = await asyncpg.connect(dsn)
    try:
        return await work(conn)
    finally:
        await conn.close()


@keys_app.command("create")
def keys_create(
    name: str = typer.Option(..., "--name", help="Who the key is for (shown in `keys list`)."),
    points_per_hour: int | None = typer.Option(
        None, "--points-per-hour", min=1, help="Its budget; default WOVEPAPER_KEY_POINTS_PER_HOUR."
    ),
    origins: Annotated[
        list[str] | None,
        typer.Option("--origins", help="Browser origins it may be used from (repeat or comma-separate); default any."),
    ] = None,
) -> None:
    """Create a key and print it once: only its hash is stored."""
    from db.queries.api_keys import insert_api_key
    from edge.api_keys import new_key

    dsn = database_url_or_exit(settings_or_exit())
    allowed = [o.strip().rstrip("/") for spec in origins or () for o in spec.split(",") if o.strip()]
    made = new_key()
    row = asyncio.run(
        _with_connection(
            dsn,
            lambda conn: insert_api_key(
                conn,
                key_hash=made.key_hash,
                prefix=made.prefix,
                name=name,
                points_per_hour=points_per_hour,
                allowed_origins=allowed,
            ),
        )
    )
    typer.echo(made.key)
    typer.echo(f"created key {row.prefix} (id {row.id}) for {row.name}; it is not shown again", err=True)


@keys_app.command("list")
def keys_list() -> None:
    """Every key: name, prefix, created, last used, points per hour, revoked."""
    from db.queries.api_keys import fetch_api_keys

    settings = settings_or_exit()
    rows = asyncio.run(_with_connection(database_url_or_exit(settings), fetch_api_keys))
    typer.echo("id\tname\tprefix\tcreated\tlast used\tpoints/hour\trevoked\torigins")
    for r in rows:
        limit = str(r.points_per_hour) if r.points_per_hour else f"{settings.key_points_per_hour} (default)"
        typer.echo(
            "\t".join(
                [
                    str(r.id),
                    r.name,
                    r.prefix or "-",
                    f"{r.created_at:%Y-%m-%d %H:%M}",
                    f"{r.last_used_at:%Y-%m-%d %H:%M}" if r.last_used_at else "never",
                    limit,
                    f"{r.revoked_at:%Y-%m-%d %H:%M}" if r.revoked_at else "no",
                    ",".join(r.allowed_origins) or "any",
                ]
            )
        )


@keys_app.command("revoke")
def keys_revoke(prefix_or_id: str = typer.Argument(..., help="The key's prefix (wpk_xxxxxxxx) or id.")) -> None:
    """Revoke a key: every server refuses it within 10 seconds."""
    from db.queries.api_keys import revoke_api_key

    dsn = database_url_or_exit(settings_or_exit())
    row = asyncio.run(_with_connection(dsn, lambda conn: revoke_api_key(conn, prefix_or_id=prefix_or_id)))
    if row is None:
        typer.echo(f"error: no key {prefix_or_id!r}", err=True)
        raise typer.Exit(1)
    typer.echo(f"revoked key {row.prefix or row.id} ({row.name})")


@app.command("semantic-indexes")
def semantic_indexes(
    min_vectors: int = typer.Option(
        5_000, "--min-vectors", min=1, help="A category with at least this many vectors gets an HNSW index of its own."
    ),
    maintenance_work_mem: str = typer.Option("1GB", "--maintenance-work-mem", help="For each index build."),
) -> None:
    """Build the per-category HNSW indexes semantic search uses within a category (migration 0029), concurrently:
    search and ingest go on. Smaller categories are scanned exactly. Run after `migrate`, and again after large
    ingests (a category grown past --min-vectors gets its index; one never listed is searched through the index
    over all vectors)."""
    from db.queries.search.category_vectors import build_category_indexes

    dsn = database_url_or_exit(settings_or_exit())

    async def work(conn: asyncpg.Connection) -> None:
        done = await build_category_indexes(
            conn, min_vectors=min_vectors, maintenance_work_mem=maintenance_work_mem, progress=typer.echo
        )
        typer.echo(
            f"{done.indexed} categories with their own index ({len(done.built)} built now, "
            f"{done.seconds_building:.0f}s), {done.scanned} scanned exactly"
        )

    try:
        asyncio.run(_with_connection(dsn, work))
    except LookupError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc

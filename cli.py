"""The `wovepaper` command."""

from __future__ import annotations

import asyncio
import sys

import asyncpg
import typer

from db.migrate import migrate as apply_migrations
from settings import Settings, SettingsError, load_settings

app = typer.Typer(help="wovepaper: the GraphQL API over arXiv, Semantic Scholar and OpenAlex.", no_args_is_help=True)
ingest_app = typer.Typer(help="Harvest arXiv and enrich from Semantic Scholar and OpenAlex.", no_args_is_help=True)
app.add_typer(ingest_app, name="ingest")


def settings_or_exit() -> Settings:
    try:
        return load_settings()
    except SettingsError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


def database_url_or_exit(settings: Settings) -> str:
    if not settings.database_url:
        typer.echo("error: DATABASE_URL is not set (`make run` sets up a local one)", err=True)
        raise typer.Exit(2)
    return settings.database_url


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", help="Interface to bind."),
    port: int = typer.Option(8000, help="Port to listen on."),
    workers: int = typer.Option(1, min=1, help="Worker processes."),
) -> None:
    """Serve the API (GraphiQL at /graphql) with uvicorn."""
    import uvicorn

    settings_or_exit()
    uvicorn.run("app:app", host=host, port=port, workers=workers, log_level="info", timeout_keep_alive=5)


@app.command()
def migrate() -> None:
    """Apply pending database migrations (safe to run twice, or from two processes at once)."""
    dsn = database_url_or_exit(settings_or_exit())

    async def run() -> list[str]:
        conn = await asyncpg.connect(dsn)
        try:
            return await apply_migrations(conn)
        finally:
            await conn.close()

    applied = asyncio.run(run())
    typer.echo(f"applied {len(applied)} migration(s)" + (f": {', '.join(applied)}" if applied else ""))


def main() -> None:
    try:
        app()
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()

"""`wovepaper check`: the settings, and every server they name, checked before the API serves (an init container
runs it) or after an operator changed something. One row per check: what is fine, what is not and the setting to
fix; exit 1 when anything failed.

Each check is a small function of the settings that returns its rows, listed in `CHECKS` in the order they print,
so a new server or setting gets a check of its own beside the others.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Final, Literal

import typer

from cli.common import app, settings_or_exit
from settings import Settings, masked_url, settings_problems

# The longest any one server may take to answer a check.
TIMEOUT_S: Final = 5.0
# PostgreSQL the migrations need (docs/configuration.md, DATABASE_URL).
MIN_POSTGRES: Final = 150000
REQUIRED_EXTENSIONS: Final = ("pg_trgm", "unaccent")

# WARN: works, but not as it should (the exit code stays 0); FAIL: the setting must be fixed (exit 1).
Status = Literal["ok", "WARN", "FAIL", "skip"]


@dataclass(frozen=True, slots=True)
class Row:
    check: str
    setting: str  # what to look at when it failed
    status: Status
    detail: str


CheckFunction = Callable[[Settings], Awaitable[list[Row]]]


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    setting: str  # the setting a check that hangs is reported under
    run: CheckFunction


def ok(check: str, setting: str, detail: str) -> Row:
    return Row(check, setting, "ok", detail)


def warn(check: str, setting: str, detail: str) -> Row:
    return Row(check, setting, "WARN", detail)


def fail(check: str, setting: str, detail: str) -> Row:
    return Row(check, setting, "FAIL", detail)


def skip(check: str, setting: str, detail: str) -> Row:
    return Row(check, setting, "skip", detail)


def _error(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# --- PostgreSQL ---------------------------------------------------------------------------------------------------


async def probe_postgres(check: str, setting: str, url: str, *, primary: bool, vector: bool = False) -> Row:
    """One PostgreSQL server: reachable, recent enough, with the extensions, and a primary (or, `primary=False`,
    a standby); `vector`: a warning without pgvector (semantic search is on). Replicas are checked with it too, one
    row each."""
    import asyncpg

    from db.queries.server import server_facts

    where = masked_url(url)
    try:
        conn = await asyncpg.connect(url, timeout=TIMEOUT_S, command_timeout=TIMEOUT_S)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
        return fail(check, setting, f"cannot connect to {where}: {_error(exc)}")
    try:
        facts = await server_facts(conn)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
        return fail(check, setting, f"{where} answered, but not what it is: {_error(exc)}")
    finally:
        await conn.close()
    if facts.version_num < MIN_POSTGRES:
        return fail(check, setting, f"PostgreSQL {facts.version} at {where}: 15 or newer is needed")
    missing = [name for name in REQUIRED_EXTENSIONS if name not in facts.available]
    if missing:
        return fail(check, setting, f"{where} lacks the {' and '.join(missing)} extension(s) the schema needs")
    if primary and facts.in_recovery:
        return fail(check, setting, f"{where} is a standby (read-only): name the primary")
    if not primary and not facts.in_recovery:
        return fail(check, setting, f"{where} is a primary, not a standby replica")
    role = "standby" if facts.in_recovery else "primary"
    about = f"PostgreSQL {facts.version.split()[0]} ({role}) at {where}"
    if "vector" not in facts.available:
        no_vector = f"{about}; no pgvector: semantic search answers SEMANTIC_UNAVAILABLE"
        return warn(check, setting, no_vector) if vector else ok(check, setting, no_vector)
    return ok(check, setting, f"{about}; pgvector")


async def check_database(settings: Settings) -> list[Row]:
    if not settings.database_url:
        return [fail("database", "DATABASE_URL", "not set: serve, migrate and the ingest need it")]
    url = settings.database_url
    rows = [await probe_postgres("database", "DATABASE_URL", url, primary=True, vector=settings.semantic_search)]
    for dsn in settings.replica_dsns:
        rows.append(
            await probe_postgres("replica", "WOVEPAPER_DATABASE_REPLICA_URLS", dsn, primary=False, vector=False)
        )
    return rows


async def check_migrations(settings: Settings) -> list[Row]:
    import asyncpg

    from db.migrate import applied_versions, available_migrations

    if not settings.database_url:
        return [skip("migrations", "DATABASE_URL", "needs the database")]
    try:
        conn = await asyncpg.connect(settings.database_url, timeout=TIMEOUT_S, command_timeout=TIMEOUT_S)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
        return [fail("migrations", "DATABASE_URL", f"cannot connect: {_error(exc)}")]
    try:
        applied = await applied_versions(conn)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
        return [fail("migrations", "DATABASE_URL", f"cannot read schema_migrations: {_error(exc)}")]
    finally:
        await conn.close()
    known = available_migrations()
    pending = [m.version for m in known if m.version not in applied]
    changed = [m.version for m in known if m.version in applied and applied[m.version] != m.checksum]
    newer = sorted(set(applied) - {m.version for m in known})
    if changed:
        return [fail("migrations", "DATABASE_URL", f"applied, then edited in this release: {', '.join(changed)}")]
    if pending:
        named = ", ".join(pending[:3]) + (f" and {len(pending) - 3} more" if len(pending) > 3 else "")
        return [fail("migrations", "DATABASE_URL", f"{len(pending)} pending ({named}): run `wovepaper migrate`")]
    detail = f"all {len(known)} applied (latest {known[-1].version})"
    if newer:
        # Expand-then-contract: the release before a migration keeps working on the schema after it.
        detail += f"; {len(newer)} more from a newer release ({', '.join(newer)})"
    return [ok("migrations", "DATABASE_URL", detail)]


# --- Redis --------------------------------------------------------------------------------------------------------


async def check_redis(settings: Settings) -> list[Row]:
    """The server, the primary the Sentinels name, or the Cluster's state; and how Redis bounds its memory."""
    from redis.asyncio.cluster import RedisCluster
    from redis.exceptions import RedisError

    from db.cache.client import create_redis
    from db.cache.memory_policy import memory_policy_warning

    target = settings.redis
    if target is None or not settings.redis_url:
        return [skip("redis", "REDIS_URL", "not set: the API answers uncached and /readyz says degraded")]
    setting = {"single": "REDIS_URL", "sentinel": "WOVEPAPER_REDIS_SENTINELS", "cluster": "WOVEPAPER_REDIS_CLUSTER"}[
        target.topology
    ]
    where = masked_url(settings.redis_url)
    if target.topology == "sentinel":
        where = f"{settings.redis_sentinel_master} via " + ",".join(f"{h}:{p}" for h, p in target.sentinels)
    client = create_redis(target, timeout_s=TIMEOUT_S, max_connections=2)
    try:
        await client.ping()
        if isinstance(client, RedisCluster):
            state = (await client.cluster_info()).get("cluster_state")
            version, role = "?", "master" if state == "ok" else f"cluster_state {state}"
        else:
            version = str((await client.info("server")).get("redis_version", "?"))
            role = str((await client.info("replication")).get("role"))
        memory = await memory_policy_warning(client)
    except (RedisError, OSError) as exc:
        return [fail("redis", setting, f"cannot reach {where}: {_error(exc)}")]
    finally:
        await client.aclose()
    if role != "master":
        return [fail("redis", setting, f"{where} is not a writable primary ({role}): name the primary")]
    what = {
        "single": f"Redis {version} (primary)",
        "sentinel": f"Redis {version} (the Sentinels' primary)",
        "cluster": "Redis Cluster (state ok)",
    }[target.topology]
    rows = [ok("redis", setting, f"{what} at {where}")]
    if memory is not None:
        rows.append(warn("redis-memory", setting, memory))
    return rows


# --- HTTP upstreams the API calls while serving -------------------------------------------------------------------


async def check_model(settings: Settings) -> list[Row]:
    import httpx

    config = settings.llm
    if config is None:
        return [skip("model", "WOVEPAPER_LLM_API_URL", "not configured: analysis and chat are off")]
    headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
    try:
        async with httpx.AsyncClient(timeout=TIMEOUT_S) as client:
            response = await client.get(f"{config.api_url}/models", headers=headers)
    except httpx.HTTPError as exc:
        return [fail("model", "WOVEPAPER_LLM_API_URL", f"cannot reach {config.api_url}: {_error(exc)}")]
    if response.status_code in (401, 403):
        return [
            fail("model", "WOVEPAPER_LLM_API_KEY", f"{config.api_url} refused the key (HTTP {response.status_code})")
        ]
    if response.status_code != 200:
        # Not every OpenAI-compatible server lists its models; it answered, which is what can be known.
        return [
            ok("model", "WOVEPAPER_LLM_API_URL", f"{config.api_url} answers (HTTP {response.status_code} on /models)")
        ]
    try:
        listed = {str(m.get("id")) for m in response.json().get("data", []) if isinstance(m, dict)}
    except (ValueError, AttributeError):
        listed = set()
    if listed and config.model not in listed:
        return [fail("model", "WOVEPAPER_LLM_MODEL", f"{config.api_url} does not serve {config.model!r}")]
    return [ok("model", "WOVEPAPER_LLM_MODEL", f"{config.model} at {config.api_url}")]


async def check_jwks(settings: Settings) -> list[Row]:
    from pathlib import Path

    import httpx

    from edge.jwt import KeysUnavailable, file_fetcher, parse_jwks, url_fetcher

    if settings.jwks_url:
        setting, source = "WOVEPAPER_JWKS_URL", settings.jwks_url
    elif settings.jwks_file:
        setting, source = "WOVEPAPER_JWKS_FILE", settings.jwks_file
    elif settings.jwt_secret is not None:
        return [ok("jwks", "WOVEPAPER_JWT_SECRET", "readers' tokens verified with the shared HS256 secret")]
    else:
        return [skip("jwks", "WOVEPAPER_JWKS_URL", "no JWT secret or keys: signed-in readers are off")]
    try:
        async with httpx.AsyncClient(timeout=TIMEOUT_S) as client:
            fetch = url_fetcher(source, client) if settings.jwks_url else file_fetcher(Path(source))
            keys = parse_jwks(await fetch())
    except (KeysUnavailable, OSError) as exc:
        return [fail("jwks", setting, f"{source}: {exc}")]
    return [ok("jwks", setting, f"{len(keys)} signing key(s) from {source}")]


# --- this process's own files -------------------------------------------------------------------------------------


async def check_semantic(settings: Settings) -> list[Row]:
    import semantic
    from semantic.onnx_export import cache_root, onnx_files
    from semantic.service import backend

    if not settings.semantic_search:
        return [skip("semantic", "WOVEPAPER_SEMANTIC_SEARCH", "off: SEMANTIC and HYBRID search answer unavailable")]
    try:
        absent = semantic.missing_modules()
        kind = backend()
    except semantic.EmbeddingsUnavailable as exc:
        return [fail("semantic", "WOVEPAPER_EMBEDDING_BACKEND", str(exc))]
    if absent:
        return [
            fail(
                "semantic",
                "WOVEPAPER_SEMANTIC_SEARCH",
                f"the `semantic` extra is missing ({', '.join(absent)}): install it, or set false",
            )
        ]
    if kind == "onnx" and not onnx_files().exist():
        # PyTorch is here (else the modules above would be missing): the first semantic request waits for the export.
        return [warn("semantic", "WOVEPAPER_MODEL_DIR", f"no ONNX graphs in {cache_root()}: exported on first use")]
    try:
        # One query embedded the way the API embeds it: the graphs load and run here.
        vector = await asyncio.to_thread(semantic.get_embedder().embed_query, "deployment check")
    except semantic.EmbeddingsUnavailable as exc:
        return [fail("semantic", "WOVEPAPER_MODEL_DIR", str(exc))]
    where = f"ONNX graphs in {cache_root()}" if kind == "onnx" else "the PyTorch reference"
    return [ok("semantic", "WOVEPAPER_MODEL_DIR", f"{len(vector)}-wide query vectors from {where}")]


async def check_metrics_dir(settings: Settings) -> list[Row]:
    path = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not path:
        return [skip("metrics", "PROMETHEUS_MULTIPROC_DIR", "not set: `serve --workers N` makes a temporary one")]
    problem = await asyncio.to_thread(_unwritable, path)
    if problem:
        return [fail("metrics", "PROMETHEUS_MULTIPROC_DIR", f"{path} is not writable: {problem}")]
    return [ok("metrics", "PROMETHEUS_MULTIPROC_DIR", f"{path} is writable")]


def _unwritable(path: str) -> str | None:
    """Why no file can be written in `path`, or None when one can."""
    from pathlib import Path

    try:
        Path(path).mkdir(parents=True, exist_ok=True)
        probe = Path(path) / f".check-{os.getpid()}"
        probe.touch()
        probe.unlink()
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


CHECKS: Final[list[Check]] = [
    Check("database", "DATABASE_URL", check_database),
    Check("migrations", "DATABASE_URL", check_migrations),
    Check("redis", "REDIS_URL", check_redis),
    Check("model", "WOVEPAPER_LLM_API_URL", check_model),
    Check("jwks", "WOVEPAPER_JWKS_URL", check_jwks),
    Check("semantic", "WOVEPAPER_MODEL_DIR", check_semantic),
    Check("metrics", "PROMETHEUS_MULTIPROC_DIR", check_metrics_dir),
]


async def run_checks(settings: Settings, checks: list[Check]) -> list[Row]:
    """Every check at once; one that does not answer in time fails under its setting."""

    async def bounded(check: Check) -> list[Row]:
        try:
            async with asyncio.timeout(2 * TIMEOUT_S):
                return await check.run(settings)
        except TimeoutError:
            return [fail(check.name, check.setting, f"no answer within {2 * TIMEOUT_S:.0f} s")]

    results = await asyncio.gather(*(bounded(check) for check in checks))
    return [row for rows in results for row in rows]


def render(rows: list[Row]) -> list[str]:
    """The table: one line per row, columns aligned, the failures' settings named again at the end."""
    header = Row("check", "setting", "ok", "detail")
    widths = [max(len(r.check) for r in [header, *rows]), max(len(r.setting) for r in [header, *rows])]
    lines = [f"{'status':<6}  {'check':<{widths[0]}}  {'setting':<{widths[1]}}  detail"]
    for r in rows:
        lines.append(f"{r.status:<6}  {r.check:<{widths[0]}}  {r.setting:<{widths[1]}}  {r.detail}")
    failed = [r for r in rows if r.status == "FAIL"]
    warned = [r for r in rows if r.status == "WARN"]
    if failed:
        names = ", ".join(dict.fromkeys(r.setting for r in failed))
        lines.append(f"check: {len(failed)} failed; fix {names}")
    else:
        passed, skipped = sum(r.status == "ok" for r in rows), sum(r.status == "skip" for r in rows)
        summary = f"check: all {passed + len(warned)} passed, {skipped} not configured"
        if warned:
            summary += f"; {len(warned)} warning(s): {', '.join(dict.fromkeys(r.setting for r in warned))}"
        lines.append(summary)
    return lines


ONLY_HELP: Final = f"Run only these checks (repeatable): {', '.join(c.name for c in CHECKS)}."


@app.command()
def check(only: Annotated[list[str] | None, typer.Option("--only", help=ONLY_HELP)] = None) -> None:
    """Check the settings and every server they name (PostgreSQL, migrations, Redis, the model endpoint, the JWKS,
    the embedding model): a table of what is fine and what is not; exit 1 on any failure, naming the setting."""
    names = {c.name for c in CHECKS}
    unknown = sorted(set(only or ()) - names)
    if unknown:
        raise typer.BadParameter(f"no check named {', '.join(unknown)} (there are: {', '.join(sorted(names))})")
    problems = settings_problems()
    if problems:
        rows = [fail("settings", name or "(several)", f"malformed: {message}") for name, message in problems]
        for line in render(rows):
            typer.echo(line)
        raise typer.Exit(1)
    settings = settings_or_exit()
    chosen = [c for c in CHECKS if not only or c.name in only]
    rows = asyncio.run(run_checks(settings, chosen))
    for line in render(rows):
        typer.echo(line)
    raise typer.Exit(1 if any(r.status == "FAIL" for r in rows) else 0)

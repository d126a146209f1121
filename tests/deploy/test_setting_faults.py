"""A container started with a required setting missing or malformed: the command it runs exits at once with one
line naming the setting, and no traceback. Each command a manifest runs is started as a process, as the image's
entrypoint starts it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What the manifests and compose.yaml run (deploy/k8s/base, deploy/compose.yaml).
COMMANDS = [
    ["serve", "--host", "127.0.0.1", "--port", "0"],
    ["migrate"],
    ["ingest", "all"],
    ["ingest", "arxiv"],
    ["embed"],
]


def _run(argv: list[str], **settings: str) -> subprocess.CompletedProcess[str]:
    mine = ("DATABASE_URL", "REDIS_URL", "PROMETHEUS_MULTIPROC_DIR")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WOVEPAPER_") and k not in mine}
    return subprocess.run(
        [sys.executable, "-m", "cli", *argv],
        cwd=ROOT,
        env=env | settings,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def _one_line_naming(result: subprocess.CompletedProcess[str], setting: str) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: {setting} ")
    return lines[0]


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda argv: " ".join(argv[:2]))
def test_a_missing_database_url_is_named(argv: list[str]) -> None:
    line = _one_line_naming(_run(argv), "DATABASE_URL")
    assert line.startswith("error: DATABASE_URL is not set")


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("DATABASE_URL", "mysql://db/wovepaper"),
        ("REDIS_URL", "db:6379"),
        ("WOVEPAPER_WORKERS", "two"),
        ("WOVEPAPER_WORKERS", "0"),
        ("WOVEPAPER_POOL_MAX_SIZE", "-1"),
        ("WOVEPAPER_SHUTDOWN_DRAIN_S", "soon"),
        ("WOVEPAPER_JWKS_FILE", "/run/secrets/absent/jwks.json"),
    ],
)
def test_a_malformed_setting_is_named(setting: str, value: str) -> None:
    settings = {"DATABASE_URL": "postgresql://wovepaper@127.0.0.1:1/wovepaper", setting: value}
    line = _one_line_naming(_run(COMMANDS[0], **settings), setting)
    assert line.startswith(f"error: {setting} is malformed: ")


def test_an_unwritable_metrics_directory_is_named(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "metrics"
    not_a_dir.write_text("a file where the directory should be")
    result = _run(
        COMMANDS[0],
        DATABASE_URL="postgresql://wovepaper@127.0.0.1:1/wovepaper",
        PROMETHEUS_MULTIPROC_DIR=str(not_a_dir),
    )
    line = _one_line_naming(result, f"PROMETHEUS_MULTIPROC_DIR={not_a_dir}")
    assert "is not a writable directory" in line


def test_serve_empties_the_metrics_directory_a_restarted_container_kept(tmp_path: Path) -> None:
    """The files of the workers before a restart would be summed with the new ones' values."""
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    stale = metrics / "counter_4242.db"
    stale.write_bytes(b"\0" * 64)
    # The database is unreachable: serve stops in its lifespan, after it has prepared the directory.
    _run(
        ["serve", "--host", "127.0.0.1", "--port", "0"],
        DATABASE_URL="postgresql://wovepaper@127.0.0.1:1/wovepaper",
        PROMETHEUS_MULTIPROC_DIR=str(metrics),
        WOVEPAPER_SEMANTIC_PRELOAD="false",
    )
    assert not stale.exists()

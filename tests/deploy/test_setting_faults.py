"""A container started with a required setting missing or malformed: the command it runs exits at once with one
line naming the setting, and no traceback. Each command a manifest runs is started as a process, as the image's
entrypoint starts it (the cases of a test side by side: each is a second of interpreter start-up)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# What the manifests and compose.yaml run (deploy/k8s/base, deploy/compose.yaml).
SERVE = ["serve", "--host", "127.0.0.1", "--port", "0"]
COMMANDS = [SERVE, ["migrate"], ["ingest", "all"], ["ingest", "arxiv"], ["embed"], ["check"]]
UNREACHABLE = "postgresql://wovepaper@127.0.0.1:1/wovepaper"


def _run_all(cases: list[tuple[list[str], dict[str, str]]]) -> list[subprocess.CompletedProcess[str]]:
    """`wovepaper ARGV` with only these settings, for every case at once."""
    mine = ("DATABASE_URL", "REDIS_URL", "PROMETHEUS_MULTIPROC_DIR")
    base = {k: v for k, v in os.environ.items() if not k.startswith("WOVEPAPER_") and k not in mine}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "cli", *argv],
            cwd=ROOT,
            env=base | settings,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for argv, settings in cases
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        results.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return results


def _one_line_naming(result: subprocess.CompletedProcess[str], setting: str) -> str:
    where = " ".join(str(a) for a in result.args[3:])
    assert result.returncode == 2, (where, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout, where
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, (where, result.stderr)
    assert lines[0].startswith(f"error: {setting} "), (where, lines[0])
    return lines[0]


def test_a_missing_database_url_is_named_by_every_command() -> None:
    for result in _run_all([(argv, {}) for argv in COMMANDS if argv != ["check"]]):
        assert _one_line_naming(result, "DATABASE_URL").startswith("error: DATABASE_URL is not set")


def test_a_malformed_setting_is_named() -> None:
    cases = [
        ("DATABASE_URL", "mysql://db/wovepaper"),
        ("REDIS_URL", "db:6379"),
        ("WOVEPAPER_WORKERS", "0"),
        ("WOVEPAPER_JWKS_FILE", "/run/secrets/absent/jwks.json"),
    ]
    results = _run_all([(SERVE, {"DATABASE_URL": UNREACHABLE, setting: value}) for setting, value in cases])
    for (setting, _), result in zip(cases, results, strict=True):
        assert _one_line_naming(result, setting).startswith(f"error: {setting} is malformed: ")


def test_an_unwritable_metrics_directory_is_named(tmp_path: Path) -> None:
    """Every process told of the directory writes its metrics there, the ingest's too: checked before any command
    runs."""
    not_a_dir = tmp_path / "metrics"
    not_a_dir.write_text("a file where the directory should be")
    settings = {"DATABASE_URL": UNREACHABLE, "PROMETHEUS_MULTIPROC_DIR": str(not_a_dir)}
    for result in _run_all([(SERVE, settings), (["ingest", "all"], settings)]):
        line = _one_line_naming(result, f"PROMETHEUS_MULTIPROC_DIR={not_a_dir}")
        assert "is not a writable directory" in line


def test_serve_empties_the_metrics_directory_a_restarted_container_kept(tmp_path: Path) -> None:
    """The files of the workers before a restart would be summed with the new ones' values."""
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    stale = metrics / "counter_4242.db"
    stale.write_bytes(b"\0" * 64)
    # The database is unreachable: serve stops in its lifespan, after it has prepared the directory.
    settings = {
        "DATABASE_URL": UNREACHABLE,
        "PROMETHEUS_MULTIPROC_DIR": str(metrics),
        "WOVEPAPER_SEMANTIC_PRELOAD": "false",
    }
    (result,) = _run_all([(SERVE, settings)])
    assert result.returncode != 0
    assert not stale.exists()

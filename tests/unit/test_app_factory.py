"""The application is built by a factory (`uvicorn app:create_app --factory`), never on attribute access."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from typer.testing import CliRunner

import app as app_module
from cli import app as cli_app
from settings import Settings


def test_the_module_holds_no_app_and_builds_none_on_access() -> None:
    assert not hasattr(app_module, "app")
    assert not hasattr(app_module, "__getattr__")


def test_create_app_builds_one_app_per_call() -> None:
    settings = Settings(DATABASE_URL="postgresql://localhost/unused", semantic_preload=False)
    first, second = app_module.create_app(settings), app_module.create_app(settings)
    assert isinstance(first, Starlette) and first is not second


def test_serve_runs_the_factory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    monkeypatch.setattr("uvicorn.run", lambda *a, **k: calls.append((a, k)))
    monkeypatch.setattr("telemetry.logs.configure", lambda *a, **k: None)  # leaves the test run's logging alone
    monkeypatch.setenv("DATABASE_URL", "postgresql://localhost/unused")
    # Given, so serve neither creates nor leaves behind a directory of its own for its workers' metrics.
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    result = CliRunner().invoke(cli_app, ["serve", "--workers", "2"])
    assert result.exit_code == 0, result.output
    ((args, kwargs),) = calls
    assert args == ("app:create_app",) and kwargs["factory"] is True and kwargs["workers"] == 2

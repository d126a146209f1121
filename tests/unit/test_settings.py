from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from settings import Settings, SettingsError, _env_name, load_settings

ROOT = Path(__file__).resolve().parents[2]


def _clean_env() -> dict[str, str]:
    return {
        k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL") and not k.startswith("WOVEPAPER_")
    }


def _migrate(**env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli", "migrate"],
        cwd=ROOT,
        env={**_clean_env(), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"DATABASE_URL": "mysql://localhost/wovepaper"}, "DATABASE_URL"),
        ({"DATABASE_URL": "postgresql://localhost/x", "REDIS_URL": "http://localhost:6379"}, "REDIS_URL"),
        (
            {"DATABASE_URL": "postgresql://localhost/x", "WOVEPAPER_STATEMENT_TIMEOUT_MS": "five"},
            "WOVEPAPER_STATEMENT_TIMEOUT_MS",
        ),
    ],
)
def test_migrate_names_the_malformed_variable_in_one_line_and_exits_2(env: dict[str, str], variable: str) -> None:
    result = _migrate(**env)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: {variable} is malformed")
    assert "Traceback" not in result.stderr


def test_migrate_without_database_url_says_so_and_exits_2() -> None:
    result = _migrate()
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == ["error: DATABASE_URL is not set (`make run` sets up a local one)"]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("WOVEPAPER_POOL_MAX_SIZE", "0"),
        ("WOVEPAPER_POOL_MIN_SIZE", "-1"),
        ("WOVEPAPER_OPERATION_TIMEOUT_S", "soon"),
        ("WOVEPAPER_MAX_DEPTH", "1"),
        ("WOVEPAPER_CACHE_NAMESPACE", "Has Spaces"),
        ("WOVEPAPER_CACHE_TTL_S", "0"),
        ("WOVEPAPER_REDIS_TIMEOUT_S", "0"),
        ("WOVEPAPER_ARXIV_OAI_URL", "ftp://arxiv.org/oai"),
        ("WOVEPAPER_S2_API_URL", "api.semanticscholar.org"),
        ("WOVEPAPER_OPENALEX_RPS", "-3"),
        ("WOVEPAPER_LLM_API_URL", "localhost:8000/v1"),
        ("WOVEPAPER_LLM_RPS", "0"),
        ("WOVEPAPER_LLM_TIMEOUT_S", "never"),
        ("WOVEPAPER_LLM_DAILY_TOKENS", "-1"),
        ("WOVEPAPER_CHAT_DAILY_MESSAGES", "many"),
        ("REDIS_URL", "localhost:6379"),
        ("DATABASE_URL", "sqlite:///x.db"),
    ],
)
def test_each_malformed_variable_is_named(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    for key in list(os.environ):
        if key in ("DATABASE_URL", "REDIS_URL") or key.startswith("WOVEPAPER_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as info:
        load_settings()
    message = str(info.value)
    assert message.startswith(f"{name} is malformed: ")
    assert "\n" not in message


def test_well_formed_environment_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key in ("DATABASE_URL", "REDIS_URL") or key.startswith("WOVEPAPER_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("DATABASE_URL", "postgres://u@db.example:5433/wp")
    monkeypatch.setenv("REDIS_URL", "unix:///tmp/redis.sock")
    monkeypatch.setenv("WOVEPAPER_POOL_MAX_SIZE", "20")
    monkeypatch.setenv("WOVEPAPER_OPENALEX_API_URL", "https://api.openalex.org/")
    settings = load_settings()
    assert settings.database_url == "postgres://u@db.example:5433/wp"
    assert settings.redis_url == "unix:///tmp/redis.sock"
    assert settings.pool_max_size == 20
    assert settings.openalex_api_url == "https://api.openalex.org"
    assert settings.local_dir == Settings.model_fields["local_dir"].default


def test_the_configuration_page_documents_every_setting() -> None:
    # The configuration table of docs/configuration.md, written by hand (the site adds a row for a setting it lacks,
    # mkdocs_hooks/settings_reference.py, but each setting deserves its meaning written).
    page = (ROOT / "docs" / "configuration.md").read_text()
    documented = set(re.findall(r"^\| `([A-Z0-9_]+)` \|", page, re.MULTILINE))
    expected = {_env_name((name,)) for name in Settings.model_fields}
    assert expected - documented == set(), "add these to the table of docs/configuration.md"
    assert documented - expected == set(), "docs/configuration.md documents settings that do not exist"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://app:s3cret@db.internal:5432/wp", "postgresql://app:***@db.internal:5432/wp"),
        ("postgresql://app:p%40ss:w@db/wp?sslmode=require", "postgresql://app:***@db/wp?sslmode=require"),
        (
            "postgresql:///wp?host=/run/pg&password=s3cret&user=app",
            "postgresql:///wp?host=/run/pg&password=***&user=app",
        ),
        ("redis://:s3cret@cache:6379/0", "redis://:***@cache:6379/0"),
        ("postgresql://app@db/wp", "postgresql://app@db/wp"),
        ("unix:///tmp/redis.sock", "unix:///tmp/redis.sock"),
    ],
)
def test_masked_url_hides_the_password_only(url: str, shown: str) -> None:
    from settings import masked_url

    assert masked_url(url) == shown

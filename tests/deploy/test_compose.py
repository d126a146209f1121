"""deploy/compose.yaml, checked without a container daemon: the services and what they wait for, a health check on
each long-running one, the API's settings as the API reads them, the scripts it runs, and no secret in the file."""

from __future__ import annotations

import os
import re
import subprocess
from typing import Any

import pytest

from settings import Settings, load_settings
from tests.deploy.compose import DEPLOY, ROOT, MissingVariable, environment, interpolate, load, raw, scripts

# deploy/.env's stand-in: every password it must hold.
SECRETS = {
    "POSTGRES_PASSWORD": "0f1e2d3c4b5a69788796a5b4c3d2e1f0",
    "REPLICATION_PASSWORD": "8796a5b4c3d2e1f00f1e2d3c4b5a6978",
    "REDIS_PASSWORD": "c3d2e1f00f1e2d3c4b5a69788796a5b4",
}
LONG_RUNNING = {
    "db",
    "db-replica",
    "redis",
    "redis-replica",
    "sentinel-1",
    "sentinel-2",
    "sentinel-3",
    "api",
    "proxy",
    "ingest",
}
WOVEPAPER = {"migrate", "api", "ingest"}
# Read from the environment outside Settings: by prometheus_client or by the ingest's loop.
OTHER_VARIABLES = {"PROMETHEUS_MULTIPROC_DIR", "INGEST_AT_UTC"}
SECRET_NAME = re.compile(r"PASSWORD|SECRET|TOKEN|API_KEY")


def _haproxy_seconds(directive: str) -> float:
    """A `timeout` of deploy/haproxy/haproxy.cfg, in seconds (`60s`, `500ms`, `2m`)."""
    config = (DEPLOY / "haproxy" / "haproxy.cfg").read_text()
    match = re.search(rf"^\s*{re.escape(directive)}\s+(\d+)(ms|s|m)\s*$", config, re.MULTILINE)
    assert match, f"haproxy.cfg has no `{directive}`"
    return int(match[1]) * {"ms": 0.001, "s": 1.0, "m": 60.0}[match[2]]


def setting_names() -> set[str]:
    names = set()
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        names |= set(alias.choices) if alias is not None else {f"WOVEPAPER_{name.upper()}"}  # type: ignore[union-attr]
    return names


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return load(SECRETS)


def test_the_services_and_what_each_waits_for(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == LONG_RUNNING | {"migrate"}
    depends = {name: service.get("depends_on", {}) for name, service in services.items()}
    # The schema first, once; the API and the ingest only after it succeeded.
    assert depends["migrate"] == {"db": {"condition": "service_healthy"}}
    for name in ("api", "ingest"):
        assert depends[name]["migrate"] == {"condition": "service_completed_successfully"}
        assert depends[name]["db"] == {"condition": "service_healthy"}
    assert services["migrate"]["command"] == ["migrate"] and services["migrate"]["restart"] == "no"
    # Two API replicas, reachable only through the proxy on the one host port.
    assert services["api"]["deploy"]["replicas"] == 2
    assert "ports" not in services["api"]
    assert [name for name, service in services.items() if service.get("ports")] == ["proxy"]
    assert services["proxy"]["ports"] == ["8000:8000"]
    assert depends["proxy"] == {"api": {"condition": "service_healthy"}}
    for name in ("db-replica", "redis-replica", "sentinel-1"):
        assert all(d["condition"] == "service_healthy" for d in depends[name].values())
    # The API waits for every server it is configured with.
    assert set(depends["api"]) >= {"db", "db-replica", "redis", "sentinel-1", "sentinel-2", "sentinel-3"}


def test_every_long_running_service_has_a_health_check(compose: dict[str, Any]) -> None:
    for name in LONG_RUNNING:
        check = compose["services"][name].get("healthcheck")
        assert check and not check.get("disable") and check["test"][0] in ("CMD", "CMD-SHELL"), name
    # The API's is readiness (PostgreSQL reachable and migrated), which the proxy and `depends_on` wait for.
    assert "/readyz" in " ".join(compose["services"]["api"]["healthcheck"]["test"])
    assert compose["services"]["migrate"]["healthcheck"] == {"disable": True}


def test_no_secret_is_written_in_the_file() -> None:
    """Every password comes from deploy/.env: interpolated, refused when unset, and .env is never committed."""
    text = (DEPLOY / "compose.yaml").read_text()
    for service in raw()["services"].values():
        for name, value in environment(service).items():
            if SECRET_NAME.search(name):
                assert value.startswith("${"), f"{name} holds a literal secret: {value}"
            for password in re.findall(r"://[^:/@]*:([^@]*)@", value):
                assert password.startswith("${"), f"{name} holds a literal password: {value}"
    for secret in SECRETS:
        assert re.search(rf"\$\{{{secret}:\?", text), f"{secret} is not required"
        with pytest.raises(MissingVariable, match=secret):
            load({k: v for k, v in SECRETS.items() if k != secret})
    ignored = subprocess.run(["git", "check-ignore", "-q", "deploy/.env"], cwd=ROOT)
    assert ignored.returncode == 0, "deploy/.env must be git-ignored"
    example = (DEPLOY / ".env.example").read_text()
    assert all(f"{secret}=\n" in example for secret in SECRETS)  # names only, no values


def test_the_wovepaper_services_read_settings_that_exist_and_parse(
    compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    known = setting_names() | OTHER_VARIABLES
    for name in WOVEPAPER:
        env = environment(compose["services"][name])
        unknown = {k for k in env if k.startswith("WOVEPAPER_") or k.endswith("_URL")} - known
        assert not unknown, f"{name} sets what nothing reads: {unknown}"
        for variable in [k for k in os.environ if k.startswith("WOVEPAPER_") or k in ("DATABASE_URL", "REDIS_URL")]:
            monkeypatch.delenv(variable)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        settings = load_settings()
        assert settings.database_url == f"postgresql://wovepaper:{SECRETS['POSTGRES_PASSWORD']}@db:5432/wovepaper"
        assert settings.redis_url == f"redis://:{SECRETS['REDIS_PASSWORD']}@redis:6379/0"
    api = compose["services"]["api"]
    settings = load_settings()
    # The proxy is the one address whose X-Forwarded-For is believed.
    proxy_address = compose["services"]["proxy"]["networks"]["backend"]["ipv4_address"]
    assert settings.trusted_proxies == proxy_address
    # Stopping gives the drain and the grace period their time.
    grace = int(api["stop_grace_period"].removesuffix("s"))
    assert grace > settings.shutdown_drain_s + settings.shutdown_grace_s
    assert api["command"] == ["serve", "--host", "0.0.0.0", "--port", "8000"]
    # The proxy never sends on a connection the API is closing: the API keeps idle ones longer than the proxy does.
    monkeypatch.setenv("WOVEPAPER_KEEP_ALIVE_S", environment(api)["WOVEPAPER_KEEP_ALIVE_S"])
    assert load_settings().keep_alive_s > _haproxy_seconds("timeout server")


def test_only_the_api_keeps_metrics_files_and_on_a_tmpfs(compose: dict[str, Any]) -> None:
    """A process told of a metrics directory writes there, and the root filesystem is read-only."""
    for name, service in compose["services"].items():
        directory = environment(service).get("PROMETHEUS_MULTIPROC_DIR")
        if name != "api":
            assert directory is None, name
            continue
        assert service["read_only"] is True
        assert any(mount.split(":")[0] == directory for mount in service["tmpfs"])


def test_the_proxy_balances_over_the_api_replicas_checked_on_readyz(compose: dict[str, Any]) -> None:
    config = (DEPLOY / "haproxy" / "haproxy.cfg").read_text()
    assert re.search(r"^\s*server-template api \d+ api:8000\s*$", config, re.M)
    assert "option httpchk GET /readyz" in config
    assert re.search(r"^\s*bind :8000$", config, re.M)
    assert "option forwardfor" in config
    mounts = compose["services"]["proxy"]["volumes"]
    assert "./haproxy/haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro" in mounts


def test_every_mounted_file_exists_and_every_script_parses(compose: dict[str, Any]) -> None:
    for service in compose["services"].values():
        for mount in service.get("volumes", []):
            source = mount.split(":")[0]
            if source.startswith("./"):
                assert (DEPLOY / source).is_file(), source
    found: list[tuple[str, str, str]] = []
    for name, service in compose["services"].items():
        found += [(name, *s) for s in scripts(service.get("command"))]
        found += [(name, *s) for s in scripts(service.get("healthcheck", {}).get("test"))]
        if service.get("entrypoint") == ["/bin/sh", "-c"]:
            found.append((name, "sh", service["command"][0]))
    found += [(path.name, "sh", path.read_text()) for path in (DEPLOY / "postgres").glob("*.sh")]
    assert {language for _, language, _ in found} == {"sh", "python"}
    assert len(found) >= 12
    for name, language, script in found:
        if language == "python":
            compile(script, name, "exec")
            continue
        result = subprocess.run(["sh", "-n", "-c", script], capture_output=True, text=True)
        assert result.returncode == 0, f"{name}: {result.stderr}\n{script}"


def test_the_ingest_runs_every_stage_daily_and_each_alone(compose: dict[str, Any]) -> None:
    ingest = compose["services"]["ingest"]
    assert ingest["entrypoint"] == ["/bin/sh", "-c"] and ingest["init"] is True
    script = ingest["command"][0]
    assert "wovepaper ingest all" in script and "wovepaper embed" in script
    assert 'date -u -d "tomorrow $at"' in script and "sleep $((next - now))" in script
    assert environment(ingest)["INGEST_AT_UTC"] == "02:30"
    assert interpolate("${INGEST_AT_UTC:-02:30}", {"INGEST_AT_UTC": "03:15"}) == "03:15"

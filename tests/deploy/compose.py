"""deploy/compose.yaml read as Docker Compose reads it: YAML with its merge keys, then `${VAR}` interpolation from
deploy/.env (here: a stand-in for it), `$$` for a literal dollar."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "compose.yaml"

_VARIABLE = re.compile(r"\$\$|\$\{(\w+)(?:(:?[-?])([^}]*))?\}|\$(\w+)")


class MissingVariable(Exception):
    pass


def interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's interpolation: `${VAR}`, `${VAR:-default}`, `${VAR-default}`, `${VAR:?message}`, `$VAR`, `$$`."""

    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1) or m.group(4)
        operator, argument = m.group(2), m.group(3) or ""
        given = env.get(name)
        if operator in (":-", "-"):
            unset = given is None or (operator == ":-" and given == "")
            return argument if unset else str(given)
        if operator in (":?", "?"):
            if given is None or (operator == ":?" and given == ""):
                raise MissingVariable(f"{name}: {argument}")
            return given
        return given or ""

    return _VARIABLE.sub(one, value)


def _walk(node: Any, env: dict[str, str]) -> Any:
    if isinstance(node, str):
        return interpolate(node, env)
    if isinstance(node, list):
        return [_walk(item, env) for item in node]
    if isinstance(node, dict):
        return {key: _walk(value, env) for key, value in node.items()}
    return node


def raw() -> dict[str, Any]:
    """The file's YAML with merge keys applied, before interpolation."""
    document: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return document


def load(env: dict[str, str]) -> dict[str, Any]:
    """The model Compose runs with `env` as deploy/.env."""
    return _walk(raw(), env)  # type: ignore[no-any-return]


def environment(service: dict[str, Any]) -> dict[str, str]:
    """A service's `environment`, as a mapping (Compose takes a list of NAME=value too)."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        return dict(item.split("=", 1) for item in env)
    return {key: "" if value is None else str(value) for key, value in env.items()}


def scripts(value: Any) -> list[tuple[str, str]]:
    """The scripts a `command` or a healthcheck's `test` runs: ("sh", script) for what it hands to `sh -c` (or
    CMD-SHELL), ("python", code) for `python -c`."""
    if not isinstance(value, list):
        return []
    found = []
    for i, item in enumerate(value[:-1]):
        before = value[i - 1] if i else ""
        if item == "CMD-SHELL" or (item == "-c" and before.rsplit("/", 1)[-1] in ("sh", "bash")):
            found.append(("sh", value[i + 1]))
        elif item == "-c" and before.rsplit("/", 1)[-1].startswith("python"):
            found.append(("python", value[i + 1]))
    return found

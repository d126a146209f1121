"""The configuration page's table, kept whole: every field of settings.Settings has a row.

The rows written in docs/configuration.md say what each setting means; a setting added to the class without a row
gets one here, from its default and the comment above it in settings/, so the page never leaves a setting out.
A row naming no setting is an error (`stale_rows`)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from pydantic import AliasChoices

from mkdocs_hooks.schema_reference import _escaped
from settings import Settings

ROOT = Path(__file__).resolve().parents[1]
SETTINGS_SOURCE = ROOT / "settings" / "__init__.py"
ROW = re.compile(r"^\| `([A-Z0-9_]+)` \|", re.MULTILINE)
PREFIX = str(Settings.model_config.get("env_prefix", ""))


def env_name(field: str) -> str:
    """The environment variable a field is read from (its alias, else the prefixed upper-case name)."""
    alias = Settings.model_fields[field].validation_alias
    if isinstance(alias, AliasChoices):
        first = alias.choices[0]
        if isinstance(first, str):
            return first
    if isinstance(alias, str):
        return alias
    return f"{PREFIX}{field}".upper()


def settings_env_names() -> dict[str, str]:
    """Environment variable -> field, in the class's order."""
    return {env_name(field): field for field in Settings.model_fields}


def documented(markdown: str) -> list[str]:
    """The variables the page's table has rows for."""
    return ROW.findall(markdown)


def _comments_above() -> dict[str, str]:
    """Each field's comment: the comment lines right above its definition in settings/__init__.py."""
    source = SETTINGS_SOURCE.read_text()
    lines = source.splitlines()
    found: dict[str, str] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == "Settings":
            for statement in node.body:
                if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                    above: list[str] = []
                    number = statement.lineno - 2
                    while number >= 0 and lines[number].strip().startswith("#"):
                        above.insert(0, lines[number].strip().lstrip("#").strip())
                        number -= 1
                    found[statement.target.id] = " ".join(above)
    return found


def _default(field: str) -> str:
    info = Settings.model_fields[field]
    if info.default_factory is not None or info.default is None or info.default == "":
        return "unset"
    value = info.default
    if hasattr(value, "get_secret_value"):
        return "unset"
    return f"`{str(value).lower() if isinstance(value, bool) else value}`"


def generated_rows(markdown: str) -> list[str]:
    """Rows for the settings the page's table does not name yet."""
    named = set(documented(markdown))
    comments = _comments_above()
    rows = []
    for name, field in settings_env_names().items():
        if name not in named:
            meaning = comments.get(field) or Settings.model_fields[field].description or "see `settings/__init__.py`"
            shown = _escaped(" ".join(meaning.split())).replace("|", "\\|")
            rows.append(f"| `{name}` | {_default(field)} | {shown} |")
    return rows


def stale_rows(markdown: str) -> list[str]:
    """Rows naming a variable no setting reads."""
    known = settings_env_names()
    return [name for name in documented(markdown) if name not in known]


def complete(markdown: str) -> str:
    """The page with a row for every setting: the missing ones appended to the table's last row."""
    rows = generated_rows(markdown)
    if not rows:
        return markdown
    lines = markdown.splitlines()
    last = max(i for i, line in enumerate(lines) if ROW.match(line))
    lines[last + 1 : last + 1] = rows
    return "\n".join(lines) + "\n"

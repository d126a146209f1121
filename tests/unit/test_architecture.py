"""The layering holds: import-linter contracts, and SQL only under db/."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NO_SQL_PACKAGES = ("schema", "resolvers", "ingest", "edge", "llm", "chat")
CONTRACTS = [
    "Layers: schema -> resolvers -> chat -> db",
    "ingest writes through db only",
    "db knows no GraphQL",
    "the model client serves the ingest and the API alike",
    "chat knows no GraphQL and no HTTP",
]

# Upper-case keywords anywhere (this codebase writes SQL in upper case); lower-case only when the string
# starts like a statement, so prose such as "select a paper from the list" in a description is not flagged.
_SQL_UPPER = re.compile(r"\bSELECT\s|\bINSERT\s+INTO\b|\bUPDATE\s+[\w.\"]+\s+SET\b|\bDELETE\s+FROM\b")
_SQL_START = re.compile(
    r"^\s*(?:select\s[\s\S]*\bfrom\s[\s\S]*\b(?:where|join|order\s+by|group\s+by|limit)\b|insert\s+into\s|update\s+[\w.\"]+\s+set\s|delete\s+from\s|with\s+\w+\s+as\s*\()",
    re.IGNORECASE,
)


def looks_like_sql(text: str) -> bool:
    return bool(_SQL_UPPER.search(text) or _SQL_START.search(text))


def _docstring_nodes(tree: ast.Module) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def sql_literals(source: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every string literal, f-strings included, that reads as a SQL statement."""
    tree = ast.parse(source)
    docstrings = _docstring_nodes(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            text = node.value
        else:
            continue
        if looks_like_sql(text):
            yield node.lineno, text.strip().splitlines()[0][:80]


def test_import_linter_contracts_are_kept() -> None:
    lint_imports = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run(
        [str(lint_imports), "--no-cache", "--config", "pyproject.toml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for name in CONTRACTS:
        assert f"{name} KEPT" in result.stdout
    assert re.search(r"Contracts: \d+ kept, 0 broken", result.stdout)


def test_no_sql_outside_db() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {text}"
        for package in NO_SQL_PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for line, text in sql_literals(path.read_text())
    ]
    assert offenders == [], "SQL belongs in db/queries/:\n" + "\n".join(offenders)


@pytest.mark.parametrize(
    "source",
    [
        'Q = "SELECT id FROM papers WHERE id = $1"',
        'Q = """\n    select p.id\n    from papers p\n    where p.id = any($1)\n"""',
        'Q = f"INSERT INTO papers (id) VALUES ({1})"',
        "def f():\n    return conn.execute('UPDATE researchers SET name = $1')",
        'x = "delete from follows where viewer_id = $1"',
        'Q = "WITH t AS (SELECT 1) SELECT * FROM t"',
    ],
)
def test_the_guard_finds_sql(source: str) -> None:
    assert list(sql_literals(source))


@pytest.mark.parametrize(
    "source",
    [
        'description = "Select a paper from the list to see its authors."',
        'description = "Papers updated since this date; deleted papers are not listed."',
        'def f():\n    """Runs one SELECT per batch, never one per key."""\n    return 1',
        'msg = "insert the key into the header"',
    ],
)
def test_the_guard_lets_prose_through(source: str) -> None:
    assert list(sql_literals(source)) == []

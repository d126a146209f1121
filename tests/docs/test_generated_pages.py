"""The site's generated parts: the schema reference covers the SDL, the settings table covers the Settings class,
the included sections exist, and the whole site builds strictly with them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from graphql import GraphQLEnumType, GraphQLInputObjectType, GraphQLInterfaceType, GraphQLObjectType, build_schema

from mkdocs_hooks import schema_reference, settings_reference
from mkdocs_hooks.build import INCLUDE, section

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def _sections(page: str) -> dict[str, str]:
    parts = re.split(r"^### (\S+)$", page, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def _flat(text: str | None) -> str:
    """A description as the page shows it in one cell (schema_reference._cell), checked once below by hand."""
    return schema_reference._cell(text)


def test_the_schema_reference_shows_every_type_field_argument_and_description() -> None:
    schema = build_schema(schema_reference.SDL_PATH.read_text())
    sections = _sections(schema_reference.render(schema))
    for name, type_ in schema.type_map.items():
        if name.startswith("__") or name in schema_reference.BUILT_IN:
            continue
        assert name in sections, f"no section for {name}"
        text = sections[name]
        assert _flat(type_.description)[:60] in " ".join(text.split()), name
        if isinstance(type_, GraphQLObjectType | GraphQLInterfaceType | GraphQLInputObjectType):
            for field_name, field in type_.fields.items():
                row = next((line for line in text.splitlines() if line.startswith(f"| `{field_name}` |")), None)
                assert row is not None, f"{name}.{field_name}"
                assert _flat(field.description) in row, f"{name}.{field_name}"
                for argument in getattr(field, "args", {}):
                    assert f"`{argument}`:" in row, f"{name}.{field_name}({argument})"
        if isinstance(type_, GraphQLEnumType):
            for value in type_.values:
                assert f"| `{value}` |" in text, f"{name}.{value}"


def test_descriptions_are_shown_as_written_not_as_html() -> None:
    page = schema_reference.render_committed()
    assert "s2:&lt;Semantic Scholar id&gt;" in page and "s2:<Semantic" not in page
    # Inside code spans the text stays as it is.
    assert schema_reference._cell("`a<b>` and <c>") == "`a<b>` and &lt;c&gt;"


def test_a_field_added_to_the_sdl_shows_up() -> None:
    added = '\nextend type Query {\n  """Brand new."""\n  brandNew(x: Int = 3): Int\n}\n'
    sdl = schema_reference.SDL_PATH.read_text() + added
    page = schema_reference.render(build_schema(sdl))
    assert "| `brandNew` | `Int` | `x`: `Int` = `3` | Brand new. |" in page


def test_the_configuration_page_has_a_row_for_every_setting_and_none_stale() -> None:
    page = (DOCS / "configuration.md").read_text()
    assert settings_reference.stale_rows(page) == []
    completed = settings_reference.complete(page)
    assert set(settings_reference.documented(completed)) == set(settings_reference.settings_env_names())


def test_a_setting_without_a_row_gets_one_from_its_default_and_comment() -> None:
    page = (DOCS / "configuration.md").read_text()
    without = "\n".join(line for line in page.splitlines() if not line.startswith("| `WOVEPAPER_MAX_FOLLOWS` |"))
    row = next(r for r in settings_reference.generated_rows(without) if r.startswith("| `WOVEPAPER_MAX_FOLLOWS` |"))
    assert row == "| `WOVEPAPER_MAX_FOLLOWS` | `5000` | Researchers and institutions one reader may follow, together. |"
    assert "WOVEPAPER_MAX_FOLLOWS" in settings_reference.documented(settings_reference.complete(without))
    assert settings_reference.stale_rows(page + "\n| `WOVEPAPER_NO_SUCH` | x | y |\n") == ["WOVEPAPER_NO_SUCH"]


def test_every_include_names_a_section_that_exists() -> None:
    found = 0
    for page in DOCS.rglob("*.md"):
        for match in INCLUDE.finditer(page.read_text()):
            included = (page.parent / match.group(1)).resolve()
            assert section(included.read_text(), match.group(2)).strip(), (page, match.group(0))
            found += 1
    assert found >= 3
    figures = section((ROOT / "bench" / "RESULTS.md").read_text(), "## Current figures")
    assert "| measure | figure |" in figures and "# History" not in figures


@pytest.mark.slow
def test_the_site_builds_strictly_with_its_generated_pages(tmp_path: Path) -> None:
    mkdocs = Path(sys.executable).with_name("mkdocs")
    result = subprocess.run(
        [str(mkdocs), "build", "--strict", "--quiet", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    schema_page = (tmp_path / "reference" / "schema" / "index.html").read_text()
    assert 'id="paperconnection"' in schema_page
    performance = (tmp_path / "performance" / "index.html").read_text()
    figures = section((ROOT / "bench" / "RESULTS.md").read_text(), "## Current figures")
    first_measure = re.search(r"^\| ([^|]+?) \|", figures.split("| --- |", 1)[1], re.MULTILINE)
    assert first_measure is not None and first_measure.group(1).split(",")[0] in performance
    configuration = (tmp_path / "configuration" / "index.html").read_text()
    for name in settings_reference.settings_env_names():
        assert f"<code>{name}</code>" in configuration, name

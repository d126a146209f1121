"""Every `extensions.code` the code base can answer is in the one documented list (error_codes/), and that list
is what the SDL's ErrorCode enum, the error codes page (docs/partners/errors.md) and the frontend contract's README
say."""

from __future__ import annotations

import re
from pathlib import Path

from graphql import GraphQLEnumType, build_schema

from error_codes import ERROR_CODES

ROOT = Path(__file__).resolve().parents[2]
SKIPPED = {"tests", "bench", ".venv", "node_modules", ".wovepaper", ".git"}
# Lines that name a code: `code = "X"`, `"code": "X"`, `message, code = "...", "X"`, `EdgeError(401, "X", ...)`,
# `coded(error, "X")`; the code is an upper-case string literal on such a line.
CODE_LINE = re.compile(r"\bcode\b|EdgeError\(|send_error\(|coded\(|count_rejection\(")
# Errors that name their code among their first arguments, often on the line after the call's opening.
CALL = re.compile(r'(?:ChatError|EdgeError)\(\s*(?:[\w.]+,\s*){0,2}"([A-Z][A-Z0-9_]+)"')
CODE = re.compile(r'"([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|[A-Z]{4,})"')


def raised_codes() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in ROOT.rglob("*.py"):
        if SKIPPED & set(path.relative_to(ROOT).parts):
            continue
        text = path.read_text()
        for number, line in enumerate(text.splitlines(), start=1):
            if CODE_LINE.search(line):
                for code in CODE.findall(line):
                    found.setdefault(code, []).append(f"{path.relative_to(ROOT)}:{number}")
        for match in CALL.finditer(text):
            number = text.count("\n", 0, match.start(1)) + 1
            found.setdefault(match.group(1), []).append(f"{path.relative_to(ROOT)}:{number}")
    return found


def test_every_code_raised_in_the_code_base_is_documented() -> None:
    found = raised_codes()
    # The scan sees the codes raised today, so it would see a new one.
    assert {"BAD_USER_INPUT", "TIMEOUT", "PAYLOAD_TOO_LARGE", "UNAUTHENTICATED", "SEMANTIC_UNAVAILABLE"} <= set(found)
    undocumented = {code: where for code, where in found.items() if code not in ERROR_CODES}
    assert not undocumented, f"add these to error_codes.ERROR_CODES (and the documented tables): {undocumented}"


def test_the_sdl_enum_the_documented_tables_and_the_list_agree() -> None:
    sdl = build_schema((ROOT / "frontend_contract" / "schema.graphql").read_text())
    enum = sdl.type_map["ErrorCode"]
    assert isinstance(enum, GraphQLEnumType)
    assert list(enum.values) == list(ERROR_CODES)
    assert all(enum.values[code].description == text for code, text in ERROR_CODES.items())
    for page, heading in (
        (ROOT / "docs" / "partners" / "errors.md", "# Error codes\n"),
        (ROOT / "frontend_contract" / "README.md", "## Error codes\n"),
    ):
        section = page.read_text().split(heading, 1)[1].split("\n## ", 1)[0]
        listed = re.findall(r"^\| `([A-Z_]+)` \| (.+) \|$", section, flags=re.MULTILINE)
        assert list(dict(listed)) == list(ERROR_CODES), page
        assert dict(listed) == dict(ERROR_CODES), page

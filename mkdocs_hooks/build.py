"""The MkDocs hook (mkdocs.yml `hooks:`): pages generated from the code, and sections of files outside docs/.

- `reference/schema.md` is written from frontend_contract/schema.graphql (schema_reference.py).
- configuration.md gets a row for every setting its table does not name yet (settings_reference.py); a row naming
  no setting fails a strict build.
- `<!-- include PATH "HEADING" -->` (PATH relative to the page) is replaced by that section of the file, from the
  heading to the next heading of its level or above; without a heading, the whole file. `shift=N` demotes its
  headings by N. The sections are read at build time, so a page never holds a stale copy (bench/RESULTS.md's
  current figures, the contract's changelog).
- A link to a file of the repository outside docs/ becomes the file's path in code: the site serves docs/ only.
"""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    # MkDocs loads a hook by its path; the generators import the project's own modules (settings, graphql).
    sys.path.insert(0, str(ROOT))

from mkdocs_hooks import schema_reference, settings_reference  # noqa: E402

log = logging.getLogger("mkdocs.hooks.wovepaper")
SCHEMA_PAGE = "reference/schema.md"
INCLUDE = re.compile(r'^<!-- include (\S+)(?: "([^"]+)")?(?: shift=(\d))? -->$', re.MULTILINE)
LINK = re.compile(r"(?<!!)\[([^\]\n]+)\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6}) ")
FENCE = re.compile(r"^(```|~~~)", re.MULTILINE)


def on_files(files: Files, config: MkDocsConfig, **_: Any) -> Files:
    files.append(File.generated(config, SCHEMA_PAGE, content=schema_reference.render_committed()))
    return files


def section(text: str, heading: str | None) -> str:
    """The lines of `heading`'s section (without the heading), or the whole text."""
    if heading is None:
        return text
    lines = text.splitlines()
    if heading not in lines:
        raise ValueError(f"no heading {heading!r}")
    start = lines.index(heading)
    level = len(heading) - len(heading.lstrip("#"))
    end = len(lines)
    fenced = False
    for number in range(start + 1, len(lines)):
        if FENCE.match(lines[number]):
            fenced = not fenced
        match = None if fenced else HEADING.match(lines[number])
        if match and len(match.group(1)) <= level:
            end = number
            break
    return "\n".join(lines[start + 1 : end]).strip("\n") + "\n"


def shift_headings(text: str, by: int) -> str:
    out = []
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        if not fenced and HEADING.match(line):
            line = "#" * by + line
        out.append(line)
    return "\n".join(out) + "\n"


def rewrite_links(markdown: str, source: Path, page: Path, docs_dir: Path) -> str:
    """Links written relative to `source` made right for `page`: within docs/ relative to it, others as paths."""

    def replace(match: re.Match[str]) -> str:
        text, target = match.group(1), match.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:|^#|^/", target):
            return match.group(0)
        path, _, anchor = target.partition("#")
        resolved = (source.parent / path).resolve()
        if not resolved.exists():
            log.warning("%s: the link %r names no file", source.relative_to(ROOT), target)
            return match.group(0)
        if resolved.is_relative_to(docs_dir):
            relative = Path(*[".."] * (len(page.parent.relative_to(docs_dir).parts))) / resolved.relative_to(docs_dir)
            return f"[{text}]({relative.as_posix()}{'#' + anchor if anchor else ''})"
        shown = resolved.relative_to(ROOT).as_posix()
        if shown in text:
            return text
        return f"{text} (`{shown}`{', ' + repr(anchor.replace('-', ' ')) if anchor else ''})"

    parts = re.split(r"(^```.*?^```)", markdown, flags=re.MULTILINE | re.DOTALL)
    return "".join(part if part.startswith("```") else LINK.sub(replace, part) for part in parts)


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, **_: Any) -> str:
    docs_dir = Path(config.docs_dir).resolve()
    page_path = docs_dir / page.file.src_uri

    def include(match: re.Match[str]) -> str:
        included = (page_path.parent / match.group(1)).resolve()
        try:
            text = section(included.read_text(), match.group(2))
        except (OSError, ValueError) as error:
            log.warning("%s: cannot include %s: %s", page.file.src_uri, match.group(1), error)
            return ""
        text = shift_headings(text, int(match.group(3) or 0)) if match.group(3) else text
        return rewrite_links(text, included, page_path, docs_dir)

    markdown = INCLUDE.sub(include, markdown)
    if page.file.src_uri == "configuration.md":
        for name in settings_reference.stale_rows(markdown):
            log.warning("configuration.md documents %s, which no setting reads", name)
        markdown = settings_reference.complete(markdown)
    if page.file.generated_by is None:
        markdown = rewrite_links(markdown, page_path, page_path, docs_dir)
    return markdown

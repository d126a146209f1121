"""HTTP exchanges written in the documentation, read and checked.

A page shows a request as a fenced ```http block titled "Request" and the answer as the ```http block titled
"Response" right after it. In both, `<name-with-hyphen>` is a value that changes from run to run: in a response it
is captured (or, once captured, must be the same again), in a request it is replaced by what was captured or given.
In a response `…` stands for anything: a header's value or part of it, a JSON value (`"…"`), more keys of an
object (`"…": "…"`), more items of a list (a last item `"…"`), or part of a text body. Everything else must be
exactly as written: the status, each header named, every JSON key and value."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

FENCE = re.compile(r'^```http title="(Request|Response)"\n(.*?)^```$', re.MULTILINE | re.DOTALL)
HEADING = re.compile(r"^#{1,6} (.+)$", re.MULTILINE)
PLACEHOLDER = re.compile(r"<([a-z0-9]+(?:-[a-z0-9]+)+)>")
ANY = "…"


@dataclass
class Message:
    start: str
    headers: list[tuple[str, str]]
    body: str


@dataclass
class Exchange:
    section: str
    request: Message
    response: Message


def _message(text: str) -> Message:
    head, _, body = text.partition("\n\n")
    lines = head.splitlines()
    headers = [(name.strip(), value.strip()) for name, _, value in (line.partition(":") for line in lines[1:])]
    return Message(lines[0], headers, body.strip("\n"))


def exchanges(markdown: str) -> list[Exchange]:
    """The page's request/response pairs, in order, each with the heading it is under."""
    found: list[Exchange] = []
    pending: tuple[str, Message] | None = None
    for match in FENCE.finditer(markdown):
        headings = HEADING.findall(markdown, 0, match.start())
        section = headings[-1] if headings else ""
        if match.group(1) == "Request":
            assert pending is None, f"{section}: a request without its response"
            pending = (section, _message(match.group(2)))
        else:
            assert pending is not None, f"{section}: a response without its request"
            found.append(Exchange(pending[0], pending[1], _message(match.group(2))))
            pending = None
    assert pending is None, "the last request has no response"
    return found


@dataclass
class Values:
    """What responses captured, and what the test gives (an API key)."""

    known: dict[str, str] = field(default_factory=dict)

    def fill(self, text: str) -> str:
        def value(match: re.Match[str]) -> str:
            assert match.group(1) in self.known, f"<{match.group(1)}> is used before any response gave it"
            return self.known[match.group(1)]

        return PLACEHOLDER.sub(value, text)

    def match_text(self, pattern: str, actual: str, where: str) -> list[str]:
        """Match one documented string (with placeholders and `…`) against the actual one; capture what is new."""
        names: list[str] = []
        regex = ""
        for piece in re.split(r"(<[a-z0-9]+(?:-[a-z0-9]+)+>|…)", pattern):
            if piece == ANY:
                regex += "(?:.*?)"
            elif PLACEHOLDER.fullmatch(piece):
                name = piece[1:-1]
                if name in self.known:
                    regex += re.escape(self.known[name])
                else:
                    names.append(name)
                    regex += "(.+?)"
            else:
                regex += re.escape(piece)
        matched = re.fullmatch(regex, actual, re.DOTALL)
        if matched is None:
            return [f"{where}: documented {pattern!r}, answered {actual!r}"]
        for name, captured in zip(names, matched.groups(), strict=True):
            self.known.setdefault(name, captured)
        return []

    def match_json(self, documented: Any, actual: Any, where: str) -> list[str]:
        if documented == ANY:
            return []
        if isinstance(documented, str):
            if not isinstance(actual, str):
                return [f"{where}: documented {documented!r}, answered {actual!r}"]
            return self.match_text(documented, actual, where)
        if isinstance(documented, dict):
            if not isinstance(actual, dict):
                return [f"{where}: documented an object, answered {actual!r}"]
            problems = []
            keys = [k for k in documented if k != ANY]
            missing = [k for k in keys if k not in actual]
            extra = [] if ANY in documented else [k for k in actual if k not in documented]
            if missing or extra:
                problems.append(f"{where}: keys documented, not answered {missing}; answered, not documented {extra}")
            for key in keys:
                if key in actual:
                    problems += self.match_json(documented[key], actual[key], f"{where}.{key}")
            return problems
        if isinstance(documented, list):
            if not isinstance(actual, list):
                return [f"{where}: documented a list, answered {actual!r}"]
            open_ended = bool(documented) and documented[-1] == ANY
            items = documented[:-1] if open_ended else documented
            if len(actual) < len(items) or (not open_ended and len(actual) != len(items)):
                more = " or more" if open_ended else ""
                return [f"{where}: documented {len(items)} items{more}, answered {len(actual)}"]
            problems = []
            for index, item in enumerate(items):
                problems += self.match_json(item, actual[index], f"{where}[{index}]")
            return problems
        if documented != actual or type(documented) is not type(actual):
            return [f"{where}: documented {documented!r}, answered {actual!r}"]
        return []

    def match_response(self, documented: Message, status: int, headers: dict[str, str], body: str) -> list[str]:
        problems = []
        documented_status = int(documented.start.split()[1])
        if documented_status != status:
            problems.append(f"status: documented {documented_status}, answered {status}\n{body[:500]}")
        for name, value in documented.headers:
            if name.lower() not in headers:
                problems.append(f"header {name}: documented, not answered")
            else:
                problems += self.match_text(value, headers[name.lower()], f"header {name}")
        if not documented.body:
            if body:
                problems.append(f"body: documented none, answered {body[:200]!r}")
            return problems
        try:
            expected = json.loads(documented.body)
        except json.JSONDecodeError:
            return problems + self.match_text(_squeezed(documented.body), _squeezed(body), "body")
        try:
            answered = json.loads(body)
        except json.JSONDecodeError:
            return problems + [f"body: documented JSON, answered {body[:200]!r}"]
        return problems + self.match_json(expected, answered, "body")


def _squeezed(text: str) -> str:
    """Text compared without its layout: whitespace runs as one space, none between tags."""
    return re.sub(r">\s+<", "><", re.sub(r"\s+", " ", text.strip()))

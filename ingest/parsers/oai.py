"""OAI-PMH responses from arXiv -> PaperRecord rows, parsed as the bytes arrive.

`OAIPageParser` is fed the body in chunks (lxml's pull parser) and frees each `<record>` once it is
turned into a row, so memory stays bounded by one record, not one page. `parse_page` is the same
on a whole payload. Both formats are understood: `arXivRaw` (what the harvest asks for: the
version history) and `arXiv` (split names, and affiliations in legacy responses).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from email.utils import parsedate_to_datetime

from lxml import etree

from db.ids import normalize_arxiv_id
from db.records import AuthorRecord, PaperRecord, VersionRecord
from ingest.errors import MalformedResponse, oai_error
from ingest.parsers.names import is_collaboration, join_name, split_authors
from ingest.parsers.text import collapse, detex, none_if_empty
from ingest.parsers.values import INT32_MAX

OAI = "http://www.openarchives.org/OAI/2.0/"
ARXIV = "http://arxiv.org/OAI/arXiv/"
ARXIV_RAW = "http://arxiv.org/OAI/arXivRaw/"
_T_RESPONSE_DATE = f"{{{OAI}}}responseDate"
_T_RECORD = f"{{{OAI}}}record"
_T_TOKEN = f"{{{OAI}}}resumptionToken"
_T_ERROR = f"{{{OAI}}}error"
_T_HEADER = f"{{{OAI}}}header"
_T_IDENTIFIER = f"{{{OAI}}}identifier"
_T_METADATA = f"{{{OAI}}}metadata"
_T_ARXIV_RAW = f"{{{ARXIV_RAW}}}arXivRaw"
_T_ARXIV = f"{{{ARXIV}}}arXiv"
_T_EARLIEST = f"{{{OAI}}}earliestDatestamp"
_WITHDRAWN_RE = re.compile(r"\b(has been|is|was|been)\s+withdrawn\b|^\s*withdrawn\b", re.IGNORECASE)
_SIZE_RE = re.compile(r"^\s*(\d+)\s*kb\s*$", re.IGNORECASE)


@dataclass(slots=True)
class OAIPage:
    """One ListRecords page. `token` is None when the list is complete (absent or empty token)."""

    response_date: datetime | None = None
    records: list[PaperRecord] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)  # arXiv ids with <header status="deleted">
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (identifier, why)
    token: str | None = None

    @property
    def seen(self) -> int:
        return len(self.records) + len(self.deleted) + len(self.skipped)


def _text(el: etree._Element | None) -> str | None:
    return el.text if el is not None else None


def _parse_rfc1123(value: str) -> datetime:
    """`Tue, 3 Apr 2007 22:04:11 GMT` (legacy, day unpadded) and `Wed, 02 Feb 2011 11:55:18 GMT`."""
    dt = parsedate_to_datetime(value.strip())
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def _parse_day(value: str) -> datetime:
    return datetime.combine(date.fromisoformat(value.strip()[:10]), datetime.min.time(), tzinfo=UTC)


def _parse_response_date(value: str | None) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(value.strip().replace("Z", "+00:00"))


def _first_doi(value: str | None) -> str | None:
    s = none_if_empty(value)
    # Several DOIs are sometimes given, separated by spaces; the first is the paper's.
    return s.split()[0] if s else None


def _children(el: etree._Element, ns: str) -> dict[str, etree._Element]:
    out: dict[str, etree._Element] = {}
    for child in el:
        tag = child.tag
        if isinstance(tag, str) and tag.startswith("{" + ns):
            out.setdefault(tag[len(ns) + 2 :], child)
    return out


_MONTHS = {m: i for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), start=1)}
_RFC1123_RE = re.compile(r"^\s*(?:\w{3},\s*)?(\d{1,2}) (\w{3}) (\d{4}) (\d{2}):(\d{2}):(\d{2}) (?:GMT|UTC|\+0000)\s*$")


def _parse_version_date(value: str) -> datetime:
    # The common shape by regex: email.utils is several times slower and this runs per version.
    m = _RFC1123_RE.match(value)
    if m and m.group(2) in _MONTHS:
        day, mon, year, hh, mm, ss = m.groups()
        return datetime(int(year), _MONTHS[mon], int(day), int(hh), int(mm), int(ss), tzinfo=UTC)
    return _parse_rfc1123(value)


_V_DATE = f"{{{ARXIV_RAW}}}date"
_V_SIZE = f"{{{ARXIV_RAW}}}size"
_V_SOURCE = f"{{{ARXIV_RAW}}}source_type"


_V_VERSION = f"{{{ARXIV_RAW}}}version"
_RAW_PREFIX = len(ARXIV_RAW) + 2


def _version(v: etree._Element) -> VersionRecord | None:
    label = (v.get("version") or "").strip().lstrip("vV")
    d = size_text = source_type = None
    for child in v:
        tag = child.tag
        if tag == _V_DATE:
            d = child.text
        elif tag == _V_SIZE:
            size_text = child.text
        elif tag == _V_SOURCE:
            source_type = child.text
    # Versions count from 1; past 2**31 a number cannot be stored (`integer`), and is no real version or size.
    if not label.isascii() or not label.isdigit() or not d or not 1 <= int(label) <= INT32_MAX:
        return None
    size = _SIZE_RE.match(size_text) if size_text else None
    size_kb = int(size.group(1)) if size else None
    if source_type is not None:
        source_type = none_if_empty(source_type)
    return VersionRecord(
        int(label),
        _parse_version_date(d),
        size_kb if size_kb is not None and size_kb <= INT32_MAX else None,
        source_type,
    )


def is_withdrawn(versions: list[VersionRecord], comments: str | None) -> bool:
    """arXiv replaces a withdrawn paper by a new version of type I (0kb) saying so in the comments."""
    if versions:
        last = versions[-1]
        if last.source_type == "I" or last.size_kb == 0:
            return True
    return bool(comments and _WITHDRAWN_RE.search(comments))


def record_from_raw(meta: etree._Element, fallback_id: str | None) -> PaperRecord:
    # One pass over the children: this runs for every record of a full harvest.
    f: dict[str, str | None] = {}
    versions: list[VersionRecord] = []
    for child in meta:
        tag = child.tag
        if tag == _V_VERSION:
            if (v := _version(child)) is not None:
                versions.append(v)
        elif isinstance(tag, str):
            f.setdefault(tag[_RAW_PREFIX:], child.text)
    arxiv_id = normalize_arxiv_id(f.get("id") or fallback_id or "")
    if not arxiv_id:
        raise ValueError(f"no arXiv id in {(f.get('id') or fallback_id)!r}")
    if not versions:
        raise ValueError("no <version> with a date")
    versions.sort(key=lambda r: r.version)
    categories = (f.get("categories") or "").split()
    if not categories:
        raise ValueError("no categories")
    comments = none_if_empty(f.get("comments"))
    return PaperRecord(
        arxiv_id=arxiv_id,
        version=versions[-1].version,
        title=detex(f.get("title")) or arxiv_id,
        abstract=detex(f.get("abstract")),
        categories=categories,
        published=versions[0].submitted_at,
        updated=versions[-1].submitted_at,
        authors=split_authors(f.get("authors")),
        versions=versions,
        doi=_first_doi(f.get("doi")),
        journal_ref=none_if_empty(detex(f.get("journal-ref"))),
        comments=comments,
        license=none_if_empty(f.get("license")),
        withdrawn=is_withdrawn(versions, comments),
    )


def record_from_arxiv(meta: etree._Element, fallback_id: str | None) -> PaperRecord:
    """The `arXiv` format: split names and (legacy) affiliations; no version history."""
    f = _children(meta, ARXIV)
    arxiv_id = normalize_arxiv_id(_text(f.get("id")) or fallback_id or "")
    if not arxiv_id:
        raise ValueError(f"no arXiv id in {(_text(f.get('id')) or fallback_id)!r}")
    created = _text(f.get("created"))
    if not created:
        raise ValueError("no <created> date")
    categories = collapse(_text(f.get("categories"))).split()
    if not categories:
        raise ValueError("no categories")
    authors: list[AuthorRecord] = []
    for a in meta.iterfind(f"{{{ARXIV}}}authors/{{{ARXIV}}}author"):
        af = _children(a, ARXIV)
        name = detex(join_name(_text(af.get("forenames")), _text(af.get("keyname")), _text(af.get("suffix"))))
        # The split can leave the list's `and` in the forenames (`and Linsheng`).
        name = re.sub(r"^and\s+", "", name)
        # arXiv's split sometimes leaves punctuation as a keyname (`:`): not a name.
        if not re.search(r"\w", name):
            continue
        affiliations = [collapse(x.text) for x in a.iterfind(f"{{{ARXIV}}}affiliation") if x.text]
        authors.append(AuthorRecord(len(authors) + 1, name, "; ".join(affiliations) or None, is_collaboration(name)))
    published = _parse_day(created)
    updated = _text(f.get("updated"))
    comments = none_if_empty(_text(f.get("comments")))
    return PaperRecord(
        arxiv_id=arxiv_id,
        version=1,
        title=detex(_text(f.get("title"))) or arxiv_id,
        abstract=detex(_text(f.get("abstract"))),
        categories=categories,
        published=published,
        updated=max(published, _parse_day(updated)) if updated else published,
        authors=authors,
        doi=_first_doi(_text(f.get("doi"))),
        journal_ref=none_if_empty(detex(_text(f.get("journal-ref")))),
        comments=comments,
        license=none_if_empty(_text(f.get("license"))),
        withdrawn=is_withdrawn([], comments),
    )


class OAIPageParser:
    """Incremental parser for one OAI-PMH response; `feed()` chunks, then `close()` for the page.

    Raises MalformedResponse for XML that is not well formed (a truncated page included) and the
    OAIError subclass for an OAI `<error>`.
    """

    def __init__(self, url: str | None = None) -> None:
        self._url = url
        self._parser = etree.XMLPullParser(
            events=("end",),
            tag=(_T_RESPONSE_DATE, _T_RECORD, _T_TOKEN, _T_ERROR),
            resolve_entities=False,
            no_network=True,
            huge_tree=True,
        )
        self.page = OAIPage()
        self._error: tuple[str, str] | None = None

    def feed(self, chunk: bytes) -> None:
        try:
            self._parser.feed(chunk)
        except etree.XMLSyntaxError as exc:
            raise MalformedResponse("arxiv", f"malformed XML: {exc}", url=self._url) from None
        self._drain()

    def close(self) -> OAIPage:
        try:
            self._parser.close()
        except etree.XMLSyntaxError as exc:
            raise MalformedResponse("arxiv", f"malformed or truncated XML: {exc}", url=self._url) from None
        self._drain()
        if self._error:
            raise oai_error(*self._error, url=self._url)
        return self.page

    def _drain(self) -> None:
        for _, el in self._parser.read_events():
            tag = el.tag
            if tag == _T_RECORD:
                self._record(el)
                # Free the record and everything before it: the page is never held whole.
                el.clear()
                parent = el.getparent()
                while el.getprevious() is not None and parent is not None:
                    del parent[0]
            elif tag == _T_RESPONSE_DATE:
                self.page.response_date = _parse_response_date(el.text)
            elif tag == _T_TOKEN:
                self.page.token = (el.text or "").strip() or None
            elif tag == _T_ERROR:
                self._error = (el.get("code") or "unknown", collapse(el.text))

    def _record(self, el: etree._Element) -> None:
        header = el.find(_T_HEADER)
        identifier = _text(header.find(_T_IDENTIFIER)) if header is not None else None
        ident = (identifier or "").strip()
        if header is not None and header.get("status") == "deleted":
            arxiv_id = normalize_arxiv_id(ident)
            if arxiv_id:
                self.page.deleted.append(arxiv_id)
            else:
                self.page.skipped.append((ident, "deleted record with an unknown identifier"))
            return
        meta = el.find(_T_METADATA)
        payload = meta[0] if meta is not None and len(meta) else None
        try:
            if payload is None:
                raise ValueError("no <metadata>")
            if payload.tag == _T_ARXIV_RAW:
                self.page.records.append(record_from_raw(payload, ident))
            elif payload.tag == _T_ARXIV:
                self.page.records.append(record_from_arxiv(payload, ident))
            else:
                raise ValueError(f"unknown metadata format {payload.tag!r}")
        except (ValueError, TypeError, IndexError) as exc:
            self.page.skipped.append((ident, str(exc)))


def parse_page(payload: bytes | Iterable[bytes], url: str | None = None) -> OAIPage:
    """A whole ListRecords/GetRecord response -> OAIPage (see OAIPageParser)."""
    parser = OAIPageParser(url)
    for chunk in [payload] if isinstance(payload, bytes) else payload:
        parser.feed(chunk)
    return parser.close()


def parse_identify(payload: bytes) -> date | None:
    """Identify's earliestDatestamp: a harvest `from` before it is rejected by the server."""
    try:
        root = etree.fromstring(payload, parser=etree.XMLParser(resolve_entities=False, no_network=True))
    except etree.XMLSyntaxError as exc:
        raise MalformedResponse("arxiv", f"malformed Identify response: {exc}") from None
    err = root.find(_T_ERROR)
    if err is not None:
        raise oai_error(err.get("code") or "unknown", collapse(err.text))
    earliest = root.find(f"{{{OAI}}}Identify/{_T_EARLIEST}")
    if earliest is None or not earliest.text:
        return None
    return date.fromisoformat(earliest.text.strip()[:10])

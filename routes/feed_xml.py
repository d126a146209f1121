"""RSS 2.0 and Atom documents of a list of papers, written by feedgen.

Every URL comes from the caller's settings (the site's and the feeds' base URLs) and the papers' own ids and
slugs, never from the request. Text is kept as stored (TeX math included, so `$\\alpha$` reads as its author
wrote it), minus the characters XML 1.0 cannot carry.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from feedgen.ext.base import BaseEntryExtension
from feedgen.feed import FeedGenerator
from lxml import etree

from db.ids import arxiv_abs_url
from db.queries.papers import PaperRow

FeedFormat = Literal["rss", "atom"]
MEDIA_TYPES: dict[FeedFormat, str] = {
    "rss": "application/rss+xml; charset=utf-8",
    "atom": "application/atom+xml; charset=utf-8",
}
ARXIV_SCHEME = "https://arxiv.org/category_taxonomy"
# Control characters other than tab and newlines, lone surrogates and U+FFFE/U+FFFF: not allowed in XML 1.0.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class FeedMeta:
    title: str
    description: str
    page_url: str  # the site's page this feed follows
    self_url: str  # the feed itself (its Atom id too)


@dataclass(frozen=True, slots=True)
class FeedItem:
    paper: PaperRow
    authors: Sequence[str]


class _ArxivLink(BaseEntryExtension):  # type: ignore[misc]
    """The entry's arXiv page as an Atom `related` link. (feedgen 1.0 writes an Atom entry's links without their
    `rel`, so a second link would read as a second `alternate`; RSS carries the arXiv URL as the permalink guid.)"""

    def __init__(self) -> None:
        self.href: str | None = None

    def extend_atom(self, entry: etree._Element) -> etree._Element:
        if self.href is not None:
            etree.SubElement(entry, "link", href=self.href, rel="related", type="text/html", title="arXiv")
        return entry


def xml_text(text: str) -> str:
    return _NOT_XML.sub("", text)


def last_modified(items: Sequence[FeedItem]) -> datetime:
    """When the newest change to any entry was written (the epoch for an empty feed), to the second."""
    newest = max((i.paper.modified_at for i in items), default=_EPOCH)
    return newest.astimezone(UTC).replace(microsecond=0)


def render(fmt: FeedFormat, meta: FeedMeta, items: Sequence[FeedItem], *, site_url: str) -> bytes:
    """The feed document; the same papers, settings and format always give the same bytes."""
    updated = last_modified(items)
    fg = FeedGenerator()
    fg.id(meta.self_url)
    fg.title(xml_text(meta.title))
    fg.description(xml_text(meta.description))
    # RSS's channel link is the last link given: the page, after the self link.
    fg.link(href=meta.self_url, rel="self")
    fg.link(href=meta.page_url, rel="alternate")
    fg.language("en")
    fg.generator("wovepaper")
    fg.updated(updated)
    fg.lastBuildDate(updated)
    if fmt == "rss":
        fg.load_extension("dc", atom=False, rss=True)
    for item in items:
        _entry(fg, item, site_url, with_creator=fmt == "rss")
    document: bytes = fg.rss_str(pretty=False) if fmt == "rss" else fg.atom_str(pretty=False)
    return document


def _entry(fg: FeedGenerator, item: FeedItem, site_url: str, *, with_creator: bool) -> None:
    paper = item.paper
    fe = fg.add_entry(order="append")
    fe.guid(arxiv_abs_url(paper.arxiv_id), permalink=True)
    fe.title(xml_text(paper.title))
    fe.link(href=f"{site_url}/papers/{paper.slug}", rel="alternate", type="text/html")
    fe.register_extension("arxiv", _ArxivLink, atom=True, rss=False)
    fe.arxiv.href = arxiv_abs_url(paper.arxiv_id)
    fe.published(paper.published)
    fe.updated(paper.updated)
    authors = [xml_text(a) for a in item.authors if a.strip()] or [xml_text(paper.authors_text)]
    for name in authors:
        if name:
            fe.author(name=name)
    if with_creator:
        fe.dc.dc_creator(", ".join(authors))
    for category in paper.categories:
        fe.category(term=category, scheme=ARXIV_SCHEME)
    fe.summary(xml_text(paper.abstract) or xml_text(paper.title), type="text")

"""RSS 2.0 of the latest papers (`/rss/latest.xml`)."""

from __future__ import annotations

from email.utils import format_datetime
from xml.sax.saxutils import escape

import asyncpg

from db.filters import PAPER_SORTS, PaperFilterSpec, paper_filter_clauses
from db.queries.papers import PaperRow, page_papers

FEED_SIZE = 50
SITE_URL = "https://www.wovepaper.com"
MAX_DESCRIPTION = 1000


def _item(paper: PaperRow, site_url: str) -> str:
    link = f"{site_url}/papers/{paper.slug}"
    abstract = paper.abstract if len(paper.abstract) <= MAX_DESCRIPTION else paper.abstract[:MAX_DESCRIPTION] + "…"
    categories = "".join(f"<category>{escape(c)}</category>" for c in paper.categories)
    return (
        "<item>"
        f"<title>{escape(paper.title)}</title>"
        f"<link>{escape(link)}</link>"
        f'<guid isPermaLink="false">arXiv:{escape(paper.arxiv_id)}</guid>'
        f"<pubDate>{format_datetime(paper.published)}</pubDate>"
        f"<dc:creator>{escape(paper.authors_text)}</dc:creator>"
        f"{categories}"
        f"<description>{escape(abstract)}</description>"
        "</item>"
    )


async def latest_papers_rss(pool: asyncpg.Pool, *, site_url: str = SITE_URL, feed_url: str | None = None) -> bytes:
    async with pool.acquire() as conn:
        papers = await page_papers(
            conn, paper_filter_clauses(PaperFilterSpec()), PAPER_SORTS["NEWEST"], limit=FEED_SIZE
        )
    last_build = format_datetime(papers[0].published) if papers else ""
    self_link = f'<atom:link href="{escape(feed_url)}" rel="self" type="application/rss+xml"/>' if feed_url else ""
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:atom="http://www.w3.org/2005/Atom">'
        "<channel>"
        "<title>wovepaper: latest papers</title>"
        f"<link>{escape(site_url)}/</link>"
        "<description>The newest papers in the wovepaper archive.</description>"
        "<language>en</language>"
        f"{self_link}"
        + (f"<lastBuildDate>{last_build}</lastBuildDate>" if last_build else "")
        + "".join(_item(p, site_url) for p in papers)
        + "</channel></rss>"
    )
    return body.encode()

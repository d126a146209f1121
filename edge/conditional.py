"""Conditional GETs: whether a request's `If-None-Match` names the answer it would get (then a 304 is enough)."""

from __future__ import annotations


def not_modified(if_none_match: bytes, etag: bytes) -> bool:
    """RFC 9110 13.1.2: `*`, or a listed tag equal to `etag` by weak comparison (a `W/` on either side ignored),
    since proxies that compress an answer (nginx's gzip, CDNs) weaken its tag before the browser sends it back."""
    tags = {tag.strip().removeprefix(b"W/") for tag in if_none_match.split(b",")}
    return b"*" in tags or etag.removeprefix(b"W/") in tags

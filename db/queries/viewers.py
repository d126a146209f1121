"""Signed-in readers' own rows: the secret token of their personal feed."""

from __future__ import annotations

import re
import secrets

from db.connection import Conn

# 32 random bytes, URL-safe base64 without padding: the personal feed's URL is its only credential.
_TOKEN_BYTES = 32
FEED_TOKEN_PATTERN = re.compile(r"^[A-Za-z0-9_-]{43}$")

SELECT_FEED_TOKEN = "SELECT feed_token FROM viewers WHERE id = $1::text"
# First use: the viewer's row and token are created together; a token already there is kept.
ENSURE_FEED_TOKEN = """
INSERT INTO viewers (id, feed_token) VALUES ($1::text, $2::text)
ON CONFLICT (id) DO UPDATE SET feed_token = coalesce(viewers.feed_token, excluded.feed_token)
RETURNING feed_token
"""
ROTATE_FEED_TOKEN = """
INSERT INTO viewers (id, feed_token) VALUES ($1::text, $2::text)
ON CONFLICT (id) DO UPDATE SET feed_token = excluded.feed_token
RETURNING feed_token
"""
SELECT_VIEWER_BY_FEED_TOKEN = "SELECT id FROM viewers WHERE feed_token = $1::text"


def new_feed_token() -> str:
    return secrets.token_urlsafe(_TOKEN_BYTES)


async def feed_token(conn: Conn, viewer_id: str) -> str:
    """The viewer's feed token, created on first use."""
    token: str | None = await conn.fetchval(SELECT_FEED_TOKEN, viewer_id)
    if token is None:
        token = await conn.fetchval(ENSURE_FEED_TOKEN, viewer_id, new_feed_token())
    assert token is not None
    return token


async def rotate_feed_token(conn: Conn, viewer_id: str) -> str:
    """A new token; the old one names no feed from the moment this commits."""
    token: str = await conn.fetchval(ROTATE_FEED_TOKEN, viewer_id, new_feed_token())
    return token


async def fetch_viewer_by_feed_token(conn: Conn, token: str) -> str | None:
    """The viewer whose feed this token opens; None for a malformed, unknown or rotated token."""
    if not FEED_TOKEN_PATTERN.match(token):
        return None
    viewer_id: str | None = await conn.fetchval(SELECT_VIEWER_BY_FEED_TOKEN, token)
    return viewer_id

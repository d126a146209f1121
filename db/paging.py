"""Opaque tokens: keyset cursors and global node ids (base64 over a small, versioned payload)."""

from __future__ import annotations

import base64
import binascii
from datetime import UTC, datetime, timedelta
from functools import lru_cache

import orjson

from db.ids import normalize_arxiv_id

MAX_TOKEN_LENGTH = 512
# A cursor's integers are bigint keys: anything wider was not issued here.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

CursorValue = int | str | None


class TokenError(ValueError):
    """A cursor or global id that this API did not issue."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(token: str) -> bytes:
    if not token or len(token) > MAX_TOKEN_LENGTH:
        raise TokenError("token is empty or too long")
    try:
        return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except (binascii.Error, ValueError) as exc:
        raise TokenError("token is not base64") from exc


def encode_cursor(sort: str, key: tuple[CursorValue, ...]) -> str:
    """The sort's name travels with the key, so a cursor cannot be replayed under another sort."""
    return _b64(orjson.dumps([sort, *key]))


def decode_cursor(token: str, sort: str, arity: int) -> tuple[CursorValue, ...]:
    try:
        payload = orjson.loads(_unb64(token))
    except orjson.JSONDecodeError as exc:
        raise TokenError("cursor is not a cursor") from exc
    if not isinstance(payload, list) or len(payload) != arity + 1 or payload[0] != sort:
        raise TokenError("cursor belongs to another sort or list")
    values = tuple(payload[1:])
    if not all(v is None or isinstance(v, str) or _is_int64(v) for v in values):
        raise TokenError("cursor holds unexpected values")
    return values


def _is_int64(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and INT64_MIN <= value <= INT64_MAX


def datetime_to_micros(value: datetime) -> int:
    """Exact (no float) so that a keyset comparison on timestamps never skips or repeats a row."""
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def micros_to_datetime(value: int) -> datetime:
    """TokenError when the value is no time a datetime can hold (a tampered cursor)."""
    try:
        return _EPOCH + timedelta(microseconds=value)
    except OverflowError:
        raise TokenError("time out of range") from None


# A page shows the same few hundred researchers, institutions and papers again and again: their ids are remembered.
@lru_cache(maxsize=1 << 16, typed=True)
def encode_global_id(type_name: str, key: int | str) -> str:
    """`Researcher:42` -> `UmVzZWFyY2hlcjo0Mg`: opaque to callers, stable across releases."""
    return _b64(f"{type_name}:{key}".encode())


def paper_global_id(arxiv_id: str) -> str:
    """A paper's global id names its arXiv id, not its row: it survives a rebuild of the database."""
    return encode_global_id("Paper", arxiv_id)


def entity_global_id(kind: str, db_id: int, arxiv_id: str | None) -> str:
    """The global id of a PAPER / RESEARCHER / INSTITUTION row: a paper's names its arXiv id."""
    return paper_global_id(arxiv_id) if arxiv_id is not None else encode_global_id(kind.title(), db_id)


def decode_global_id(token: str) -> tuple[str, int | str]:
    """(type, key): the database id of a researcher or an institution, the arXiv id of a paper (or, for a
    paper id issued before ids named arXiv ids, its database id)."""
    try:
        text = _unb64(token).decode("ascii")
    except UnicodeDecodeError as exc:
        raise TokenError("not a global id") from exc
    type_name, sep, raw = text.partition(":")
    if not sep or not type_name.isalpha():
        raise TokenError("not a global id")
    if raw.isdigit() and len(raw) <= 18:
        return type_name, int(raw)
    if type_name == "Paper" and normalize_arxiv_id(raw) == raw:
        return type_name, raw
    raise TokenError("not a global id")

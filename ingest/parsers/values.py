"""Upstream JSON values made storable: text without NUL, counts that fit PostgreSQL's `integer`.

PostgreSQL rejects a NUL character in any text value and an integer past 2**31 - 1 in an `integer` column: one
such value in an S2 or OpenAlex answer would fail the whole transaction it is written in. Parsers read every
string and count through these, so what they return can always be written.
"""

from __future__ import annotations

from typing import Any

INT32_MAX = 2_147_483_647


def text(value: Any) -> str | None:
    """A string with NUL characters removed and whitespace trimmed; None for anything else or nothing left."""
    if not isinstance(value, str):
        return None
    return value.replace("\x00", "").strip() or None


def count(value: Any) -> int | None:
    """A non-negative integer that fits `integer`; None otherwise (a count past 2**31 is no count we can trust)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= INT32_MAX:
        return value
    return None

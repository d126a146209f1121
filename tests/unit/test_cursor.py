"""Opaque tokens: cursors and global ids round-trip, and anything else is refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from db.filters import PAPER_SORTS, RESEARCHER_SORTS
from db.paging import (
    TokenError,
    datetime_to_micros,
    decode_cursor,
    decode_global_id,
    encode_cursor,
    encode_global_id,
    micros_to_datetime,
)


@pytest.mark.parametrize(
    "moment",
    [
        datetime(1991, 8, 14, tzinfo=UTC),
        datetime(2024, 1, 31, 23, 59, 59, 999_999, tzinfo=UTC),
        datetime(1969, 12, 31, 23, 59, 59, 1, tzinfo=UTC),
    ],
)
def test_timestamps_round_trip_exactly(moment: datetime) -> None:
    assert micros_to_datetime(datetime_to_micros(moment)) == moment


def test_timestamp_micros_are_exact_where_floats_are_not() -> None:
    late = datetime(2262, 1, 1, 0, 0, 0, 123_457, tzinfo=UTC)
    assert micros_to_datetime(datetime_to_micros(late)) - late == timedelta(0)


def test_cursor_round_trip_and_sort_binding() -> None:
    token = encode_cursor("NEWEST", (1_700_000_000_000_000, 42))
    assert decode_cursor(token, "NEWEST", 2) == (1_700_000_000_000_000, 42)
    assert "=" not in token and "+" not in token and "/" not in token
    with pytest.raises(TokenError):
        decode_cursor(token, "OLDEST", 2)
    with pytest.raises(TokenError):
        decode_cursor(token, "NEWEST", 3)


@pytest.mark.parametrize("token", ["", "!!!", "a" * 600, "bm90IGpzb24", "eyJhIjoxfQ", "WyJORVdFU1QiLFsxXSwyXQ"])
def test_foreign_cursors_are_refused(token: str) -> None:
    with pytest.raises(TokenError):
        decode_cursor(token, "NEWEST", 2)


def test_sort_keys_turn_into_keyset_clauses() -> None:
    newest = PAPER_SORTS["NEWEST"]
    clause = newest.after_clause((datetime_to_micros(datetime(2024, 1, 2, tzinfo=UTC)), 7))
    assert clause.args == (datetime(2024, 1, 2, tzinfo=UTC), 7)
    cited = PAPER_SORTS["MOST_CITED"]
    assert cited.after_clause((5, 9)).fragment is cited.after
    # A cursor inside the tail of papers without a count continues within that tail.
    tail = cited.after_clause((None, 9))
    assert tail.fragment is cited.after_null and tail.args == (9,)
    name = RESEARCHER_SORTS["NAME"]
    assert name.after_clause(("ada lovelace", 3)).args == ("ada lovelace", 3)
    for bad in [("x", 1), (1.5, 2), (True, 1), (1,), (None, 1)]:
        with pytest.raises(ValueError):
            newest.after_clause(bad)  # type: ignore[arg-type]


def test_global_ids() -> None:
    gid = encode_global_id("Paper", 12345)
    assert decode_global_id(gid) == ("Paper", 12345)
    assert encode_global_id("Researcher", 12345) != gid
    for bad in ["", "UGFwZXI6", "UGFwZXI6LTE", "OjE", "UGFwZXI6MWE", "\u00e9t\u00e9"]:
        with pytest.raises(TokenError):
            decode_global_id(bad)

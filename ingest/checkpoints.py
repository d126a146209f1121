"""Harvest state saved after every page, in the transaction that writes the page's rows."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date, datetime
from typing import Any

import asyncpg

from db.queries.ingest_state import fetch_checkpoint, save_checkpoint
from ingest.errors import CheckpointError


def arxiv_checkpoint_key(set_spec: str | None) -> str:
    return f"arxiv:{set_spec or 'all'}"


@dataclass(frozen=True, slots=True)
class HarvestState:
    """Where an arXiv harvest is.

    `token` set: a harvest is under way (resume with it; if it expired, restart from `harvest_from`).
    `token` None: the last harvest completed; the next one starts at `next_from`.
    """

    harvest_from: date | None = None
    until: date | None = None
    token: str | None = None
    started: datetime | None = None  # responseDate of the harvest's first page
    next_from: date | None = None
    pages: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "harvest_from": self.harvest_from.isoformat() if self.harvest_from else None,
            "until": self.until.isoformat() if self.until else None,
            "token": self.token,
            "started": self.started.isoformat() if self.started else None,
            "next_from": self.next_from.isoformat() if self.next_from else None,
            "pages": self.pages,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HarvestState:
        try:
            return cls(
                harvest_from=date.fromisoformat(data["harvest_from"]) if data.get("harvest_from") else None,
                until=date.fromisoformat(data["until"]) if data.get("until") else None,
                token=data.get("token") or None,
                started=datetime.fromisoformat(data["started"]) if data.get("started") else None,
                next_from=date.fromisoformat(data["next_from"]) if data.get("next_from") else None,
                pages=int(data.get("pages") or 0),
            )
        except (TypeError, ValueError, KeyError) as exc:
            raise CheckpointError(f"unreadable arXiv checkpoint {data!r}: {exc}") from None

    def page_done(self, token: str | None, response_date: datetime | None) -> HarvestState:
        """The state once a page is written: its token, or the harvest completed when there is none."""
        started = self.started or response_date
        if token:
            return replace(self, token=token, started=started, pages=self.pages + 1)
        # Complete. The next harvest starts at this one's first responseDate (a day later records
        # may have changed while it ran), or at `until` when a past window was harvested.
        nxt = self.until or (started.date() if started else self.harvest_from)
        return replace(self, token=None, started=None, next_from=nxt, pages=self.pages + 1)


async def load_harvest_state(conn: asyncpg.Connection, key: str) -> HarvestState | None:
    data = await fetch_checkpoint(conn, key)
    return HarvestState.from_json(data) if data is not None else None


async def save_harvest_state(conn: asyncpg.Connection, key: str, state: HarvestState) -> None:
    await save_checkpoint(conn, key, state.to_json())

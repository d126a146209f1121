from __future__ import annotations

from dataclasses import replace
from datetime import date

import strawberry

from db.filters import AuthorPosition as AuthorPositionName
from db.filters import Withdrawn
from resolvers.papers import PaperFilterArgs
from schema.enums import AuthorPosition, WithdrawnPapers

_WITHDRAWN: dict[WithdrawnPapers, Withdrawn] = {
    WithdrawnPapers.EXCLUDE: "EXCLUDE",
    WithdrawnPapers.INCLUDE: "INCLUDE",
    WithdrawnPapers.ONLY: "ONLY",
}
_POSITIONS: dict[AuthorPosition, AuthorPositionName] = {
    AuthorPosition.FIRST: "FIRST",
    AuthorPosition.LAST: "LAST",
    AuthorPosition.MIDDLE: "MIDDLE",
    AuthorPosition.SOLO: "SOLO",
}


@strawberry.input(description="Filters every list of papers shares; every given filter must hold.")
class PaperFilterBase:
    category: str | None = strawberry.field(
        default=None,
        description="An arXiv category such as cs.DC: any of the paper's categories (cross-lists too), as "
        "`fields { count }` counts them.",
    )
    primary_only: bool = strawberry.field(
        default=False, description="Match `category` against the primary category only (`fields { primaryCount }`)."
    )
    published_from: date | None = strawberry.field(default=None, description="First published on or after.")
    published_to: date | None = strawberry.field(default=None, description="First published on or before.")
    institution: str | None = strawberry.field(
        default=None,
        description="Papers with an author at this institution: any id form `institution(id:)` accepts. A name "
        "that is none of an institution's names, aliases or acronyms is BAD_USER_INPUT naming the closest ones.",
    )

    withdrawn: WithdrawnPapers = strawberry.field(
        default=WithdrawnPapers.EXCLUDE,
        description="Withdrawn papers: left out by default (as every count beside a link leaves them out); "
        "INCLUDE or ONLY lists them. Look-ups by id always find them.",
    )

    def to_args(self) -> PaperFilterArgs:
        return PaperFilterArgs(
            category=self.category,
            primary_only=self.primary_only,
            published_from=self.published_from,
            published_to=self.published_to,
            institution=self.institution,
            withdrawn=_WITHDRAWN[self.withdrawn],
        )


@strawberry.input(description="Filters on a list of papers; every given filter must hold.")
class PaperFilter(PaperFilterBase):
    researcher: str | None = strawberry.field(
        default=None, description="Papers of this researcher: any id form `researcher(id:)` accepts."
    )

    def to_args(self) -> PaperFilterArgs:
        return replace(super().to_args(), researcher=self.researcher)


@strawberry.input(description="Filters on a researcher's papers; every given filter must hold.")
class ResearcherPaperFilter(PaperFilterBase):
    author_position: AuthorPosition | None = strawberry.field(
        default=None, description="The researcher's position among the paper's authors."
    )

    def to_args(self) -> PaperFilterArgs:
        position = _POSITIONS[self.author_position] if self.author_position else None
        return replace(super().to_args(), author_position=position)

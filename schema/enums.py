from __future__ import annotations

from enum import Enum

import strawberry


@strawberry.enum(description="Order of a list of papers; ties are broken by id, so pages never overlap.")
class PaperSort(Enum):
    NEWEST = "NEWEST"
    OLDEST = "OLDEST"
    MOST_CITED = "MOST_CITED"


@strawberry.enum(description="Order of a list of researchers; ties are broken by id.")
class ResearcherSort(Enum):
    PAPER_COUNT = "PAPER_COUNT"
    NAME = "NAME"
    H_INDEX = strawberry.enum_value("H_INDEX", description="Whole-career h-index, highest first.")
    CITATIONS = strawberry.enum_value("CITATIONS", description="Whole-career citations, most first.")


@strawberry.enum(description="Order of a list of institutions; ties are broken by id.")
class InstitutionSort(Enum):
    PAPER_COUNT = "PAPER_COUNT"
    NAME = "NAME"


@strawberry.enum(description="A researcher's place in a paper's author list.")
class AuthorPosition(Enum):
    FIRST = strawberry.enum_value("FIRST", description="Position 1 of two or more authors.")
    LAST = strawberry.enum_value("LAST", description="The last of two or more authors.")
    MIDDLE = strawberry.enum_value("MIDDLE", description="Neither first nor last.")
    SOLO = strawberry.enum_value("SOLO", description="The paper's only author.")


@strawberry.enum(description="What a sitemap page lists.")
class SitemapKind(Enum):
    PAPER = "PAPER"
    RESEARCHER = "RESEARCHER"
    INSTITUTION = "INSTITUTION"

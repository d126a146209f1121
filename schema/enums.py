from __future__ import annotations

from enum import Enum

import strawberry

from db.records import PAPER_TYPES


@strawberry.enum(description="Order of a list of papers; ties are broken by id, so pages never overlap.")
class PaperSort(Enum):
    NEWEST = "NEWEST"
    OLDEST = "OLDEST"
    MOST_CITED = "MOST_CITED"


_RELEVANCE = "Best name match first, then most papers: the order of a `query` (without one, PAPER_COUNT)."


@strawberry.enum(
    description="Order of a list of researchers; ties are broken by id. With a `query`, every order lists the same "
    "researchers (those whose name matches): only their order differs."
)
class ResearcherSort(Enum):
    RELEVANCE = strawberry.enum_value("RELEVANCE", description=_RELEVANCE)
    PAPER_COUNT = strawberry.enum_value("PAPER_COUNT", description="Most papers in this archive first.")
    NAME = "NAME"
    H_INDEX = strawberry.enum_value("H_INDEX", description="Whole-career h-index, highest first.")
    CITATIONS = strawberry.enum_value("CITATIONS", description="Whole-career citations, most first.")


@strawberry.enum(
    description="Order of a list of institutions; ties are broken by id. With a `query`, every order lists the same "
    "institutions (those whose name matches): only their order differs."
)
class InstitutionSort(Enum):
    RELEVANCE = strawberry.enum_value("RELEVANCE", description=_RELEVANCE)
    PAPER_COUNT = strawberry.enum_value("PAPER_COUNT", description="Most papers in this archive first.")
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


@strawberry.enum(description="The kind of paper, as its analysis judges it from the title and abstract.")
class PaperType(Enum):
    THEORY = strawberry.enum_value("THEORY", description=PAPER_TYPES["THEORY"])
    METHOD = strawberry.enum_value("METHOD", description=PAPER_TYPES["METHOD"])
    EMPIRICAL = strawberry.enum_value("EMPIRICAL", description=PAPER_TYPES["EMPIRICAL"])
    SURVEY = strawberry.enum_value("SURVEY", description=PAPER_TYPES["SURVEY"])
    DATASET = strawberry.enum_value("DATASET", description=PAPER_TYPES["DATASET"])
    BENCHMARK = strawberry.enum_value("BENCHMARK", description=PAPER_TYPES["BENCHMARK"])
    SYSTEM = strawberry.enum_value("SYSTEM", description=PAPER_TYPES["SYSTEM"])
    POSITION = strawberry.enum_value("POSITION", description=PAPER_TYPES["POSITION"])
    OTHER = strawberry.enum_value("OTHER", description=PAPER_TYPES["OTHER"])


@strawberry.enum(description="Whether a list holds withdrawn papers.")
class WithdrawnPapers(Enum):
    EXCLUDE = strawberry.enum_value("EXCLUDE", description="Leave them out (lists, counts and feeds by default).")
    INCLUDE = strawberry.enum_value("INCLUDE", description="List them with the others (`withdrawn: true`).")
    ONLY = strawberry.enum_value("ONLY", description="List withdrawn papers only.")

"""Corrections: researchers claim their profile and fix what the matching got wrong (the mutations, the reader's own
corrections, and a profile's public log)."""

from __future__ import annotations

from datetime import datetime
from enum import Enum

import strawberry

from db.paging import encode_global_id
from db.queries.corrections import CorrectionLogRow, CorrectionRow
from db.queries.papers import PaperRow
from db.queries.researchers import ResearcherRow
from resolvers.context import Info
from resolvers.corrections import (
    MAX_CORRECTIONS_PAGE,
    MAX_MERGE_PROFILES,
    MAX_NOTE_LENGTH,
    MAX_SPLIT_PAPERS,
    CorrectionResult,
    correction_papers,
    correction_researcher,
    correction_researchers,
    resolve_claim_researcher,
    resolve_report_authorship,
    resolve_request_merge,
    resolve_split_researcher,
)
from schema.pagination import PageInfo, total_count_field
from schema.paper import Paper
from schema.researcher import Researcher

CORRECTION = "Correction"
CORRECTION_LOG_ENTRY = "CorrectionLogEntry"


@strawberry.enum(description="What a correction changes.")
class CorrectionKind(Enum):
    CLAIM = strawberry.enum_value("CLAIM", description="The reader says the profile is theirs.")
    NOT_ME = strawberry.enum_value("NOT_ME", description="A paper on the profile is not the researcher's.")
    IS_ME = strawberry.enum_value(
        "IS_ME", description="A paper's author, named like the researcher, is the researcher: the paper joins them."
    )
    SPLIT = strawberry.enum_value(
        "SPLIT", description="Some of the profile's papers are another person's: they move to a new profile."
    )
    MERGE = strawberry.enum_value("MERGE", description="Several profiles are one person's: they become one.")


@strawberry.enum(description="What a reader says about a paper on (or off) a profile.")
class AuthorshipReport(Enum):
    NOT_ME = strawberry.enum_value("NOT_ME", description="Not the researcher's: the paper leaves the profile.")
    IS_ME = strawberry.enum_value(
        "IS_ME", description="The researcher's: the author named like them joins the profile with the paper."
    )


@strawberry.enum(description="Where a correction stands.")
class CorrectionStatus(Enum):
    PENDING = strawberry.enum_value("PENDING", description="Waiting for an operator.")
    APPLIED = strawberry.enum_value("APPLIED", description="In the archive: every page shows it.")
    REJECTED = strawberry.enum_value("REJECTED", description="An operator refused it (`reason` says why).")


def _correction_id(root: CorrectionRow) -> strawberry.ID:
    return strawberry.ID(encode_global_id(CORRECTION, root.id))


def _kind(root: CorrectionRow | CorrectionLogRow) -> CorrectionKind:
    return CorrectionKind(root.kind)


def _status(root: CorrectionRow) -> CorrectionStatus:
    return CorrectionStatus(root.status)


async def _researchers(root: CorrectionRow | CorrectionLogRow, info: Info) -> list[ResearcherRow]:
    ids = [*root.researcher_ids, *([root.new_researcher_id] if root.new_researcher_id else [])]
    return await correction_researchers(info.context, ids)


async def _papers(root: CorrectionRow | CorrectionLogRow, info: Info) -> list[PaperRow]:
    return await correction_papers(info.context, root.paper_ids)


async def _new_researcher(root: CorrectionRow, info: Info) -> ResearcherRow | None:
    return await correction_researcher(info.context, root.new_researcher_id)


_PROFILES_DOC = "The profiles it concerns, as they are now (a profile merged away shows the one it became)."
_PAPERS_DOC = "The papers it concerns."


@strawberry.type(description="A correction the signed-in reader asked for, and what became of it. Only they see it.")
class Correction:
    id: strawberry.ID = strawberry.field(resolver=_correction_id)
    kind: CorrectionKind = strawberry.field(resolver=_kind)
    status: CorrectionStatus = strawberry.field(resolver=_status)
    note: str | None = strawberry.field(description="What the reader wrote with it.")
    reason: str | None = strawberry.field(description="Why an operator rejected it; null otherwise.")
    summary: str | None = strawberry.field(
        description="What applying it changed, as the profile's public log says it; null until applied."
    )
    created_at: datetime
    decided_at: datetime | None = strawberry.field(description="When it was applied or rejected; null while pending.")
    researchers: list[ResearcherRow] = strawberry.field(
        resolver=_researchers, graphql_type=list[Researcher], description=_PROFILES_DOC
    )
    papers: list[PaperRow] = strawberry.field(resolver=_papers, graphql_type=list[Paper], description=_PAPERS_DOC)
    new_researcher: ResearcherRow | None = strawberry.field(
        resolver=_new_researcher,
        graphql_type=Researcher | None,
        description="The profile a split made, or the one a merge kept; null otherwise.",
    )


def _entry_id(root: CorrectionLogRow) -> strawberry.ID:
    return strawberry.ID(encode_global_id(CORRECTION_LOG_ENTRY, root.id))


@strawberry.type(description="An applied correction in a profile's public log: what changed and when, never who asked.")
class CorrectionLogEntry:
    id: strawberry.ID = strawberry.field(resolver=_entry_id)
    kind: CorrectionKind = strawberry.field(resolver=_kind)
    applied_at: datetime
    summary: str = strawberry.field(description="What changed, in one sentence.")
    papers: list[PaperRow] = strawberry.field(resolver=_papers, graphql_type=list[Paper], description=_PAPERS_DOC)
    researchers: list[ResearcherRow] = strawberry.field(
        resolver=_researchers, graphql_type=list[Researcher], description=_PROFILES_DOC
    )


@strawberry.type
class CorrectionEdge:
    cursor: str
    node: Correction


@strawberry.type(description=f"A page of the reader's corrections, newest first; `first` 1 to {MAX_CORRECTIONS_PAGE}.")
class CorrectionConnection:
    total_count: int = total_count_field()
    page_info: PageInfo
    edges: list[CorrectionEdge]
    nodes: list[Correction]


_NOTE_DOC = f"Anything an operator should know (at most {MAX_NOTE_LENGTH} characters)."


@strawberry.input(description="The profile the reader says is theirs.")
class ClaimResearcherInput:
    researcher_id: str = strawberry.field(description="Any id form `researcher(id:)` accepts.")
    note: str | None = strawberry.field(default=None, description=_NOTE_DOC)


@strawberry.input(description="A paper on (NOT_ME) or off (IS_ME) a profile, as the researcher sees it.")
class ReportAuthorshipInput:
    paper_id: str = strawberry.field(description="Any id form `paper(id:)` accepts.")
    researcher_id: str = strawberry.field(description="Any id form `researcher(id:)` accepts.")
    kind: AuthorshipReport
    note: str | None = strawberry.field(default=None, description=_NOTE_DOC)
    position: int | None = strawberry.field(
        default=None,
        description="IS_ME: the author's place on the paper (from 1), needed only when several authors are named "
        "like the researcher.",
    )


@strawberry.input(description="Papers on a profile that are another person's (who shares the name).")
class SplitResearcherInput:
    researcher_id: str = strawberry.field(description="Any id form `researcher(id:)` accepts.")
    paper_ids: list[str] = strawberry.field(
        description=f"1 to {MAX_SPLIT_PAPERS} papers of the profile, in any id form `paper(id:)` accepts; at least "
        "one of its papers stays on it."
    )
    note: str | None = strawberry.field(default=None, description=_NOTE_DOC)


@strawberry.input(description="Profiles that are one person's.")
class RequestMergeInput:
    researcher_ids: list[str] = strawberry.field(
        description=f"2 to {MAX_MERGE_PROFILES} profiles, in any id form `researcher(id:)` accepts."
    )
    note: str | None = strawberry.field(default=None, description=_NOTE_DOC)


def _payload_correction(root: CorrectionResult) -> CorrectionRow:
    return root.correction


async def _payload_researcher(root: CorrectionResult, info: Info) -> ResearcherRow | None:
    return await correction_researcher(info.context, root.researcher_id)


@strawberry.type(description="The correction (new, or the same one when the request was sent before) and the profile.")
class CorrectionPayload:
    correction: CorrectionRow = strawberry.field(resolver=_payload_correction, graphql_type=Correction)
    researcher: ResearcherRow | None = strawberry.field(
        resolver=_payload_researcher,
        graphql_type=Researcher | None,
        description="The profile as it is now: after a merge, the one kept; null if it is gone.",
    )


_RULES = (
    " Applied at once when the reader owns every profile it concerns; otherwise PENDING until an operator decides. "
    "Idempotent: the same request again answers the same correction while it is pending or in effect. Needs a "
    "signed-in reader (UNAUTHENTICATED otherwise); NOT_FOUND for an unknown id; BAD_USER_INPUT saying why for a "
    "request that does not fit the archive; LIMIT_EXCEEDED past the reader's pending or daily corrections."
)


@strawberry.type
class CorrectionMutation:
    @strawberry.mutation(
        description='Claim a profile ("This is me"): applied at once when the profile\'s ORCID iD is the one the '
        "reader's token carries and nobody owns it; otherwise an operator decides (a profile has one owner at most, "
        "and a claim on an owned profile never takes it over by itself)." + _RULES,
        graphql_type=CorrectionPayload,
    )
    async def claim_researcher(self, info: Info, input: ClaimResearcherInput) -> CorrectionResult:
        return await resolve_claim_researcher(info.context, input.researcher_id, input.note)

    @strawberry.mutation(
        description="Say a paper is not the researcher's (NOT_ME: it leaves the profile, and no later matching puts "
        "it back) or is (IS_ME: for an author whose name is one of the profile's names; it joins the profile and "
        "stays)." + _RULES,
        graphql_type=CorrectionPayload,
    )
    async def report_authorship(self, info: Info, input: ReportAuthorshipInput) -> CorrectionResult:
        return await resolve_report_authorship(
            info.context, input.paper_id, input.researcher_id, input.kind.name, input.note, input.position
        )

    @strawberry.mutation(
        description="Move papers of another person who shares the name to a new profile of their own." + _RULES,
        graphql_type=CorrectionPayload,
    )
    async def split_researcher(self, info: Info, input: SplitResearcherInput) -> CorrectionResult:
        return await resolve_split_researcher(info.context, input.researcher_id, input.paper_ids, input.note)

    @strawberry.mutation(
        description="Merge profiles of one person: the one with most papers stays, the others' ids, slugs and "
        "Semantic Scholar ids lead to it (`mergedIds`, `changes`)." + _RULES,
        graphql_type=CorrectionPayload,
    )
    async def request_merge(self, info: Info, input: RequestMergeInput) -> CorrectionResult:
        return await resolve_request_merge(info.context, input.researcher_ids, input.note)

"""Mutations of the signed-in reader: follows and the personal feed's token."""

from __future__ import annotations

import strawberry

from db.queries.institutions import InstitutionRow
from db.queries.researchers import ResearcherRow
from resolvers.context import Info
from resolvers.follows import resolve_rotate_feed_token, set_following_institution, set_following_researcher
from resolvers.viewer import require_viewer
from schema.institution import Institution
from schema.researcher import Researcher
from schema.viewer import Viewer


@strawberry.input(description="The researcher or institution to follow or unfollow.")
class FollowInput:
    id: str = strawberry.field(description="Any id form `researcher(id:)` (or `institution(id:)`) accepts.")


@strawberry.type(description="The researcher after the change, with the reader's state and the new count.")
class FollowResearcherPayload:
    researcher: ResearcherRow = strawberry.field(graphql_type=Researcher)


@strawberry.type(description="The institution after the change, with the reader's state and the new count.")
class FollowInstitutionPayload:
    institution: InstitutionRow = strawberry.field(graphql_type=Institution)


_RULES = " Idempotent; needs a signed-in reader (UNAUTHENTICATED otherwise); NOT_FOUND for an unknown id."
_FOLLOW_RULES = _RULES + (
    " LIMIT_EXCEEDED past the most follows one reader may have (researchers and institutions together)."
)


@strawberry.type
class FollowMutation:
    @strawberry.mutation(description="Follow a researcher: their papers join the reader's feed." + _FOLLOW_RULES)
    async def follow_researcher(self, info: Info, input: FollowInput) -> FollowResearcherPayload:
        row = await set_following_researcher(info.context, input.id, following=True)
        return FollowResearcherPayload(researcher=row)

    @strawberry.mutation(description="Stop following a researcher." + _RULES)
    async def unfollow_researcher(self, info: Info, input: FollowInput) -> FollowResearcherPayload:
        row = await set_following_researcher(info.context, input.id, following=False)
        return FollowResearcherPayload(researcher=row)

    @strawberry.mutation(description="Follow an institution: its papers join the reader's feed." + _FOLLOW_RULES)
    async def follow_institution(self, info: Info, input: FollowInput) -> FollowInstitutionPayload:
        row = await set_following_institution(info.context, input.id, following=True)
        return FollowInstitutionPayload(institution=row)

    @strawberry.mutation(description="Stop following an institution." + _RULES)
    async def unfollow_institution(self, info: Info, input: FollowInput) -> FollowInstitutionPayload:
        row = await set_following_institution(info.context, input.id, following=False)
        return FollowInstitutionPayload(institution=row)

    @strawberry.mutation(
        description="Replace the personal feed's secret token: `feedUrl` changes and the old URL stops working "
        "at once. Needs a signed-in reader."
    )
    async def rotate_feed_token(self, info: Info) -> Viewer:
        token = await resolve_rotate_feed_token(info.context)
        return Viewer(id=strawberry.ID(require_viewer(info.context)), feed_token=token)

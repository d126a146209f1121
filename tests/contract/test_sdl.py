"""The committed SDL is the live schema, and a change that would break the site is caught."""

from __future__ import annotations

import re

from graphql import BreakingChangeType

from frontend_contract.export import SDL_PATH, breaking_changes, live_sdl, main


def test_committed_sdl_is_the_live_schema() -> None:
    committed = SDL_PATH.read_text()
    live = live_sdl()
    changes = [f"{c.type.name}: {c.description}" for c in breaking_changes(committed, live)]
    assert not changes, f"breaking changes against frontend_contract/schema.graphql: {changes}"
    assert committed == live, "schema.graphql is stale: run `python -m frontend_contract.export`"


def test_check_command_agrees(capsys: object) -> None:
    assert main(["--check"]) == 0


def test_removing_a_field_the_site_reads_is_breaking() -> None:
    live = live_sdl()
    without_slug = re.sub(r"(type Paper implements Node \{.*?)\n  slug: String!", r"\1", live, count=1, flags=re.S)
    assert without_slug != live
    changes = breaking_changes(live, without_slug)
    removed = (BreakingChangeType.FIELD_REMOVED, "Field Paper.slug was removed.")
    assert [(c.type, c.description) for c in changes] == [removed]


def test_making_a_field_nullable_or_an_argument_required_is_breaking() -> None:
    live = live_sdl()
    changed = live.replace("  title: String!\n", "  title: String\n", 1)
    changed = changed.replace("paper(id: String!): Paper", "paper(id: String!, version: Int!): Paper", 1)
    kinds = {c.type for c in breaking_changes(live, changed)}
    assert kinds == {BreakingChangeType.FIELD_CHANGED_KIND, BreakingChangeType.REQUIRED_ARG_ADDED}


def test_adding_a_type_or_field_is_not_breaking() -> None:
    live = live_sdl()
    added = live + '\n"""A later addition."""\ntype Venue {\n  name: String!\n}\n'
    added = added.replace("  title: String!\n", "  title: String!\n  subtitle: String\n", 1)
    assert breaking_changes(live, added) == []

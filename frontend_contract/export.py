"""Export the live schema's SDL to frontend_contract/schema.graphql, or check it.

python -m frontend_contract.export            # rewrite schema.graphql from the live schema
python -m frontend_contract.export --check    # exit 1 if it differs; list breaking changes
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from graphql import BreakingChange, build_schema, find_breaking_changes

HERE = Path(__file__).resolve().parent
SDL_PATH = HERE / "schema.graphql"
OPERATIONS_DIR = HERE / "operations"


def live_sdl() -> str:
    from schema import build_schema

    # Settings only tune limits and caches; the SDL does not depend on them.
    return build_schema().as_str().rstrip() + "\n"


def breaking_changes(old_sdl: str, new_sdl: str) -> list[BreakingChange]:
    """Changes from old to new that would break a client written against old."""
    return find_breaking_changes(build_schema(old_sdl), build_schema(new_sdl))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    sdl = live_sdl()
    if not args.check:
        SDL_PATH.write_text(sdl)
        print(f"wrote {SDL_PATH.relative_to(Path.cwd()) if SDL_PATH.is_relative_to(Path.cwd()) else SDL_PATH}")
        return 0
    committed = SDL_PATH.read_text()
    if committed == sdl:
        print("schema.graphql is up to date")
        return 0
    for change in breaking_changes(committed, sdl):
        print(f"BREAKING {change.type.name}: {change.description}")
    print("schema.graphql differs from the live schema: run `python -m frontend_contract.export`")
    return 1


if __name__ == "__main__":
    sys.exit(main())

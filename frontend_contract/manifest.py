"""The site's trusted documents: sha256 of each operation file -> its text, in persisted-documents.json.

python -m frontend_contract.manifest            # rewrite persisted-documents.json from operations/
python -m frontend_contract.manifest --check    # exit 1 when it is stale

The site sends `documentId=<sha256>` (GET, cacheable by a CDN) instead of the document; the API serves
the same documents from operations/ (the manifest is what the site ships). Keys are `sha256:<hex>` of
the file's exact text, as graphql-codegen's persisted-documents output writes them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

from edge.persisted import build_manifest

HERE = Path(__file__).resolve().parent
OPERATIONS_DIR = HERE / "operations"
MANIFEST_PATH = HERE / "persisted-documents.json"


def render(manifest: dict[str, str]) -> bytes:
    return orjson.dumps(manifest, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 when persisted-documents.json is stale")
    args = parser.parse_args(argv)
    wanted = render(build_manifest(OPERATIONS_DIR))
    if args.check:
        if not MANIFEST_PATH.exists() or MANIFEST_PATH.read_bytes() != wanted:
            print("persisted-documents.json is stale: run python -m frontend_contract.manifest", file=sys.stderr)
            return 1
        return 0
    MANIFEST_PATH.write_bytes(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The demo dataset: realistic, deterministic (seeded), loaded into a migrated database.

`wovepaper demo` loads about 20,000 papers (1995 to late 2026, old-style ids before April 2007),
30,000 researchers, 500 institutions, external works per researcher and citation counts. The same
generator at `--papers 1000000` feeds the benchmarks (bench/generate.py).

- `people`: the plan, institutions and researchers; `papers`: papers and researchers' works;
  `words` (with words.json): the word banks and the draws from them.
- `bulk`: COPY into empty tables, indexes after; `loader`: `load_demo`, which picks it or the
  ingest's upserts; `command`: the `wovepaper demo` command.
"""

from __future__ import annotations

from demo.command import run_demo_command
from demo.loader import DemoReport, load_demo
from demo.papers import generate_papers, generate_works
from demo.people import (
    DEFAULT_PAPERS,
    DEFAULT_SEED,
    DemoPlan,
    Heavy,
    People,
    make_institutions,
    make_researchers,
    new_people,
    openalex_author_id,
    researcher_index,
    researcher_records,
    s2_author_id,
)

__all__ = [
    "DEFAULT_PAPERS",
    "DEFAULT_SEED",
    "DemoPlan",
    "DemoReport",
    "Heavy",
    "People",
    "generate_papers",
    "generate_works",
    "load_demo",
    "make_institutions",
    "make_researchers",
    "new_people",
    "openalex_author_id",
    "researcher_index",
    "researcher_records",
    "run_demo_command",
    "s2_author_id",
]

"""Where a server's CPU goes: py-spy's raw (collapsed) stacks summed by the code that was running.

    py-spy record --pid PID --duration 15 --rate 250 --format raw --output stacks.txt
    .venv/bin/python -m bench.pyspy_summary stacks.txt

Each sample is charged to the innermost frame of our code or of a library we can name (its self
time), and to every function on its stack (inclusive time). Idle samples (the event loop waiting
in epoll) are counted apart, so percentages are of busy samples.
"""

from __future__ import annotations

import argparse
from collections import Counter

# First match wins, checked against the innermost frame's file path.
AREAS = (
    ("FastExecutor", "schema/fast_executor/"),
    ("graphql-core execution", "graphql/execution/"),
    ("graphql-core other (parse, validate, types)", "graphql/"),
    ("Strawberry (view, extensions, resolvers glue)", "strawberry/"),
    ("our resolvers and loaders", "resolvers/"),
    ("our db layer (row objects, SQL helpers)", "db/"),
    ("our schema modules", "schema/"),
    ("asyncpg", "asyncpg/"),
    ("uvicorn / httptools", "uvicorn/"),
    ("starlette", "starlette/"),
    ("asyncio event loop", "asyncio/"),
    ("orjson / json", "json"),
)


def area(frame: str) -> str:
    for name, marker in AREAS:
        if marker in frame:
            return name
    return "other (C code, stdlib)"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("stacks")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    by_area: Counter[str] = Counter()
    by_function: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    busy = idle = 0
    with open(args.stacks) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            n = int(count)
            frames = stack.split(";")
            if "select (selectors.py" in frames[-1] or "poll" in frames[-1].split(" (")[0]:
                idle += n
                continue
            busy += n
            by_area[area(frames[-1])] += n
            by_function[frames[-1]] += n
            for name in {fr.split(" (")[0] for fr in frames}:
                inclusive[name] += n
    print(f"busy samples {busy}, idle {idle} ({idle / max(busy + idle, 1):.0%} of all)\n")
    print("| where (innermost frame) | share of busy CPU |\n|---|---:|")
    for name, n in by_area.most_common():
        print(f"| {name} | {n / busy:.1%} |")
    print(f"\nTop {args.top} functions by self time:")
    for name, n in by_function.most_common(args.top):
        print(f"  {n / busy:6.1%}  {name[:140]}")
    print(f"\nTop {args.top} by inclusive time:")
    for name, n in inclusive.most_common(args.top):
        print(f"  {n / busy:6.1%}  {name[:140]}")


if __name__ == "__main__":
    main()

"""One list of authors against another as an optimal assignment over pair scores, with ties found, not guessed.

Only the pairs that can name one person are scored; they fall apart into small groups (the people of a paper
whose names resemble each other), each solved on its own with scipy's `linear_sum_assignment`. A row whose partner
changes in another assignment scoring within `margin` of the best is a tie: it is reported as ambiguous with the
candidates it could take, never decided by the solver's arbitrary pick.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import linear_sum_assignment

Pair = tuple[int, int]


@dataclass(slots=True)
class Assignment:
    pairs: dict[int, int] = field(default_factory=dict)  # row -> column, decided
    ambiguous: dict[int, list[int]] = field(default_factory=dict)  # row -> the columns it could take
    # Rows and columns of every group that held a tie: what evidence must settle.
    contested: list[tuple[list[int], list[int]]] = field(default_factory=list)


def _groups(scores: Mapping[Pair, float]) -> list[tuple[list[int], list[int]]]:
    """Connected groups of the bipartite graph of scored pairs: (rows, columns), each sorted."""
    parent: dict[tuple[str, int], tuple[str, int]] = {}

    def find(x: tuple[str, int]) -> tuple[str, int]:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for r, c in scores:
        a, b = find(("r", r)), find(("c", c))
        if a != b:
            parent[a] = b
    members: dict[tuple[str, int], tuple[list[int], list[int]]] = {}
    for node in list(parent):
        rows, cols = members.setdefault(find(node), ([], []))
        (rows if node[0] == "r" else cols).append(node[1])
    return [(sorted(r), sorted(c)) for r, c in members.values()]


def _solve(matrix: np.ndarray) -> tuple[float, dict[int, int]]:
    """Best total and its pairs (matrix indexes); a pair of score 0 is no pair."""
    rows, cols = linear_sum_assignment(matrix, maximize=True)
    chosen = {int(r): int(c) for r, c in zip(rows, cols, strict=True) if matrix[r, c] > 0}
    return float(sum(matrix[r, c] for r, c in chosen.items())), chosen


def assign(scores: Mapping[Pair, float], *, margin: float) -> Assignment:
    """`scores`: {(row, column): score > 0} for the pairs that may be one person (with any tie-breaker already in
    the score). Each row gets at most one column and each column one row, maximising the total."""
    out = Assignment()
    for rows, cols in _groups(scores):
        if len(rows) == 1 and len(cols) == 1:
            out.pairs[rows[0]] = cols[0]
            continue
        matrix = np.zeros((len(rows), len(cols)))
        for i, r in enumerate(rows):
            for j, c in enumerate(cols):
                matrix[i, j] = scores.get((r, c), 0.0)
        best, chosen = _solve(matrix)
        undecided: dict[int, set[int]] = {}
        for i, j in chosen.items():
            kept = matrix[i, j]
            matrix[i, j] = 0.0
            alt_total, alt = _solve(matrix)
            matrix[i, j] = kept
            if alt_total < best - margin:
                continue
            # Another assignment as good: every row it places differently is undecided.
            for k in range(len(rows)):
                if chosen.get(k) != alt.get(k):
                    places = undecided.setdefault(k, set())
                    places.update(x for x in (chosen.get(k), alt.get(k)) if x is not None)
        for i, j in chosen.items():
            if i not in undecided:
                out.pairs[rows[i]] = cols[j]
        for i, places in undecided.items():
            out.ambiguous[rows[i]] = sorted(cols[j] for j in places)
        if undecided:
            out.contested.append((rows, cols))
    return out

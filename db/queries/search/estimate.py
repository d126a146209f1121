"""How many papers a keyword search matches, past the cap: estimated from how far its scans read the table."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Scanned:
    """How far a capped keyword search got: matches kept from the cited tier, the last heap block each tier's scan
    reached, the table's size in blocks, and the cited tier's share of all papers (-1 or None: unknown). Sorted by
    date or citations (`ordered`), the candidates say nothing of the table: the cited tier's matches, read apart
    (`probe_found`, up to the cap, the last of them in block `probe_block`), do."""

    tier_found: int
    tier_block: float | None
    rest_block: float | None
    relpages: int | None
    tier_share: float | None
    ordered: bool = False
    probe_found: int = 0
    probe_block: float | None = None


def _tier_share(scanned: Scanned) -> float:
    # A never-analysed index has no row count (-1): then the tier's share is unknown, and not used.
    return min(1.0, scanned.tier_share) if scanned.tier_share and scanned.tier_share > 0 else 1.0


def estimate_matches(total: int, capped: int, scanned: Scanned, cap: int) -> tuple[int, bool]:
    """Past the cap, estimate all matches: a scan that stopped part way through the table found that share of its
    matches; matches of the cited tier alone scale by the tier's share of all papers too."""
    if capped <= cap or not scanned.relpages:
        return total, False
    if scanned.ordered:
        if not scanned.probe_found or scanned.probe_block is None:
            return capped, True
        read = 1.0 if scanned.probe_found <= cap else min(1.0, (scanned.probe_block + 1) / scanned.relpages)
        return max(capped, round(scanned.probe_found / read / _tier_share(scanned))), True
    rest_found = capped - scanned.tier_found
    if rest_found == 0:
        if scanned.tier_block is None:
            return total, False
        share = min(1.0, (scanned.tier_block + 1) / scanned.relpages) * _tier_share(scanned)
        return max(capped, round(capped / share)), True
    # Every cited match was kept; the scan of the other papers stopped part way through the table.
    if scanned.rest_block is None:
        return total, False
    share = min(1.0, (scanned.rest_block + 1) / scanned.relpages)
    return max(capped, scanned.tier_found + round(rest_found / share)), True

"""Sets of ranks written the way a person reads them at 64 ranks: `ranks 0-31, 33-63`.

A finding about one odd rank among 64 names the other 63 too (who waited, who did not
compile); listed one by one they bury the odd one. Runs of three or more consecutive ranks
become `a-b`; two stay `a, b`, so two-rank wording is unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable


def rank_list(ranks: Iterable[int]) -> str:
    """`0-31, 33-63` (sorted, duplicates dropped); empty for no ranks."""
    values = sorted(set(ranks))
    parts: list[str] = []
    index = 0
    while index < len(values):
        end = index
        while end + 1 < len(values) and values[end + 1] == values[end] + 1:
            end += 1
        if end - index >= 2:
            parts.append(f"{values[index]}-{values[end]}")
        else:
            parts.extend(str(v) for v in values[index : end + 1])
        index = end + 1
    return ", ".join(parts)


def ranks_text(ranks: Iterable[int]) -> str:
    """`rank 3`, `ranks 0, 1`, `ranks 0-31, 33-63`."""
    values = sorted(set(ranks))
    return f"rank {values[0]}" if len(values) == 1 else f"ranks {rank_list(values)}"


def rank_tags(ranks: Iterable[int]) -> str:
    """`rank0` or `ranks0-31,33-63`: a finding-id suffix for a set of ranks (no spaces)."""
    values = sorted(set(ranks))
    if len(values) == 1:
        return f"rank{values[0]}"
    return "ranks" + rank_list(values).replace(" ", "")


def tag_ranks(tag: str) -> set[int] | None:
    """The ranks of an id's process part (`rank5`, `ranks0-31,33-63`, as rank_tags writes
    them), or None when it names no ranks (`proc0`, empty)."""
    match = re.fullmatch(r"ranks?(\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*)", tag)
    if match is None:
        return None
    ranks: set[int] = set()
    for part in match.group(1).split(","):
        low, _, high = part.partition("-")
        ranks.update(range(int(low), int(high or low) + 1))
    return ranks

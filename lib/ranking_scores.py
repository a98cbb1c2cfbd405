"""The retrieval figures of one ranked answer against its labels: written once for the discovery harness
(bench/discovery.py) and the owners' own evaluations (registry/owner_evaluations.py)."""

from __future__ import annotations

from collections.abc import Sequence


def first_rank(results: Sequence[str], expected: Sequence[str]) -> int | None:
    """The 1-based position of the first expected name among the results, or None."""
    return next((position for position, name in enumerate(results, 1) if name in expected), None)


def recall_at(results: Sequence[str], expected: Sequence[str], k: int) -> float:
    """The share of the expected names (at most k of them) found in the first k results."""
    return len(set(expected) & set(results[:k])) / min(k, len(set(expected)))


def reciprocal_rank(results: Sequence[str], expected: Sequence[str]) -> float:
    rank = first_rank(results, expected)
    return 1 / rank if rank else 0.0

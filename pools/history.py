"""What a pool held over time, from its allocations' start and end (the pool page's history chart).

Pure: no Django import. The page reads the rows (``pools.views``) and passes :class:`Span` records;
the counting rule is the allocation service's (``pools.services.allocation.pool_usage``): a pool
holds its whole GPUs plus the *distinct* GPUs it holds fractions on, and its MIG slices, so the
last point of a series equals ``pool_usage`` when the rows are consistent.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class Span:
    """One allocation as the chart needs it.

    ``start``/``end`` are aware datetimes; ``end`` None while it still holds. Held over the
    half-open interval ``[start, end)``. ``gpus``: whole GPUs; ``borrowed_gpus``: those of them
    above the pool's guarantee; ``slices``: MIG slices; ``shared_gpus``: ids of the GPUs it holds
    a fraction on (counted once per GPU however many fractions of the pool share it).
    """

    start: datetime
    end: datetime | None = None
    gpus: int = 0
    borrowed_gpus: int = 0
    slices: int = 0
    shared_gpus: tuple[int, ...] = field(default_factory=tuple)


def usage_history(spans: Iterable[Span], since: datetime, until: datetime) -> dict[str, list]:
    """Step series of what the spans hold over ``[since, until]``.

    Returns ``{"t": [epoch seconds], "gpus": [...], "borrowed_gpus": [...], "slices": [...]}``,
    parallel lists: the value at ``t[i]`` holds until ``t[i + 1]`` (draw as steps). The first
    point is ``since`` (what was held then, from spans that started earlier), then one point per
    instant at which the counts change (all starts and ends at one instant applied together),
    and the last point is ``until`` with the value then (only ``since`` when both are equal). ``gpus`` = whole GPUs + distinct
    fraction GPUs. Spans that end before ``since``, start after ``until``, or end at or before
    they start (no duration) are left out.

    Raises:
        ValueError: ``until`` before ``since``.
    """
    if until < since:
        raise ValueError(f"until ({until.isoformat()}) is before since ({since.isoformat()})")
    changes: dict[datetime, list[tuple[int, Span]]] = {}
    whole = borrowed = slices = 0
    shared: Counter[int] = Counter()

    def apply(sign: int, span: Span) -> None:
        nonlocal whole, borrowed, slices
        whole += sign * span.gpus
        borrowed += sign * span.borrowed_gpus
        slices += sign * span.slices
        for gpu in span.shared_gpus:
            shared[gpu] += sign
            if shared[gpu] <= 0:
                del shared[gpu]

    for span in spans:
        if span.end is not None and span.end <= span.start:
            continue
        if span.start > until or (span.end is not None and span.end <= since):
            continue
        if span.start <= since:
            apply(1, span)
        else:
            changes.setdefault(span.start, []).append((1, span))
        if span.end is not None and span.end <= until:
            changes.setdefault(span.end, []).append((-1, span))

    out: dict[str, list] = {"t": [], "gpus": [], "borrowed_gpus": [], "slices": []}

    keys = ("gpus", "borrowed_gpus", "slices")

    def point(at: datetime, *, final: bool = False) -> None:
        values = (whole + len(shared), borrowed, slices)
        if out["t"] and not final and tuple(out[k][-1] for k in keys) == values:
            return  # no change (a start and an end at one instant): no step
        out["t"].append(at.timestamp())
        for key, value in zip(keys, values, strict=True):
            out[key].append(value)

    point(since)
    for at in sorted(changes):
        for sign, span in changes[at]:
            apply(sign, span)
        if at < until:
            point(at)
    if until > since:
        point(until, final=True)
    return out

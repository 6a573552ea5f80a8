"""Formatting filters every app's pages share (``{% load weft_format %}``), so one quantity is
shown in one unit everywhere: ratios in % as the heatmap shows them, stored details as a
key: value list."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def percent(value) -> str:
    """A 0..1 ratio (congestion index, utilisation) as the heatmap shows it: ``0.384`` →
    ``"38.4 %"`` (one decimal, as ``static/telemetry/heatmap.js``); ``"–"`` for None or a
    value that is not a number."""
    try:
        return f"{float(value) * 100:.1f} %"
    except (TypeError, ValueError):
        return "–"


@register.filter
def details_items(details) -> list[tuple[str, str]]:
    """An alarm's or event's ``details`` (a JSON object) as ``[(key, text)]`` for a key: value list,
    keys as they are stored, sorted; a list's items joined by ", ", a nested object as
    ``k=v, …``, None as "—". A non-object (an old row, a string) gives ``[("", text)]``."""
    if not isinstance(details, dict):
        return [("", str(details))] if details not in (None, "", [], {}) else []

    def text(v) -> str:
        if v is None:
            return "—"
        if isinstance(v, bool):
            return "yes" if v else "no"
        if isinstance(v, float):
            return f"{v:g}"
        if isinstance(v, list | tuple):
            return ", ".join(text(x) for x in v) or "—"
        if isinstance(v, dict):
            return ", ".join(f"{k}={text(x)}" for k, x in v.items()) or "—"
        return str(v)

    return [(str(k), text(v)) for k, v in sorted(details.items(), key=lambda kv: str(kv[0]))]

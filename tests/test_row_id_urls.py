"""Row ids in URLs: an id no 64-bit column can hold is a 404 from the resolver, never a 500.

Schemathesis found ``GET /api/fabric/heatmap/{fabric_id}/cells/{port_id}/`` answering 500 for a
20-digit id (the lookup overflowed SQLite's INTEGER). Every page and API path with a row id uses
the ``<pk:>`` converter (``core.converters``); this walks them all with such an id.
"""

from __future__ import annotations

import re

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

HUGE = "9" * 20


def _routes(patterns, prefix: str = ""):
    for p in patterns:
        route = prefix + str(p.pattern)
        if isinstance(p, URLResolver):
            yield from _routes(p.url_patterns, route)
        elif isinstance(p, URLPattern):
            yield route


def _with_ids(route: str) -> str | None:
    if "<pk:" not in route or "(?P" in route or "<str:" in route or "<slug:" in route:
        return None
    return "/" + re.sub(r"<pk:\w+>", HUGE, route).lstrip("^").rstrip("$")


def test_every_row_id_route_uses_the_pk_converter():
    plain_ints = [r for r in _routes(get_resolver().url_patterns) if "<int:" in r]
    assert plain_ints == [], "use <pk:> for row ids (core.converters)"


@pytest.mark.django_db
def test_a_twenty_digit_id_is_404_everywhere(admin_client):
    paths = [p for p in (_with_ids(r) for r in _routes(get_resolver().url_patterns)) if p]
    assert len(paths) >= 10, paths
    for path in paths:
        resp = admin_client.get(path)
        assert resp.status_code == 404, (path, resp.status_code)

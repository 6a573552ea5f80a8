"""Every DRF viewset route the project's URLconf serves, found by walking the resolver.

The generic API tests (``tests/test_api_viewsets.py``, after NetBox's ``APIViewTestCases``)
parametrise over :func:`viewset_routes`, so a viewset registered in any app's router is covered
without being listed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.viewsets import ViewSetMixin

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


@dataclass(frozen=True)
class Route:
    """One HTTP method of one viewset URL.

    ``name`` is the namespaced URL name (``"fabric-api:fabric-detail"``), ``action`` the viewset
    method it calls (``"retrieve"``, ``"discover"``), ``detail`` whether the URL names one object
    (takes the viewset's lookup kwarg).
    """

    name: str
    method: str
    action: str
    viewset: type
    detail: bool

    @property
    def id(self) -> str:
        return f"{self.name} {self.method}"

    @property
    def safe(self) -> bool:
        return self.method in SAFE_METHODS

    @property
    def lookup_kwarg(self) -> str:
        return self.viewset.lookup_url_kwarg or self.viewset.lookup_field


def _walk(patterns, namespace: str) -> Iterator[tuple[str, URLPattern]]:
    for entry in patterns:
        if isinstance(entry, URLResolver):
            inner = f"{namespace}:{entry.namespace}" if namespace and entry.namespace else entry.namespace
            yield from _walk(entry.url_patterns, inner or namespace)
        elif isinstance(entry, URLPattern):
            yield namespace, entry


def viewset_routes() -> list[Route]:
    """Each (URL, method) served by a DRF viewset, sorted by name and method; ``HEAD``/``OPTIONS``
    and the routers' ``.json`` format-suffix duplicates are left out."""
    routes: dict[tuple[str, str], Route] = {}
    for namespace, pattern in _walk(get_resolver().url_patterns, ""):
        view = pattern.callback
        viewset = getattr(view, "cls", None)
        actions = getattr(view, "actions", None)
        if viewset is None or not actions or not issubclass(viewset, ViewSetMixin) or not pattern.name:
            continue
        if "format" in pattern.pattern.regex.groupindex:
            continue
        name = f"{namespace}:{pattern.name}" if namespace else pattern.name
        lookup = viewset.lookup_url_kwarg or viewset.lookup_field
        detail = lookup in pattern.pattern.regex.groupindex
        for method, action in actions.items():
            method = method.upper()
            if method in ("HEAD", "OPTIONS"):
                continue
            routes.setdefault((name, method), Route(name, method, action, viewset, detail))
    return [routes[key] for key in sorted(routes)]

"""The Content-Security-Policy's exceptions for pages Weft does not write.

The policy (``CONTENT_SECURITY_POLICY`` in ``weft/settings.py``, sent by django-csp's middleware)
allows scripts from this origin or carrying the response's nonce, and styles from this origin
only. Weft's own templates comply (no inline script or handler, no ``style`` attribute; a
template that needs an inline script writes ``<script nonce="{{ request.csp_nonce }}">``).
Third-party pages do not: Django REST framework's browsable API writes ``style`` attributes,
Swagger UI an inline ``<style>``, ReDoc injects styles and starts a worker from a ``blob:``. For
those, :data:`THIRD_PARTY_UI` adds what they need; scripts stay restricted everywhere.
"""

from __future__ import annotations

from csp.constants import SELF, UNSAFE_INLINE
from csp.decorators import csp_update
from rest_framework import renderers

#: What the API docs and the browsable API add to the policy (``csp_update``: appended).
THIRD_PARTY_UI = {
    "style-src": [UNSAFE_INLINE],
    "img-src": ["data:"],
    "worker-src": [SELF, "blob:"],
}

#: View decorator for third-party UI pages.
third_party_ui = csp_update(THIRD_PARTY_UI)


class BrowsableAPIRenderer(renderers.BrowsableAPIRenderer):
    """DRF's HTML renderer, its response marked with :data:`THIRD_PARTY_UI` (as the decorator
    would: django-csp reads ``_csp_update`` from the response)."""

    def render(self, data, accepted_media_type=None, renderer_context=None):
        response = (renderer_context or {}).get("response")
        if response is not None:
            response._csp_update = THIRD_PARTY_UI
        return super().render(data, accepted_media_type, renderer_context)

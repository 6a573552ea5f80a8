"""Middleware that makes the request's user known to ``accounts.audit.record``."""

from __future__ import annotations

from .audit import Actor, current_actor


class AuditUserMiddleware:
    """Set ``current_actor`` for the duration of each request."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        token = current_actor.set(Actor(request=request))
        try:
            return self.get_response(request)
        finally:
            current_actor.reset(token)

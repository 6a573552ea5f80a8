"""ASGI entry point: HTTP through Django, websockets through Channels.

Websocket routes come from each app's ``routing.py``; every websocket needs an allowed Origin
(scheme, host and port: ``core.ws_origin``) and an authenticated session (checked in the consumers).
"""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

from core import http_limits

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "weft.settings")
http_limits.install()  # daphne: an over-long URL gets 414, not a dropped connection
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import re_path  # noqa: E402

from core.realtime import NoRouteConsumer  # noqa: E402
from core.ws_origin import OriginValidator  # noqa: E402
from events.routing import websocket_urlpatterns as event_routes  # noqa: E402
from scheduler.routing import websocket_urlpatterns as scheduler_routes  # noqa: E402
from telemetry.routing import websocket_urlpatterns as telemetry_routes  # noqa: E402

#: every app's routes, then the catch-all: an unknown path is closed with 4404, not an error
websocket_routes = [
    *telemetry_routes,
    *event_routes,
    *scheduler_routes,
    re_path(r"", NoRouteConsumer.as_asgi()),
]

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": OriginValidator(AuthMiddlewareStack(URLRouter(websocket_routes))),
    }
)

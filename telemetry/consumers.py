"""Websocket consumer of the live heatmap: authenticate, join the fabric's group, relay.

Route: ``ws/heatmap/<fabric_id>/`` (``telemetry.routing``). The consumer holds no logic: the
typed producer (``telemetry.producer``) builds every message after a sweep commits.

Close codes (the 4000-4999 range is for applications, RFC 6455 §7.4.2): 4401 anonymous or
inactive user (the page then sends the user to the login page), 4403 a role below Viewer, 4404
no such fabric. The handshake is accepted before closing so that browsers receive the code;
a rejected handshake would only give them a bare HTTP 403.

Messages to the client are JSON ``{"type": "heatmap.delta" | "heatmap.stale" |
"heatmap.topology", "payload": {...}}`` with the payloads of ``telemetry.producer``.
"""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async

from accounts.roles import Role, role_of
from core import realtime
from fabric.models import Fabric

from .producer import DELTA_TYPE, STALE_TYPE, TOPOLOGY_TYPE, heatmap_group

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404


@database_sync_to_async
def _check_access(user: Any, fabric_id: int) -> int | None:
    """Return None when ``user`` may view ``fabric_id``, else the close code."""
    if user is None or not user.is_authenticated or not user.is_active:
        return CLOSE_UNAUTHENTICATED
    if role_of(user) < Role.VIEWER:
        return CLOSE_FORBIDDEN
    if not Fabric.objects.filter(pk=fabric_id).exists():
        return CLOSE_NOT_FOUND
    return None


class HeatmapConsumer(realtime.ListenOnlyJsonConsumer):
    """Relays ``heatmap.*`` messages of one fabric to an authenticated (Viewer or above) user."""

    group: str | None = None

    async def connect(self) -> None:
        realtime.remember_loop()
        fabric_id = int(self.scope["url_route"]["kwargs"]["fabric_id"])
        code = await _check_access(self.scope.get("user"), fabric_id)
        await self.accept()
        if code is not None:
            await self.close(code=code)
            return
        self.group = heatmap_group(fabric_id)
        await self.channel_layer.group_add(self.group, self.channel_name)

    async def disconnect(self, code: int) -> None:
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """Clients only listen; a ``{"type": "ping"}`` gets a ``pong`` (keep-alive through proxies)."""
        if isinstance(content, dict) and content.get("type") == "ping":
            await self.send_json({"type": "pong"})

    async def _relay(self, message_type: str, message: dict[str, Any]) -> None:
        payload = message["payload"]
        if "text" in payload:  # pre-encoded frame (producer.RelayPayload): relay verbatim
            await self.send(text_data=payload["text"])
        else:
            await self.send_json({"type": message_type, "payload": payload})

    async def heatmap_delta(self, message: dict[str, Any]) -> None:
        await self._relay(DELTA_TYPE, message)

    async def heatmap_stale(self, message: dict[str, Any]) -> None:
        await self._relay(STALE_TYPE, message)

    async def heatmap_topology(self, message: dict[str, Any]) -> None:
        await self._relay(TOPOLOGY_TYPE, message)

"""Websocket consumer of live alarms and dashboard updates: authenticate, join, relay.

Routes (``events.routing``): ``ws/alarms/`` (every fabric) and ``ws/alarms/<fabric_id>/``.
Close codes: 4401 anonymous or inactive user, 4403 role below Viewer, 4404 no such fabric (as the
heatmap; docs/design.md).
Messages to the client: JSON ``{"type": "alarm.changed" | "alarms.reload" | "summary.changed",
"payload": {...}}`` as built by ``events.realtime``.
"""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async

from accounts.roles import Role, role_of
from accounts.scoping import visible_tenant_ids
from core import realtime
from fabric.models import Fabric

from .scoping import may_read

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404


@database_sync_to_async
def _close_code(user: Any, fabric_id: int | None) -> int | None:
    if user is None or not user.is_authenticated or not user.is_active:
        return CLOSE_UNAUTHENTICATED
    if role_of(user) < Role.VIEWER:
        return CLOSE_FORBIDDEN
    if fabric_id is not None and not Fabric.objects.filter(pk=fabric_id).exists():
        return CLOSE_NOT_FOUND
    return None


@database_sync_to_async
def _tenants(user: Any) -> set[int] | None:
    return visible_tenant_ids(user)


class AlarmConsumer(realtime.ListenOnlyJsonConsumer):
    """Relays alarm changes of one fabric (or all) to a signed-in Viewer or above."""

    group: str | None = None
    #: the tenants whose alarms this user reads (None: all; ``accounts.scoping``)
    tenants: set[int] | None = None

    async def connect(self) -> None:
        realtime.remember_loop()
        fabric_id = self.scope["url_route"]["kwargs"].get("fabric_id")
        code = await _close_code(self.scope.get("user"), fabric_id)
        await self.accept()
        if code is not None:
            await self.close(code=code)
            return
        self.tenants = await _tenants(self.scope.get("user"))
        self.group = realtime.group_name("alarms", fabric_id if fabric_id is not None else "all")
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.send_json({"type": "hello", "payload": {"group": self.group}})

    async def disconnect(self, code: int) -> None:
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content: Any, **kwargs) -> None:
        """Clients only listen; a ``ping`` gets a ``pong`` (keep-alive through proxies)."""
        if isinstance(content, dict) and content.get("type") == "ping":
            await self.send_json({"type": "pong", "payload": {}})

    async def alarm_changed(self, message: dict) -> None:
        """Relay, unless the alarm carries another tenant's data (``events.scoping.may_read``)."""
        if not may_read(message["payload"]["alarm"].get("tenant"), self.tenants):
            return
        await self.send_json({"type": "alarm.changed", "payload": message["payload"]})

    async def alarms_reload(self, message: dict) -> None:
        await self.send_json({"type": "alarms.reload", "payload": message["payload"]})

    async def summary_changed(self, message: dict) -> None:
        await self.send_json({"type": "summary.changed", "payload": message["payload"]})

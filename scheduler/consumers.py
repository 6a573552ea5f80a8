"""Websocket consumer of live job changes: authenticate, join the groups of the user's tenants,
relay (``ws/jobs/``).

A signed-in Viewer or above joins ``group_name("jobs", tenant id)`` for every tenant they may
read (an Admin: ``group_name("jobs", "all")``), so a job's change reaches only those who may see
the job. Close codes as the alarms' (4401 anonymous or inactive, 4403 below Viewer). Messages:
``{"type": "job.changed", "payload": {"job", "state", "previous", "source", "tenant"}}``
(published by ``scheduler.signals`` on every ``job_changed``); pages fetch the rest through the
API (tenant-scoped).
"""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async

from accounts.roles import Role, role_of
from core import realtime
from pools import access

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403


@database_sync_to_async
def _groups(user: Any) -> tuple[int | None, list[str]]:
    if user is None or not user.is_authenticated or not user.is_active:
        return CLOSE_UNAUTHENTICATED, []
    if role_of(user) < Role.VIEWER:
        return CLOSE_FORBIDDEN, []
    if access.is_admin(user):
        return None, [realtime.group_name("jobs", "all")]
    return None, [
        realtime.group_name("jobs", pk) for pk in access.visible_tenants(user).values_list("pk", flat=True)
    ]


class JobConsumer(realtime.ListenOnlyJsonConsumer):
    """Relays job changes of the user's tenants."""

    groups_joined: list[str] = []

    async def connect(self) -> None:
        realtime.remember_loop()
        code, groups = await _groups(self.scope.get("user"))
        await self.accept()
        if code is not None:
            await self.close(code=code)
            return
        self.groups_joined = groups
        for g in groups:
            await self.channel_layer.group_add(g, self.channel_name)
        await self.send_json({"type": "hello", "payload": {"groups": len(groups)}})

    async def disconnect(self, code: int) -> None:
        for g in self.groups_joined:
            await self.channel_layer.group_discard(g, self.channel_name)

    async def receive_json(self, content: Any, **kwargs) -> None:
        if isinstance(content, dict) and content.get("type") == "ping":
            await self.send_json({"type": "pong", "payload": {}})

    async def job_changed(self, message: dict) -> None:
        await self.send_json({"type": "job.changed", "payload": message["payload"]})

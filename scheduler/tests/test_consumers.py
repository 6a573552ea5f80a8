"""The live job channel ``ws/jobs/`` on the real ASGI app (in-memory layer, as the embedded
deployment): a job's change committed in a worker thread reaches the users of its tenant (and
Admins), not those of another tenant; anonymous users get 4401."""

from __future__ import annotations

import asyncio

import pytest
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.test import override_settings

from accounts.roles import set_role
from pools.models import Tenant, TenantMembership
from scheduler.services.queue import JobSpec, submit
from tests.support.jobs import gpu_cluster
from tests.support.ws import HOST, ORIGIN, in_thread, session_headers
from weft.asgi import application

MEMORY = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


@pytest.mark.django_db(transaction=True)
def test_job_changes_reach_their_tenants_users_only():
    c = gpu_cluster(1, 1, 8, name="ws")
    other = Tenant.objects.create(name="other")
    users = {}
    for name, role, tenant in (
        ("vic", "viewer", c.tenant),
        ("otto", "viewer", other),
        ("ada", "admin", None),
    ):
        users[name] = get_user_model().objects.create_user(name, password="x")
        set_role(users[name], role)
        if tenant is not None:
            TenantMembership.objects.create(tenant=tenant, user=users[name])

    def submit_one():
        return submit(JobSpec(name="live", pool_id=c.pool.pk, count=1)).pk

    headers = {n: session_headers(u) for n, u in users.items()}

    async def run():
        anon = WebsocketCommunicator(application, "/ws/jobs/", headers=[HOST, ORIGIN])
        assert (await anon.connect(timeout=5))[0]
        assert await anon.receive_output(timeout=5) == {"type": "websocket.close", "code": 4401}
        comms = {n: WebsocketCommunicator(application, "/ws/jobs/", headers=h) for n, h in headers.items()}
        for comm in comms.values():
            assert (await comm.connect(timeout=5))[0]
            assert (await comm.receive_json_from(timeout=5))["type"] == "hello"
        job_id = await in_thread(submit_one)  # its pass places it too: two changes
        for name in ("vic", "ada"):
            got = [await comms[name].receive_json_from(timeout=10) for _ in range(2)]
            assert [(m["type"], m["payload"]["job"], m["payload"]["state"]) for m in got] == [
                ("job.changed", job_id, "pending"), ("job.changed", job_id, "placed"),
            ]  # fmt: skip
        assert await comms["otto"].receive_nothing(timeout=0.5)
        for comm in comms.values():
            await comm.disconnect()

    with override_settings(CHANNEL_LAYERS=MEMORY):
        asyncio.run(run())

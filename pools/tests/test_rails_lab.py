"""A GPU's rail survives a flap of its HCA's cable on the fabric lab (ibsim + OpenSM): ``Unlink``
of ``<host> mlx5_1`` and a discovery delete the CA node (the GPUs on that rail keep only their
``rail_device``); ``ReLink`` and the next discovery bring the CA back and the pools' reaction to
the committed discovery (``pools.receivers.after_discovery``) gives them their rail again, as the
API shows it."""

from __future__ import annotations

import pytest
from django.urls import reverse

from accounts.models import AuditEntry
from events.models import Event
from fabric.models import Fabric, Node
from fabric.services.discovery import discover
from lab import netgen
from pools.lab import seed_lab_gpus
from pools.models import Gpu

pytestmark = [pytest.mark.lab, pytest.mark.django_db(transaction=True)]


def test_unlink_relink_rediscover_restores_the_rail(lab_factory, client, users):
    lab = lab_factory(netgen.rail_pod(hosts=2, rails=2), timeout=120)
    fabric = Fabric.objects.create(name="flap", tool_env=dict(lab.tool_env))
    discover(fabric)
    seed_lab_gpus(fabric, 4)
    victim = "host002" if "host002" not in lab.tool_env["SIM_HOST"] else "host001"
    ca = f"{victim} mlx5_1"
    before = Node.objects.get(fabric=fabric, description=ca)
    rail_gpus = list(Gpu.objects.filter(host__name=victim, rail_device="mlx5_1").order_by("index"))
    assert [g.index for g in rail_gpus] == [1, 3] and all(g.rail_node_id == before.pk for g in rail_gpus)

    lab.unlink(ca, 1)
    discover(fabric)
    assert not Node.objects.filter(fabric=fabric, description=ca).exists()
    lost = Gpu.objects.filter(host__name=victim, rail_device="mlx5_1")
    assert list(lost.values_list("rail_node_id", flat=True)) == [None, None]

    lab.relink(ca, 1)
    discover(fabric)
    back = Node.objects.get(fabric=fabric, description=ca)
    assert back.node_guid == before.node_guid
    assert list(lost.order_by("index").values_list("rail_node_id", flat=True)) == [back.pk, back.pk]
    # the other rail's GPUs never lost theirs
    other = Node.objects.get(fabric=fabric, description=f"{victim} mlx5_0")
    assert set(
        Gpu.objects.filter(host__name=victim, rail_device="mlx5_0").values_list("rail_node_id", flat=True)
    ) == {other.pk}
    (entry,) = AuditEntry.objects.filter(action="gpu.rail_resolved")
    assert (entry.object_repr, entry.changes) == (victim, {"gpus": [1, 3], "devices": ["mlx5_1"]})
    assert Event.objects.filter(code="gpu.rail_resolved", fabric=fabric).count() == 2

    client.force_login(users["viewer"])
    host_id = rail_gpus[0].host_id
    rows = client.get("/api/pools/gpus/", {"host": host_id}).json()
    rows = rows.get("results", rows)
    rails = {g["index"]: (g["rail_device"], (g["rail"] or {}).get("description")) for g in rows}
    assert rails == {0: ("mlx5_0", f"{victim} mlx5_0"), 1: ("mlx5_1", ca), 2: ("mlx5_0", f"{victim} mlx5_0"),
                     3: ("mlx5_1", ca)}  # fmt: skip
    page = client.get(reverse("pools:host", args=[host_id])).content.decode()
    assert page.count(f'href="{reverse("fabric:node", args=[back.pk])}"') >= 2  # GPU1 and GPU3

"""The cost of a port list does not grow per row beyond the rows themselves: DRF fields are built
once per request (not per row for the nested link and remote end) and URLs are not resolved by
``reverse()`` per row. Counted, not timed (a timed assertion would flake on a loaded machine);
``bench/api_lists.py`` measures the time."""

from __future__ import annotations

import pytest
from rest_framework import serializers

from fabric.models import Fabric, Link, Node, Port

pytestmark = pytest.mark.django_db


@pytest.fixture
def star(db) -> Fabric:
    """One 40-port switch, each port cabled to a CA."""
    fabric = Fabric.objects.create(name="star")
    switch = Node.objects.create(fabric=fabric, node_guid="0x0000000000000100", node_type="switch",
                                 description="leaf01", lid=1, num_ports=40)  # fmt: skip
    for i in range(1, 41):
        ca = Node.objects.create(fabric=fabric, node_guid=f"0x{0x1000 + i:016x}", node_type="ca",
                                 description=f"host{i:02d} mlx5_0", num_ports=1)  # fmt: skip
        a = Port.objects.create(node=switch, port_num=i, state=4, width="4x", speed="HDR", rate_gbps=200.0)
        b = Port.objects.create(node=ca, port_num=1, lid=100 + i, state=4, port_guid=f"0x{0x1000 + i:016x}")
        Link.objects.create(fabric=fabric, port_a=a, port_b=b, width="4x", speed="HDR", rate_gbps=200.0)
    return fabric


def _costs(client, monkeypatch, limit: int) -> tuple[int, int, dict]:
    """``(URL resolutions, serializer field builds, JSON)`` of one port list page."""
    from rest_framework import reverse as drf_reverse

    counts = {"reverse": 0, "get_fields": 0}
    real_reverse = drf_reverse.django_reverse
    real_get_fields = serializers.ModelSerializer.get_fields

    def counting_reverse(*args, **kwargs):
        counts["reverse"] += 1
        return real_reverse(*args, **kwargs)

    def counting_get_fields(self):
        counts["get_fields"] += 1
        return real_get_fields(self)

    monkeypatch.setattr(drf_reverse, "django_reverse", counting_reverse)
    monkeypatch.setattr(serializers.ModelSerializer, "get_fields", counting_get_fields)
    resp = client.get("/api/fabric/ports/", {"limit": limit, "ordering": "id"})
    monkeypatch.undo()
    assert resp.status_code == 200
    return counts["reverse"], counts["get_fields"], resp.json()


def test_port_list_cost_does_not_grow_with_rows(star, client_for, monkeypatch):
    client = client_for("viewer")
    rev_few, fields_few, few = _costs(client, monkeypatch, 5)
    rev_many, fields_many, many = _costs(client, monkeypatch, 50)
    assert len(few["results"]) == 5 and len(many["results"]) == 50
    assert many["results"][:5] == few["results"]  # same rows, same JSON
    assert (rev_many, fields_many) == (rev_few, fields_few)
    # and the rows are what they were: a linked port's link and remote end, in brief form
    row = next(r for r in many["results"] if r["node"]["description"] == "leaf01" and r["port_num"] == 3)
    assert row["url"].endswith(f"/api/fabric/ports/{row['id']}/")
    assert row["node"]["url"].endswith(f"/api/fabric/nodes/{row['node']['id']}/")
    assert (
        row["remote"]["display"] == "host03 mlx5_0 [1]"
        and row["remote"]["node"]["description"] == "host03 mlx5_0"
    )
    assert row["remote"]["url"].endswith(f"/api/fabric/ports/{row['remote']['id']}/")
    assert row["link"]["url"].endswith(f"/api/fabric/links/{row['link']['id']}/")
    assert (row["link"]["port_a"], row["link"]["port_b"]) == (row["id"], row["remote"]["id"])

"""Switch roles (``fabric.services.roles``) and the fabric role field."""

from __future__ import annotations

import pytest

from accounts.models import AuditEntry
from fabric.models import Node
from fabric.services.ingest import import_topology_text
from fabric.services.roles import RoleError, set_switch_roles
from tests.support.topologies import BASE


@pytest.fixture
def fabric(db, committed_signals):
    return import_topology_text("f", BASE, filename="base.topo").fabric


def test_set_switch_roles_by_name_and_guid_audited(fabric):
    spine = Node.objects.get(fabric=fabric, description="spine-1")
    result = set_switch_roles(fabric, ["leaf-2", spine.node_guid], "management")
    assert result == {"fabric": "f", "role": "management", "switches": 2, "changed": 2}
    assert set(Node.objects.filter(fabric=fabric, role="management").values_list("description", flat=True)) == {
        "leaf-2", "spine-1"}  # fmt: skip
    entry = AuditEntry.objects.get(action="fabric.switch_roles")
    assert entry.changes["changed"] == 2 and spine.node_guid in entry.changes["switches"]
    assert set_switch_roles(fabric, ["leaf-2"], "management")["changed"] == 0
    # a rediscovery keeps it; new nodes get compute from the database default
    import_topology_text("f", BASE.replace('"leaf-2"', '"leaf-two"'), filename="again.topo")
    assert Node.objects.get(fabric=fabric, description="leaf-two").role == "management"
    assert Node.objects.filter(fabric=fabric, node_type="ca", role="compute").count() == 3


@pytest.mark.parametrize(
    "switches,role,message",
    [(["leaf-1"], "archive", "unknown role"), (["nope", "leaf-1"], "storage", "named 'nope'"),
     (["host001 mlx5_0"], "storage", "named"), ([" "], "storage", "at least one")],
)  # fmt: skip
def test_bad_roles_change_nothing(fabric, switches, role, message):
    with pytest.raises(RoleError, match=message):
        set_switch_roles(fabric, switches, role)
    assert not Node.objects.exclude(role="compute").exists()


def test_api_switch_roles_and_fabric_role(fabric, admin):
    resp = admin.post(f"/api/fabric/fabrics/{fabric.pk}/switch-roles/", {"role": "storage", "switches": ["nope"]},
                      format="json")  # fmt: skip
    assert resp.status_code == 400 and "nope" in resp.json()["switches"][0]
    resp = admin.patch(f"/api/fabric/fabrics/{fabric.pk}/", {"role": "storage"}, format="json")
    assert resp.status_code == 200 and resp.json()["role"] == "storage"
    node = admin.get(f"/api/fabric/nodes/?fabric={fabric.pk}&name=leaf-1").json()["results"][0]
    assert node["role"] == "compute"

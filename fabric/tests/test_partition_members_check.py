"""A partition member GUID is checked against the fabric (issue 23 §3): a CA port GUID is taken, a
node GUID is refused naming the node's port GUIDs (Weft API, UFM API, import), a GUID the fabric
does not have (an SR-IOV virtual function's) is taken and reported ``unverified: not in fabric``,
and the partition's state then says "applied to N of M members, K not verifiable", never plain
"applied" (``fabric.services.partitions.opensm.record_outcome``)."""

from __future__ import annotations

import pytest

from fabric.choices import ApplyState
from fabric.models import Fabric, Partition
from fabric.parsers.partitions import PartitionsParseError
from fabric.services.partitions import (
    PartitionError,
    add_members,
    import_partitions,
    save_partition,
    set_members,
)
from fabric.services.partitions.opensm import ApplyResult, record_outcome
from tests.support.member_guids import NODE, PORT1, PORT2, VF, one_ca_fabric


@pytest.fixture
def fabric(db) -> Fabric:
    return one_ca_fabric()


def test_a_node_guid_is_refused_naming_its_ports_a_port_and_an_unknown_guid_are_taken(fabric):
    part = save_partition(Partition(fabric=fabric, name="tenant_a", pkey=0x0A01))
    for call in (
        lambda: set_members(part, [NODE]),
        lambda: add_members(part, [PORT1, "0x" + NODE[2:].upper()]),
    ):
        with pytest.raises(PartitionError) as err:
            call()
        assert err.value.field == "members"
        assert f"member {NODE} is the node GUID of gpu01 mlx5_0" in str(err.value)
        assert f"{PORT1}, {PORT2}" in str(err.value)
    assert not part.members.exists()  # nothing half-written
    change = add_members(part, [PORT1, VF])
    assert sorted(change.added) == [PORT1, VF]


def test_import_refuses_a_node_guid_at_its_line(fabric):
    text = f"Default=0x7fff : ALL=full ;\nstorage=0x0b00 :\n  {PORT1}=full,\n  {NODE}=full ;\n"
    with pytest.raises(PartitionsParseError) as err:
        import_partitions(fabric, text, source="site.conf")
    assert (err.value.line, err.value.source) == (4, "site.conf")
    assert f"its port GUID(s): {PORT1}, {PORT2}" in err.value.message
    assert not Partition.objects.filter(fabric=fabric).exists()


def test_members_not_in_the_fabric_make_the_state_partial_never_plain_applied(fabric):
    part = save_partition(Partition(fabric=fabric, name="tenant_a", pkey=0x0A01))
    set_members(part, [PORT1, PORT2, VF, "0x0000000000000abc"])
    whole = save_partition(Partition(fabric=fabric, name="tenant_b", pkey=0x0A02))
    set_members(whole, [PORT2])
    parts = list(
        Partition.objects.filter(pk__in=[part.pk, whole.pk]).prefetch_related("members").order_by("pkey")
    )
    record_outcome(fabric, parts, ApplyResult(fabric=fabric.name, ok=True, sha256="ab" * 32), None)
    part.refresh_from_db()
    whole.refresh_from_db()
    assert part.applied_state == ApplyState.PARTIAL
    assert part.applied_members["not_in_fabric"] == ["0x0000000000000abc", VF]
    assert part.applied_status == "applied to 2 of 4 members, 2 not verifiable"
    assert (whole.applied_state, whole.applied_status) == (ApplyState.APPLIED, "applied to 1 of 1 members")


def test_the_api_says_which_member_is_unverified_and_refuses_a_node_guid(fabric, client_for):
    admin = client_for("admin")
    part = save_partition(Partition(fabric=fabric, name="tenant_a", pkey=0x0A01))
    url = f"/api/fabric/partitions/{part.pk}/members/"
    bad = admin.put(url, {"members": [{"guid": NODE}]}, format="json")
    assert bad.status_code == 400 and NODE in bad.json()["members"][0] and PORT2 in bad.json()["members"][0]
    ok = admin.put(url, {"members": [{"guid": PORT1}, {"guid": VF}]}, format="json")
    assert ok.status_code == 200 and ok.json()["added"] == 2
    rows = {m["port_guid"]: m["verification"] for m in admin.get(url).json()}
    assert rows == {PORT1: "in fabric", VF: "unverified: not in fabric"}

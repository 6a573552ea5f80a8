"""UFM's pkeys endpoints check member GUIDs against the fabric (issue 23 §3): UFM documents
``guids`` as "List of port GUIDs" and translates nothing, so a node GUID is a 400 that names it
and its port GUIDs; a GUID the fabric does not have (an SR-IOV VF's) is taken."""

from __future__ import annotations

import json

import pytest

from fabric.choices import NodeType
from fabric.models import Fabric, Node, Partition, Port

NODE = "0x0002c90300001000"  # a CA's node GUID
PORT1, PORT2 = "0x0002c90300001001", "0x0002c90300001002"
VF = "0xdeadbeefdeadbeef"  # not in the fabric (a VF GUID, or made up)


@pytest.fixture
def fabric(db) -> Fabric:
    fabric = Fabric.objects.create(name="site")
    node = Node.objects.create(fabric=fabric, node_guid=NODE, node_type=NodeType.CA, name="gpu01 mlx5_0",
                               num_ports=2)  # fmt: skip
    Port.objects.create(node=node, port_num=1, port_guid=PORT1, lid=10)
    Port.objects.create(node=node, port_num=2, port_guid=PORT2, lid=11)
    return fabric


def test_ufm_pkeys_refuse_a_node_guid_with_a_400_naming_it(fabric, ufm):
    admin = ufm("admin")
    resp = admin.post(
        "/ufmRest/resources/pkeys/",
        json.dumps({"pkey": "0x0a05", "guids": [NODE[2:]], "membership": "full"}),
        content_type="application/json",
    )
    assert resp.status_code == 400, resp.content
    assert NODE in resp.content.decode() and PORT1 in resp.content.decode()
    assert not Partition.objects.filter(fabric=fabric, pkey=0x0A05).exists()
    resp = admin.post(
        "/ufmRest/resources/pkeys/",
        json.dumps({"pkey": "0x0a05", "guids": [VF[2:], PORT1[2:]]}),
        content_type="application/json",
    )
    assert resp.status_code == 200, resp.content
    assert sorted(
        Partition.objects.get(fabric=fabric, pkey=0x0A05).members.values_list("port_guid", flat=True)
    ) == [
        PORT1,
        VF,
    ]

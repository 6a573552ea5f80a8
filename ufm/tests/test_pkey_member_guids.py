"""UFM's pkeys endpoints check member GUIDs against the fabric (issue 23 §3): UFM documents
``guids`` as "List of port GUIDs" and translates nothing, so a node GUID is a 400 that names it
and its port GUIDs; a GUID the fabric does not have (an SR-IOV VF's) is taken."""

from __future__ import annotations

import json

import pytest

from fabric.models import Fabric, Partition
from tests.support.member_guids import NODE, PORT1, VF, one_ca_fabric


@pytest.fixture
def fabric(db) -> Fabric:
    return one_ca_fabric()


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

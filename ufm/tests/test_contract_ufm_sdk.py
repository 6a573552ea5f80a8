"""Contract: the UFM SDK's PKey script (``Mellanox/ufm_sdk_3.0`` ``scripts/ufm_pkeys/ufm_pkeys.py``)
and its REST client (``utils/ufm_rest_client.py``), replayed against Weft.

``UfmRestClient.send_request`` builds ``<protocol>://<host>/<api_prefix>/<url>``: ``ufmRest``
with ``requests``' HTTP Basic, or ``ufmRestV3`` with ``Authorization: Basic <token>`` once a token
is configured; bodies go as ``json=payload`` (``application/json``; a DELETE sends ``{}`` too) and
``raise_for_status`` makes any 4xx/5xx an error. ``generate_token`` posts ``app/tokens`` and reads
``access_token``; ``get_links`` asks ``resources/links?page_number=1&rpp=1000000000`` and reads
``["data"]``. The PKey script:

* ``--set_pkey``: ``PUT resources/pkeys`` ``{"guids", "pkey", "index0", "ip_over_ib"}`` plus
  ``"memberships": [...]`` when given, else ``"membership"`` (default ``"full"``);
* ``--get_pkeys`` / ``--get_pkey=P``: ``GET resources/pkeys?guids_data=true`` /
  ``resources/pkeys/P?guids_data=true``;
* ``--delete_pkey=P``: ``DELETE resources/pkeys/P``, 200 removed, 404 "is not found".
"""

from __future__ import annotations

import json

import pytest
from django.test import Client

from fabric.models import Partition, Port

from .conftest import basic

pytestmark = pytest.mark.django_db


class SdkClient:
    """``UfmRestClient`` with the Django test client as ``requests``."""

    def __init__(self, username: str | None = None, password: str | None = None, token: str | None = None):
        if token:
            self.prefix, auth = "ufmRestV3", f"Basic {token}"
        else:
            self.prefix, auth = "ufmRest", basic(username, password)
        self.http = Client(HTTP_AUTHORIZATION=auth, HTTP_USER_AGENT="python-requests/2.32.3")

    def send(self, url: str, method: str = "GET", payload: dict | None = None):
        path = f"/{self.prefix}/{url}"
        if method == "GET":
            return self.http.get(path)
        return getattr(self.http, method.lower())(
            path, json.dumps(payload or {}), content_type="application/json"
        )


def set_pkey(client, pkey, guids, memberships=None, membership="full", index0=False, ip_over_ib=True):
    payload = {"guids": guids, "pkey": pkey, "index0": index0, "ip_over_ib": ip_over_ib}
    if memberships:
        payload["memberships"] = memberships
    else:
        payload["membership"] = membership
    return client.send("resources/pkeys", "PUT", payload)


def test_set_get_delete_pkey_with_basic_auth(fat_tree, users):
    sdk = SdkClient("ada", "pw-ada")
    guids = sorted(
        g[2:] for g in Port.objects.filter(node__node_type="ca").values_list("port_guid", flat=True)
    )[:3]
    resp = set_pkey(sdk, "0x0a", guids, memberships=["full", "limited", "full"], index0=True)
    assert resp.status_code == 200
    members = dict(Partition.objects.get(pkey=0xA).members.values_list("port_guid", "membership"))
    assert members == {"0x" + guids[0]: "full", "0x" + guids[1]: "limited", "0x" + guids[2]: "full"}

    everything = sdk.send("resources/pkeys?guids_data=true")
    assert everything.status_code == 200 and set(everything.json()) == {"0x7fff", "0xa"}
    one = sdk.send("resources/pkeys/0x0a?guids_data=true").json()
    assert [(g["guid"], g["membership"], g["index0"]) for g in one["guids"]] == [
        (guids[0], "full", True), (guids[1], "limited", True), (guids[2], "full", True),
    ]  # fmt: skip

    # memberships must be as long as guids: the script's rule, a 400 naming the field
    bad = set_pkey(sdk, "0x0b", guids, memberships=["full"])
    assert bad.status_code == 400 and bad.json()["field"] == "memberships"

    assert sdk.send("resources/pkeys/0x0a", "DELETE").status_code == 200
    assert sdk.send("resources/pkeys/0x0a", "DELETE").status_code == 404
    assert not Partition.objects.filter(pkey=0xA).exists()


def test_token_then_ufmrestv3_and_the_inventory_calls(fat_tree, users):
    token = SdkClient("ada", "pw-ada").send("app/tokens", "POST").json().get("access_token")
    assert token and len(token) == 40
    sdk = SdkClient(token=token)
    systems = sdk.send("resources/systems").json()
    assert len(systems) == 11  # 5 switches + 6 hosts
    links = sdk.send("resources/links?page_number=1&rpp=1000000000").json().get("data")
    assert len(links) == 12
    ports = sdk.send("resources/ports").json()
    assert len(ports) == sum(len(s["ports"]) for s in systems)
    host = next(p for p in ports if p["description"] == "Computer IB Port")
    assert set_pkey(sdk, "0x0c", [host["guid"]], membership="limited").status_code == 200
    assert list(Partition.objects.get(pkey=0xC).members.values_list("port_guid", "membership")) == [
        ("0x" + host["guid"], "limited")
    ]

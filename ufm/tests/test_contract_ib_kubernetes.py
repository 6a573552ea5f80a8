"""Contract: ib-kubernetes' UFM plugin (``Mellanox/ib-kubernetes`` ``pkg/sm/plugins/ufm/ufm.go``,
HTTP through ``pkg/drivers/http/client.go``), replayed against Weft.

Every request carries HTTP Basic (``UFM_USERNAME``/``UFM_PASSWORD``) and ``Content-Type:
application/json; charset=utf-8``, and any status but the one expected (200) is an error.

* ``Validate``: ``GET /ufmRest/app/ufm_version``.
* ``AddGuidsToPKey``: ``POST /ufmRest/resources/pkeys`` with the body built by
  ``fmt.Sprintf(`{"pkey": "0x%04X", "index0": true, "ip_over_ib": true, "membership": "full",
  "guids": [%v]}`)``: the PKey in four upper-case hex digits, each GUID ``net.HardwareAddr``
  printed without its colons (16 lower-case hex digits).
* ``RemoveGuidsFromPKey``: ``POST /ufmRest/actions/remove_guids_from_pkey`` ``{"pkey":
  "0x%04X", "guids": [...]}``.
* ``ListGuidsInUse``: ``GET /ufmRest/resources/pkeys/?guids_data=true`` (with the slash), decoded
  into ``map[string]PKey{Guids []GUID{GUIDValue string "guid"}}``; each GUID gets a colon every
  two characters (``convertToMacAddr``) and maps to its PKey's key.
"""

from __future__ import annotations

import pytest
from django.test import Client

from fabric.models import Partition, Port
from tests.support.typed_json import go_decode

from .conftest import basic

pytestmark = pytest.mark.django_db

GUID = {"guid": str}
PKEY = {"guids": [GUID]}


@pytest.fixture
def plugin(users):
    """The plugin's HTTP client: Basic auth and its Content-Type on every request (an Admin's
    account, as a site configures ``UFM_USERNAME``)."""
    return Client(HTTP_AUTHORIZATION=basic("ada", "pw-ada"), HTTP_USER_AGENT="Go-http-client/1.1")


def send(client, method: str, path: str, body: str = ""):
    return getattr(client, method)(path, body, content_type="application/json; charset=utf-8")


def hardware_addr(guid: str) -> str:
    """A stored GUID as Go's ``net.HardwareAddr.String()`` prints it: ``1c:34:da:...``."""
    digits = guid[2:]
    return ":".join(digits[i : i + 2] for i in range(0, 16, 2))


def guid_to_string(addr: str) -> str:
    """ib-kubernetes ``GUIDToString``: the colons removed."""
    return addr.replace(":", "")


def convert_to_mac_addr(guid: str) -> str:
    """ib-kubernetes ``convertToMacAddr``: a colon every two characters."""
    return ":".join(guid[i : i + 2] for i in range(0, len(guid), 2))


def list_guids_in_use(client) -> dict[str, str]:
    resp = send(client, "get", "/ufmRest/resources/pkeys/?guids_data=true")
    assert resp.status_code == 200
    pkeys = go_decode(resp.json(), {"map": PKEY})
    return {convert_to_mac_addr(g["guid"]): key for key, p in pkeys.items() for g in (p["guids"] or [])}


def test_validate_add_list_remove(fat_tree, plugin):
    assert send(plugin, "get", "/ufmRest/app/ufm_version").status_code == 200

    pods = [hardware_addr(g) for g in Port.objects.filter(node__host__name__in=["host001", "host004"])
            .order_by("port_guid").values_list("port_guid", flat=True)]  # fmt: skip
    guids = ",".join(f'"{guid_to_string(a)}"' for a in pods)
    body = f'{{"pkey": "0x{0x1A:04X}", "index0": true, "ip_over_ib": true, "membership": "full", "guids": [{guids}]}}'
    assert body.startswith('{"pkey": "0x001A"')
    resp = send(plugin, "post", "/ufmRest/resources/pkeys", body)
    assert resp.status_code == 200, resp.content  # exactly 200: 201 would be an error to the plugin
    part = Partition.objects.get(pkey=0x1A)
    assert (part.indx0, part.ipoib, part.members.count()) == (True, True, 2)

    in_use = list_guids_in_use(plugin)
    assert in_use == {pods[0]: "0x1a", pods[1]: "0x1a"}
    # adding again is idempotent (the daemon retries)
    assert send(plugin, "post", "/ufmRest/resources/pkeys", body).status_code == 200
    assert part.members.count() == 2

    body = f'{{"pkey": "0x{0x1A:04X}", "guids": ["{guid_to_string(pods[0])}"]}}'
    assert send(plugin, "post", "/ufmRest/actions/remove_guids_from_pkey", body).status_code == 200
    assert list_guids_in_use(plugin) == {pods[1]: "0x1a"}
    # removing a GUID that is no member (a pod deleted twice) is still 200
    assert send(plugin, "post", "/ufmRest/actions/remove_guids_from_pkey", body).status_code == 200


def test_bad_credentials_and_a_pkey_the_plugin_never_sends(fat_tree, users):
    wrong = Client(HTTP_AUTHORIZATION=basic("ada", "nope"))
    assert send(wrong, "get", "/ufmRest/app/ufm_version").status_code == 401
    admin = Client(HTTP_AUTHORIZATION=basic("ada", "pw-ada"))
    body = '{"pkey": "0xFFFF", "index0": true, "ip_over_ib": true, "membership": "full", "guids": []}'
    resp = send(admin, "post", "/ufmRest/resources/pkeys", body)
    assert resp.status_code == 400 and resp.json()["field"] == "pkey"

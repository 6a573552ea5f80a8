"""Contract: NVIDIA Carbide's UFM client (``NVIDIA/bare-metal-manager-core``
``crates/api/src/ib/ufmclient/mod.rs``, HTTP in ``crates/api/src/ib/ufmclient/rest.rs``), replayed
against Weft.

With a token Carbide talks to ``/ufmRestV3`` and sends ``Authorization: Basic <token>`` (the token
itself), ``Content-Type: application/json`` and its ``User-Agent`` on every request, bodies made by
``serde_json``; only 200 and 201 are success, and a GET answering exactly ``{}`` is "not found"
(which lets its partition state machine finish a deletion). Answers are decoded with serde
(``#[derive(Deserialize)]``): every field required unless ``Option``/``default``, integers in
their Rust types, ``PortMembership`` lowercase. PKey keys are parsed by
``PartitionKey::try_from(String)``: lower-cased, ``0x`` hex, else decimal.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client

from accounts.tokens import create_token
from fabric.models import Partition, Port
from tests.support.typed_json import DecodeError, Enum, Opt, serde_decode

pytestmark = pytest.mark.django_db

U8, U16, I32 = ("int", 0, 255), ("int", 0, 65535), ("int", -(1 << 31), (1 << 31) - 1)
MEMBERSHIP = Enum(("limited", "full"))
SM_CONFIG = {"subnet_prefix": str, "m_key": str, "sm_key": str, "sa_key": str, "m_key_per_port": bool}
QOS = {"mtu_limit": U16, "service_level": U8, "rate_limit": float}
PORT_CONFIG = {"guid": str, "index0": bool, "membership": MEMBERSHIP}
PARTITION_DATA = {
    "partition": str,
    "ip_over_ib": bool,
    "qos_conf": Opt(QOS),
    "guids": Opt([PORT_CONFIG], default=[]),
    "membership": Opt(MEMBERSHIP),
}
PORT = {"guid": str, "name": str, "systemID": str, "lid": I32, "dname": str, "system_name": str,
        "physical_state": str, "logical_state": str}  # fmt: skip
VERSION = {"ufm_release_version": str}


def partition_key(text: str) -> int:
    """``PartitionKey::try_from(String)``."""
    text = text.lower()
    value = int(text[2:], 16) if text.startswith("0x") else int(text, 10)
    assert 0 <= value <= 0xFFFF
    return value


def pkey_string(value: int) -> str:
    """``impl Display for PartitionKey``: ``0x`` and lower-case hex."""
    return f"0x{value:x}"


class Carbide:
    """Carbide's ``RestClient``: ``/ufmRestV3`` + the token, JSON bodies, 200/201 or an error,
    ``{}`` on a GET is not found."""

    def __init__(self, token: str):
        self.http = Client(HTTP_AUTHORIZATION=f"Basic {token}", HTTP_USER_AGENT="carbide-api")

    def _do(self, method: str, path: str, data: str = ""):
        resp = getattr(self.http, method)(
            "/ufmRestV3/" + path.strip("/"), data, content_type="application/json"
        )
        assert resp.status_code in (200, 201), (method, path, resp.status_code, resp.content)
        return resp

    def get(self, path: str, typ):
        body = self._do("get", path).content.decode()
        if body == "{}":
            return "NotFound"
        return serde_decode(json.loads(body), typ)

    def post(self, path: str, body: dict) -> None:
        self._do("post", path, json.dumps(body))

    def put(self, path: str, body: dict) -> None:
        self._do("put", path, json.dumps(body))


@pytest.fixture
def carbide(fat_tree, users):
    return Carbide(create_token(users["admin"], "carbide").key)


def test_sm_config_version_and_ports(carbide):
    assert carbide.get("/app/smconf", SM_CONFIG)["subnet_prefix"] == "0xfe80000000000000"
    assert carbide.get("/app/ufm_version", VERSION) == {"ufm_release_version": "6.19.0"}
    ports = carbide.get("/resources/ports?sys_type=Computer", [PORT])
    assert len(ports) == 6 and {p["system_name"] for p in ports} == {f"host00{i}" for i in range(1, 7)}
    stored = set(Port.objects.filter(node__node_type="ca").values_list("port_guid", flat=True))
    assert {"0x" + p["guid"] for p in ports} == stored
    # Carbide's filter_ports compares logical_state case-insensitively to its IBPortState names
    assert {p["logical_state"].lower() for p in ports} <= {"active", "down", "initialize", "armed", "unknown"}


def test_bind_list_qos_get_unbind(carbide):
    guids = sorted(p["guid"] for p in carbide.get("/resources/ports?sys_type=Computer", [PORT]))[:2]
    pkey = 0x31A
    carbide.post("/resources/pkeys", {"pkey": pkey_string(pkey), "ip_over_ib": True, "membership": "full",
                                      "index0": True, "guids": guids})  # fmt: skip

    by_guids = carbide.get("/resources/pkeys?guids_data=true", {"map": PARTITION_DATA})
    parts = {partition_key(k): v for k, v in by_guids.items()}
    assert set(parts) == {0x7FFF, pkey}
    assert sorted(g["guid"] for g in parts[pkey]["guids"]) == guids
    assert {(g["membership"], g["index0"]) for g in parts[pkey]["guids"]} == {("full", True)}
    assert parts[0x7FFF]["membership"] == "full"  # the default partition's, as UFM >= 6.19 gives it

    by_qos = carbide.get("/resources/pkeys?qos_conf=true", {"map": PARTITION_DATA})
    assert {partition_key(k): v["qos_conf"] for k, v in by_qos.items()}[pkey] == {
        "mtu_limit": 2, "service_level": 0, "rate_limit": 10.0,
    }  # fmt: skip

    carbide.put("/resources/pkeys/qos_conf", {"pkey": pkey_string(pkey), "mtu_limit": 4, "service_level": 0,
                                              "rate_limit": 200.0})  # fmt: skip
    one = carbide.get(f"/resources/pkeys/{pkey_string(pkey)}?guids_data=true&qos_conf=true", PARTITION_DATA)
    assert one["partition"] == "api_pkey_0x31a" and one["qos_conf"] == {"mtu_limit": 4, "service_level": 0,
                                                                        "rate_limit": 200.0}  # fmt: skip
    part = Partition.objects.get(pkey=pkey)
    assert (part.mtu, part.rate) == (5, 17)  # 4096 bytes, 200 Gb/s as OpenSM's codes

    carbide.post("/actions/remove_guids_from_pkey", {"pkey": pkey_string(pkey), "guids": guids[:1]})
    one = carbide.get(f"/resources/pkeys/{pkey_string(pkey)}?guids_data=true", PARTITION_DATA)
    assert [g["guid"] for g in one["guids"]] == guids[1:]
    # a PKey that does not exist is UFM's 200 "{}": Carbide's NotFound
    assert carbide.get("/resources/pkeys/0x31b?guids_data=true&qos_conf=true", PARTITION_DATA) == "NotFound"


def test_sdr_rate_and_the_older_clients_capitalised_membership(carbide):
    guid = carbide.get("/resources/ports?sys_type=Computer", [PORT])[0]["guid"]
    # an older Carbide serialised PortMembership without rename_all: "Full"
    carbide.post("/resources/pkeys", {"pkey": "0x2", "ip_over_ib": False, "membership": "Full", "index0": True,
                                      "guids": [guid]})  # fmt: skip
    carbide.put(
        "/resources/pkeys/qos_conf", {"pkey": "0x2", "mtu_limit": 2, "service_level": 15, "rate_limit": 2.5}
    )
    one = carbide.get("/resources/pkeys/0x2?guids_data=true&qos_conf=true", PARTITION_DATA)
    assert one["qos_conf"] == {"mtu_limit": 2, "service_level": 15, "rate_limit": 2.5}
    assert one["ip_over_ib"] is False and one["guids"][0]["membership"] == "full"


def test_the_serde_decoder_refuses_what_carbide_refuses():
    with pytest.raises(DecodeError, match="missing field `lid`"):
        serde_decode({k: "x" for k in PORT if k != "lid"}, PORT)
    with pytest.raises(DecodeError, match="invalid type: null"):
        serde_decode({**{k: "x" for k in PORT}, "lid": None}, PORT)
    with pytest.raises(DecodeError, match="unknown variant 'Full'"):
        serde_decode({"guid": "x", "index0": True, "membership": "Full"}, PORT_CONFIG)

"""Contract: the UFM Slurm plugin (``Mellanox/ufm_sdk_3.0`` ``plugins/SLURM-Integration``:
``ufm_slurm_utils.py``, prolog ``ufm_slurm_prolog.py``, epilog ``ufm_slurm_epilog.py``, values
from ``ufm_slurm.conf`` through ``ufm_slurm_base.py``), replayed against Weft.

A ``requests`` session with ``Content-Type: application/json; charset=utf-8`` and either
``session.auth`` (``auth_type=basic_auth``, paths under ``/ufmRest``) or ``Authorization: Basic
<token>`` (``token_auth``: ``ufmRest`` replaced by ``ufmRestV3`` in the path).

* ``IsUfmRunning``: ``GET /ufmRest/app/ufm_version``; running when 200 and the body is JSON.
* prolog ``_add_hosts_to_pkey``: ``POST /ufmRest/resources/pkeys/hosts`` with
  ``data=json.dumps({"hosts_names": SLURM_JOB_NODELIST, "pkey": pkey, "ip_over_ib": ip_over_ib,
  "index0": index0})``: the node list unexpanded (``gpu[01-04]``); ``pkey`` the configured one
  (static mode) or ``hex(job_id % 0x7ffe)`` (dynamic mode); ``ip_over_ib``/``index0`` the strings of
  the configuration file, or True/False when it leaves them empty.
* epilog ``_remove_hosts_from_pkey``: ``DELETE /ufmRest/resources/pkeys/{pkey}/hosts/{nodelist}``
  with the node list in the path as it is.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client

from accounts.tokens import create_token
from fabric.models import Partition, Port

from .conftest import basic

pytestmark = pytest.mark.django_db
SESSION_CT = "application/json; charset=utf-8"


class Plugin:
    """The plugin's ``UFM`` helper with its session."""

    def __init__(self, *, user: tuple[str, str] | None = None, token: str | None = None):
        self.token = token is not None
        auth = f"Basic {token}" if token else basic(*user)
        self.http = Client(HTTP_AUTHORIZATION=auth, HTTP_USER_AGENT="python-requests/2.32.3")

    def url(self, path: str) -> str:  # getUrl
        return path.replace("ufmRest", "ufmRestV3") if self.token else path

    def is_ufm_running(self) -> bool:
        resp = self.http.get(self.url("/ufmRest/app/ufm_version"))
        if not resp.content or resp.status_code != 200:
            return False
        json.loads(resp.content)
        return True

    def add_hosts_to_pkey(self, job_nodes: str, pkey: str, ip_over_ib, index0):
        body = json.dumps(
            {"hosts_names": job_nodes, "pkey": pkey, "ip_over_ib": ip_over_ib, "index0": index0}
        )
        return self.http.post(self.url("/ufmRest/resources/pkeys/hosts"), body, content_type=SESSION_CT)

    def remove_hosts_from_pkey(self, job_nodes: str, pkey: str):
        return self.http.delete(self.url(f"/ufmRest/resources/pkeys/{pkey}/hosts/{job_nodes}"))


def guids_of(*hosts: str) -> list[str]:
    return sorted(Port.objects.filter(node__host__name__in=hosts).values_list("port_guid", flat=True))


def members(pkey: int) -> list[str]:
    part = Partition.objects.filter(pkey=pkey).first()
    return sorted(part.members.values_list("port_guid", flat=True)) if part else []


def test_prolog_and_epilog_static_pkey_with_configuration_strings(fat_tree, users):
    plugin = Plugin(user=("ada", "pw-ada"))
    assert plugin.is_ufm_running()
    # ufm_slurm.conf: pkey=0x5, ip_over_ib=true, index0 left empty (-> False)
    resp = plugin.add_hosts_to_pkey("host[001-002],host005", "0x5", "true", False)
    assert resp.status_code == 200, resp.content
    assert members(5) == guids_of("host001", "host002", "host005")
    part = Partition.objects.get(pkey=5)
    assert (part.ipoib, part.indx0) == (True, False)

    second_job = plugin.add_hosts_to_pkey("host[003-004]", "0x5", True, "False")
    assert second_job.status_code == 200 and len(members(5)) == 5
    assert plugin.remove_hosts_from_pkey("host[001-002],host005", "0x5").status_code == 200
    assert members(5) == guids_of("host003", "host004")


def test_dynamic_pkey_per_job_with_a_token(fat_tree, users):
    token = create_token(users["admin"], "slurm").key
    plugin = Plugin(token=token)
    assert plugin.is_ufm_running()
    job_id = 123456
    pkey = hex(job_id % 0x7FFE or 1)  # the plugin's dynamic mode
    assert plugin.add_hosts_to_pkey("host[001-004]", pkey, True, False).status_code == 200
    assert members(int(pkey, 16)) == guids_of("host001", "host002", "host003", "host004")
    # the epilog's path, also as an HTTP library that percent-encodes the brackets sends it
    encoded = plugin.http.delete(f"/ufmRestV3/resources/pkeys/{pkey}/hosts/host%5B001-002%5D")
    assert encoded.status_code == 200 and len(members(int(pkey, 16))) == 2
    assert plugin.remove_hosts_from_pkey("host[003-004]", pkey).status_code == 200
    assert members(int(pkey, 16)) == []


def test_a_job_with_hosts_off_the_fabric_and_bad_lists(fat_tree, users):
    plugin = Plugin(user=("ada", "pw-ada"))
    resp = plugin.add_hosts_to_pkey("host001,cpu[01-02]", "0x9", True, False)
    assert resp.status_code == 200 and resp.json()["unknown_hosts"] == ["cpu01", "cpu02"]
    assert members(9) == guids_of("host001")
    for nodes, why in [("cpu[01-02]", "no host of fabric ft"), ("host[001-", "unclosed")]:
        bad = plugin.add_hosts_to_pkey(nodes, "0x9", True, False)
        assert bad.status_code == 400 and why in bad.json()["error"] and bad.json()["field"] == "hosts_names"
    bad_pkey = plugin.add_hosts_to_pkey("host001", "", True, False)  # pkey= left empty in the file
    assert bad_pkey.status_code == 400 and bad_pkey.json()["field"] == "pkey"
    assert members(9) == guids_of("host001")

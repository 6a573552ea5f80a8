"""Node resolution by GUID, LID or description (``fabric.lookup``): one rule, shared by the API's
node search (``?q=``) and ``manage.py show_port``, with its edge cases."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from accounts.roles import set_role
from fabric.lookup import guid_of_text, lid_of_text, node_q
from fabric.models import Fabric, Node, Port


@pytest.mark.parametrize(
    "text, lid",
    [
        ("0", 0),
        ("7", 7),
        (" 65535 ", 0xFFFF),
        ("65536", None),  # beyond 16 bits
        ("1234567", None),
        ("0x7", None),
        ("²", None),  # a digit to str.isdigit(), not to int()
        ("-1", None),
        ("", None),
    ],
)
def test_lid_of_text(text, lid):
    assert lid_of_text(text) == lid


@pytest.mark.parametrize(
    "text, guid",
    [
        ("0x0002c90300a1b2c3", "0x0002c90300a1b2c3"),
        ("0x2c90300a1b2c3", "0x0002c90300a1b2c3"),  # unpadded
        ("0X2C90300A1B2C3", "0x0002c90300a1b2c3"),  # any case
        ("0002c90300a1b2c3", "0x0002c90300a1b2c3"),  # 16 digits without 0x (UFM)
        ("0xabc", "0x0000000000000abc"),  # with 0x any length from 1
        ("abcdef01", "0x00000000abcdef01"),  # without 0x from 8 digits
        ("12345678", "0x0000000012345678"),  # digits only: hexadecimal, never decimal
        ("1234567", None),  # 7 digits: too short without 0x
        ("abc", None),
        ("cafe", None),
        ("0x", None),
        ("0x00000000000000001", None),  # 17 digits: beyond 64 bits
        ("99999999999999999999", None),
        ("spine-1", None),
        ("", None),
    ],
)
def test_guid_of_text(text, guid):
    assert guid_of_text(text) == guid


@pytest.fixture
def nodes(db):
    fabric = Fabric.objects.create(name="f")
    switch = Node.objects.create(
        fabric=fabric, node_guid="0x0000000012345678", node_type="switch", description="leaf cafe", lid=90
    )
    Port.objects.create(node=switch, port_num=1)
    hca = Node.objects.create(
        fabric=fabric, node_guid="0x0002c90300a1b2c3", node_type="ca", description="12345678"
    )
    Port.objects.create(node=hca, port_num=1, lid=91, port_guid="0x0002c90300a1b2c4")
    Port.objects.create(node=hca, port_num=2, lid=92, port_guid="0x0002c90300a1b2c5")
    return {"switch": switch, "hca": hca}


def _search(text: str) -> set[str]:
    from django.contrib.auth import get_user_model

    user, _ = get_user_model().objects.get_or_create(username="viewer")
    set_role(user, "viewer")
    client = APIClient()
    client.force_login(user)
    resp = client.get("/api/fabric/nodes/", {"q": text})
    assert resp.status_code == 200, resp.content
    return {row["node_guid"] for row in resp.json()["results"]}


def _show_port(text: str) -> str:
    out = StringIO()
    call_command("show_port", text, "1", stdout=out)
    return out.getvalue().splitlines()[-1]


SWITCH, HCA = "0x0000000012345678", "0x0002c90300a1b2c3"


@pytest.mark.parametrize(
    "text, search, exact",
    [
        ("90", {SWITCH}, {SWITCH}),  # the switch's LID
        ("91", {HCA}, {HCA}),  # a port's LID
        ("92", {HCA}, {HCA}),  # the other port's LID: the node once, not per port
        ("0x12345678", {SWITCH}, {SWITCH}),
        ("12345678", {SWITCH, HCA}, {SWITCH, HCA}),  # the switch's GUID (hex) and the HCA's description
        ("0x2c90300a1b2c4", {HCA}, {HCA}),  # a port GUID names its node
        ("0002c90300a1b2c5", {HCA}, {HCA}),
        ("cafe", {SWITCH}, set()),  # a word: only the search's substring match
        ("leaf cafe", {SWITCH}, {SWITCH}),
        ("305419896", set(), set()),  # 0x12345678 in decimal is not a GUID
        ("65536", set(), set()),
    ],
)
def test_search_and_show_port_apply_the_same_rule(nodes, text, search, exact):
    assert _search(text) == search
    assert set(Node.objects.filter(node_q(text)).values_list("node_guid", flat=True)) == exact
    if len(exact) == 1:
        assert json.loads(_show_port(text))["node_guid"] == next(iter(exact))
    elif not exact:
        with pytest.raises(CommandError, match="no node"):
            _show_port(text)
    else:
        with pytest.raises(CommandError, match="matches several nodes"):
            _show_port(text)


def test_blank_search_lists_every_node(nodes):
    assert _search("  ") == {SWITCH, HCA}

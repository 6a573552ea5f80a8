"""Fabric.tool_env from the API may point the diags at a lab, never run other code on the server."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from accounts.roles import set_role
from fabric.collectors.tools import UMAD2SIM_LIB, check_tool_env
from fabric.models import Fabric


@pytest.fixture
def admin_client(db, django_user_model):
    user = django_user_model.objects.create_user("root-ish")
    set_role(user, "admin")
    client = APIClient()
    client.force_authenticate(user)
    return client


LAB_ENV = {"LD_PRELOAD": UMAD2SIM_LIB, "IBSIM_SOCKNAME": "weft-1-abc", "SIM_HOST": "H-0002c90300000001"}


def test_lab_environment_is_accepted(admin_client):
    fabric = Fabric.objects.create(name="lab")
    resp = admin_client.patch(f"/api/fabric/fabrics/{fabric.pk}/", {"tool_env": LAB_ENV}, format="json")
    assert resp.status_code == 200, resp.content
    fabric.refresh_from_db()
    assert fabric.tool_env == LAB_ENV and fabric.has_live_access


@pytest.mark.parametrize(
    "env, words",
    [
        ({"LD_PRELOAD": "/tmp/evil.so"}, "umad2sim library"),
        ({"PATH": "/tmp/bin"}, "not 'PATH'"),
        ({"PYTHONPATH": "/tmp"}, "not 'PYTHONPATH'"),
        ({"IBSIM_SOCKNAME": 5}, "strings"),
    ],
)
def test_other_variables_are_refused_and_nothing_is_stored(admin_client, env, words):
    fabric = Fabric.objects.create(name="lab", tool_env=LAB_ENV)
    resp = admin_client.patch(f"/api/fabric/fabrics/{fabric.pk}/", {"tool_env": env}, format="json")
    assert resp.status_code == 400
    assert words in resp.json()["tool_env"][0]
    fabric.refresh_from_db()
    assert fabric.tool_env == LAB_ENV


def test_check_tool_env_refuses_nul():
    with pytest.raises(ValueError, match="NUL"):
        check_tool_env({"SIM_HOST": "a\x00b"})
    assert check_tool_env({}) == {}

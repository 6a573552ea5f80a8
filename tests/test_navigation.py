"""The top navigation reaches every page a role may open (and only those)."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model

pytestmark = pytest.mark.django_db


def nav_links(client) -> list[str]:
    html = client.get("/alarms/").content.decode()
    nav = re.search(r'<nav id="nav">(.*?)</nav>', html, re.S)
    assert nav, html[:2000]
    return re.findall(r'href="([^"]+)"', nav.group(1))


def test_viewer_sees_every_page_a_viewer_may_open(client_for):
    client = client_for("viewer")
    links = nav_links(client)
    assert {"/fabric/", "/fabric/map/", "/heatmap/", "/alarms/", "/health/", "/events/", "/api/docs/"} <= set(
        links
    )
    assert not {"/event-policies/", "/fabric/import/", "/admin/"} & set(links)
    for url in links:  # none of them a dead end for this role
        assert client.get(url).status_code == 200, url


def test_admin_sees_policies_and_import_staff_sees_the_django_admin(client_for):
    assert {"/event-policies/", "/fabric/import/"} <= set(nav_links(client_for("admin")))
    assert "/admin/" not in nav_links(client_for("admin"))  # an Admin role without staff: no Django admin
    root = get_user_model().objects.create_superuser("root", "root@example.org", "x-long-password-1")
    client = client_for(root)
    links = nav_links(client)
    assert "/admin/" in links and client.get("/admin/").status_code == 200

"""Static files in production mode: ``collectstatic`` with the production settings writes a manifest,
and every HTML page (the login page first, a failed sign-in too) renders from it.

Before ``core.storage.StaticFilesStorage``, ``collectstatic`` stopped with ``MissingFileError`` on
the vendored graphology's ``sourceMappingURL``, wrote no manifest, and every page was a 500.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone

from accounts.roles import set_role

BASE_DIR = Path(__file__).resolve().parents[1]
PROD_STORAGE = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "core.storage.StaticFilesStorage"},
}


@pytest.fixture(scope="module")
def static_root(tmp_path_factory) -> Path:
    """``collectstatic --noinput`` run as the README says, with the production variables."""
    root = tmp_path_factory.mktemp("staticfiles")
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE",)}
    env.update(
        WEFT_PRODUCTION="1",
        SECRET_KEY=secrets.token_urlsafe(50),
        ALLOWED_HOSTS="weft.example.org",
        STATIC_ROOT=str(root),
        WEFT_DATA_DIR=str(tmp_path_factory.mktemp("data")),
    )
    proc = subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return root


def test_collectstatic_writes_a_manifest_with_the_vendored_libraries(static_root):
    manifest = json.loads((static_root / "staticfiles.json").read_text())["paths"]
    hashed = manifest["vendor/graphology/graphology.umd.min.js"]
    assert re.fullmatch(r"vendor/graphology/graphology\.umd\.min\.[0-9a-f]{12}\.js", hashed)
    assert (static_root / hashed).is_file()
    # The dangling map reference is kept as it was, not rewritten and not fatal.
    assert (static_root / hashed).read_text().rstrip().endswith("sourceMappingURL=graphology.umd.min.js.map")
    # CSS references are still rewritten to hashed names.
    assert "weft/weft.css" in manifest and manifest["weft/weft.css"] != "weft/weft.css"


def test_a_missing_css_reference_still_fails(tmp_path):
    """Only source maps are exempt: a stylesheet pointing at an absent image stays an error."""
    from whitenoise.storage import MissingFileError

    from core.storage import StaticFilesStorage

    (tmp_path / "a.css").write_text('body { background: url("missing.png"); }\n')
    storage = StaticFilesStorage(location=str(tmp_path), base_url="/static/")
    from django.core.files.storage import FileSystemStorage

    source = FileSystemStorage(location=str(tmp_path))
    with pytest.raises(MissingFileError, match="missing.png"):
        for _name, _hashed, processed in storage.post_process({"a.css": (source, "a.css")}):
            if isinstance(processed, Exception):
                raise processed


@pytest.fixture
def prod_client(static_root, db):
    """A client of the app whose ``{% static %}`` reads the production manifest (whitenoise serves
    the collected files, not the app folders)."""
    with override_settings(STORAGES=PROD_STORAGE, STATIC_ROOT=str(static_root), WHITENOISE_USE_FINDERS=False):
        yield Client()


def _assets(html: str) -> list[str]:
    return sorted(set(re.findall(r'(?:src|href)="(/static/[^"]+)"', html)))


def test_login_page_and_a_wrong_password_render_with_hashed_assets(prod_client):
    get_user_model().objects.create_user("ada", password="right-horse-battery")
    page = prod_client.get(reverse("accounts:login"))
    assert page.status_code == 200
    assets = _assets(page.content.decode())
    assert assets and all(re.search(r"\.[0-9a-f]{12}\.(css|js|svg)$", a) for a in assets), assets
    for url in assets:
        assert prod_client.get(url).status_code == 200, url
    wrong = prod_client.post(reverse("accounts:login"), {"username": "ada", "password": "wrong"})
    assert wrong.status_code == 200
    assert "Your user name and password didn't match" in wrong.content.decode()
    right = prod_client.post(
        reverse("accounts:login"), {"username": "ada", "password": "right-horse-battery"}
    )
    assert right.status_code == 302


def test_every_html_page_renders_in_production_mode(prod_client, tmp_path):
    from events.health import run_report
    from events.models import Alarm, EventPolicy
    from fabric.models import Fabric, Node, Port
    from fabric.services.ingest import import_topology_text
    from lab.netgen import two_switch_four_ca

    user = get_user_model().objects.create_user("ada", password="right-horse-battery")
    set_role(user, "admin")
    import_topology_text("lab", two_switch_four_ca(), filename="net.2sw2path4hca")
    fabric = Fabric.objects.get(name="lab")
    node = Node.objects.filter(fabric=fabric).first()
    port = Port.objects.filter(node__fabric=fabric, port_num__gte=1).first()
    report = run_report(fabric, user=user)
    now = timezone.now()
    alarm = Alarm.objects.create(
        fabric=fabric, code="link.down", object_key="k", severity="critical", first_seen=now, last_seen=now
    )
    prod_client.force_login(user)
    urls = [
        reverse("events:dashboard"),
        reverse("events:alarm_list"),
        reverse("events:alarm", args=[alarm.pk]),
        reverse("events:event_list"),
        reverse("events:healthreport_list"),
        reverse("events:healthreport", args=[report.pk]),
        reverse("events:eventpolicy_list"),
        reverse("events:eventpolicy", args=[EventPolicy.objects.first().pk]),
        reverse("fabric:fabric_list"),
        reverse("fabric:fabric", args=[fabric.pk]),
        reverse("fabric:map"),
        reverse("fabric:node", args=[node.pk]),
        reverse("fabric:port", args=[port.pk]),
        reverse("fabric:changes"),
        reverse("fabric:import"),
        reverse("telemetry:heatmap_index"),
        reverse("telemetry:heatmap", args=[fabric.pk]),
        reverse("swagger-ui"),
        reverse("redoc"),
        "/admin/",
    ]
    assets: set[str] = set()
    for url in urls:
        page = prod_client.get(url, follow=True)
        assert page.status_code == 200, url
        assert page["Content-Type"].startswith("text/html"), url
        assets.update(_assets(page.content.decode()))
    assert any("/vendor/graphology/" in a for a in assets)  # the map page uses the vendored library
    for url in sorted(assets):
        assert prod_client.get(url).status_code == 200, url

"""The pool list page: tenant-scoped rows and used / borrowed / free bars with the real numbers."""

from __future__ import annotations

import re

from pools.models import Pool, Tenant, TenantMembership
from pools.services.allocation import AllocationRequest, allocate
from pools.views import bar
from weft.testing.gpus import make_gpu_fabric


def test_bar_segments():
    b = bar({"gpus": 6, "borrowed_gpus": 2, "free_gpus": 100}, quota=10)
    assert [(s["name"], s["width"]) for s in b["segments"]] == [
        ("used", 120.0),
        ("borrowed", 60.0),
        ("free", 120.0),
    ]
    assert bar({"gpus": 0, "borrowed_gpus": 0, "free_gpus": 0}, quota=None)["scale"] == 1


def test_pool_list_scoped_with_bars(users, client_for):
    make_gpu_fabric("g", hosts=1, per_host=8)
    mine, theirs = Tenant.objects.create(name="mine"), Tenant.objects.create(name="theirs")
    TenantMembership.objects.create(tenant=mine, user=users["viewer"])
    p = Pool.objects.create(name="p-mine", tenant=mine, quota_gpus=6, guaranteed_gpus=2)
    Pool.objects.create(name="p-theirs", tenant=theirs)
    allocate(p.pk, AllocationRequest(count=3))
    html = client_for("viewer").get("/pools/").content.decode()
    assert "p-mine" in html and "p-theirs" not in html
    row = re.search(r'data-pool="p-mine" data-used="(\d+)" data-borrowed="(\d+)" data-free="(\d+)"', html)
    assert row.groups() == ("3", "1", "3")  # 3 held, 1 above the guarantee of 2, 3 more within quota 6
    admin_html = client_for("admin").get("/pools/").content.decode()
    assert "p-theirs" in admin_html

"""Pool pages (namespace ``pools``): the pool list with used / borrowed / free bars.

Tenant-scoped as the API (``pools.access``): a user sees the pools of their tenants and the
shared pools. Numbers come from the allocation service's reads (``pool_usage``, the free GPUs
the pool's filters match), the same as ``GET /api/pools/pools/``.
"""

from __future__ import annotations

from django.views.generic import ListView

from fabric.views import RoleRequiredMixin

from . import access
from .models import Pool
from .services.allocation import pool_summary

#: width of a bar, SVG user units (the page scales it)
BAR_WIDTH = 300


def bar(summary: dict, quota: int | None) -> dict:
    """Segments of a pool's bar, as SVG x/width: held within the guarantee, borrowed, and free
    to take now (free GPUs the pool matches, up to its quota). The scale is the quota, or what
    the pool could hold now when it has none."""
    used, borrowed = summary["gpus"], summary["borrowed_gpus"]
    free = summary["free_gpus"] if quota is None else max(0, min(summary["free_gpus"], quota - used))
    scale = max(quota if quota is not None else used + free, used + free, 1)
    widths = [(used - borrowed) * BAR_WIDTH / scale, borrowed * BAR_WIDTH / scale, free * BAR_WIDTH / scale]
    x, segs = 0.0, []
    for name, w in zip(("used", "borrowed", "free"), widths, strict=True):
        segs.append({"name": name, "x": round(x, 1), "width": round(w, 1)})
        x += w
    return {"segments": segs, "used": used, "borrowed": borrowed, "free": free, "scale": scale}


class PoolListView(RoleRequiredMixin, ListView):
    """Pools the user may see, with their quota, guarantee, PKey (and whether OpenSM applied it)
    and a used/borrowed/free bar."""

    template_name = "pools/pool_list.html"
    context_object_name = "pools"

    def get_queryset(self):
        return access.scope_pools(
            Pool.objects.select_related("tenant", "fabric", "partition"), self.request.user
        )

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        rows = []
        for pool in ctx["pools"]:
            summary = pool_summary(pool)
            rows.append({"pool": pool, "usage": summary, "bar": bar(summary, pool.quota_gpus)})
        ctx["rows"] = rows
        ctx["bar_width"] = BAR_WIDTH
        return ctx

"""Pool and host pages (namespace ``pools``): the pool list with used / borrowed / free bars, a
pool's page (bars, its allocations, its hosts highlighted on the fabric map, the history of what
it held), the GPU hosts and a host's page (GPUs, MIG slices, HCAs with the leaf each port is
cabled to, the allocations on it).

Tenant-scoped as the API (``pools.access``): a user sees the pools of their tenants and the
shared pools (another tenant's pool is a 404), and only their tenants' allocations, on pool and
host pages alike. A pool's numbers (bars, history) are the pool's, as ``GET /api/pools/pools/``
shows them: they come from the allocation service's reads (``pool_usage``, ``pool_summary``,
``eligible_gpus``).

Allocate and release from the pool page (what ``POST /api/pools/allocations/allocate/`` and
``…/<id>/release/`` allow, to the same users: the site Operator role and an operator membership
of the tenant, ``pools.access.allocation_tenant``/``can_operate``): the request is checked by the
API serializer (``pools.forms.AllocateForm``) and written by the allocation service
(``pools.services.allocation.allocate``/``release``, audited there); its refusals (quota, not
enough free GPUs) are shown as their messages, and the new allocation's hosts and
``CUDA_VISIBLE_DEVICES`` (``Allocation.environment``, the API's ``environment``) are shown.

The tenant list and the Admin's tenant and pool forms and deletes (what ``/api/pools/tenants/``
and ``/api/pools/pools/`` allow, to the same roles: Admin writes, others read their tenants):
the checks are the API serializers' (``pools.forms``), the writes ``pools.services.tenancy``
(the API's: audited in the same transaction; a delete refused with the service's message, 409).
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError
from django.db.models import Count, Min, Prefetch, Q
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.utils import timezone
from django.views import View
from django.views.generic import DetailView, FormView, ListView
from rest_framework.exceptions import ValidationError as DrfValidationError

from accounts.roles import Role, has_role
from core.params import int_param
from fabric.choices import NodeType
from fabric.models import Fabric, Host, Node, Port
from fabric.views import RoleRequiredMixin

from . import access
from .choices import HOLDING_STATES, AllocationKind, GpuState, MigMode
from .fabric_faults import host_fabric_faults
from .forms import AllocateForm, PoolForm, TenantForm
from .history import Span, usage_history
from .models import Allocation, AllocationItem, Gpu, HostInventory, MigSlice, Pool, Tenant
from .services import tenancy
from .services.allocation import (
    AllocationError,
    AllocationRequest,
    allocate,
    eligible_gpus,
    pool_summary,
    pool_usage,
    release,
)

#: width of a bar, SVG user units (the page scales it)
BAR_WIDTH = 300
#: history ranges the pool page offers (``?range=``; without one, :func:`fitting_range`)
HISTORY_RANGES = {
    "1h": timedelta(hours=1),
    "1d": timedelta(days=1),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}


def fitting_range(age: timedelta) -> str:
    """The history range a pool page opens on: the shortest of :data:`HISTORY_RANGES` that
    covers ``age`` (how far back the pool's history goes: its creation or its first allocation's
    start, whichever is earlier), the longest when none does. A pool made minutes ago opens on
    ``1h``, not on a week of nothing."""
    for name, span in sorted(HISTORY_RANGES.items(), key=lambda item: item[1]):
        if age <= span:
            return name
    return max(HISTORY_RANGES, key=HISTORY_RANGES.__getitem__)


#: allocations listed on a pool page: the newest active ones, then the latest ended ones
ACTIVE_SHOWN, ENDED_SHOWN = 200, 20


def bar_segments(used: int, borrowed: int, free: int, quota: int | None) -> dict:
    """Segments of a used / borrowed / free bar, as SVG x/width (user units of ``BAR_WIDTH``).

    ``used``: held now (the borrowed ones included); ``borrowed``: held above the guarantee;
    ``free``: free units the pool's filters match; ``quota``: hard cap (None: none). Shown:
    ``used - borrowed`` (within the guarantee), ``borrowed``, and free to take now (``free``, at
    most what the quota still allows). The scale is the quota, or what the pool could hold now
    when it has none (or holds more than its quota, after the quota was lowered). Returns
    ``{"segments": [{"name", "x", "width"}], "used", "borrowed", "free", "scale"}``.
    """
    borrowed = min(borrowed, used)
    free = free if quota is None else max(0, min(free, quota - used))
    scale = max(quota if quota is not None else 0, used + free, 1)
    widths = [(used - borrowed) * BAR_WIDTH / scale, borrowed * BAR_WIDTH / scale, free * BAR_WIDTH / scale]
    x, segs = 0.0, []
    for name, w in zip(("used", "borrowed", "free"), widths, strict=True):
        segs.append({"name": name, "x": round(x, 1), "width": round(w, 1)})
        x += w
    return {"segments": segs, "used": used, "borrowed": borrowed, "free": free, "scale": scale}


def bar(summary: dict, quota: int | None) -> dict:
    """The GPU bar of a pool from :func:`pools.services.allocation.pool_summary` (see
    :func:`bar_segments`)."""
    return bar_segments(summary["gpus"], summary["borrowed_gpus"], summary["free_gpus"], quota)


def pool_rows(pools) -> list[dict]:
    """``[{"pool", "usage", "bar"}]`` for the pool list and the dashboard: ``usage`` is
    :func:`pool_summary`, ``bar`` the pool's GPU bar."""
    rows = []
    for pool in pools:
        summary = pool_summary(pool)
        rows.append({"pool": pool, "usage": summary, "bar": bar(summary, pool.quota_gpus)})
    return rows


def visible_allocations(user):
    """Allocations of ``user``'s tenants (all for an Admin), with what the pages show of them."""
    return access.scope_allocations(
        Allocation.objects.select_related("pool", "tenant", "owner").prefetch_related(
            Prefetch("items", queryset=AllocationItem.objects.select_related("gpu__host", "mig_slice"))
        ),
        user,
    )


def placement(alloc: Allocation, host_id: int | None = None) -> list[dict]:
    """Where an allocation is (was): ``[{"host": Host, "units": ["GPU3", "GPU7 MIG 1g.10gb", …]}]``
    by host name, from its prefetched items (all of them: an ended allocation shows what it held).
    ``host_id``: only that host's units."""
    hosts: dict[int, dict] = {}
    for item in alloc.items.all():
        gpu = item.gpu
        if host_id is not None and gpu.host_id != host_id:
            continue
        unit = f"GPU{gpu.index}"
        if item.mig_slice_id:
            unit += f" MIG {item.mig_slice.profile or '?'} gi{item.mig_slice.gpu_instance_id}"
        elif item.kind == AllocationKind.FRACTION:
            unit += f" ({item.memory_mib} MiB, {item.compute_pct} %)"
        hosts.setdefault(gpu.host_id, {"host": gpu.host, "units": []})["units"].append(unit)
    return sorted(hosts.values(), key=lambda h: h["host"].name)


def pool_history(pool: Pool, since, until) -> dict:
    """:func:`pools.history.usage_history` of ``pool`` from its allocations' rows (every tenant's:
    the pool's total, as its bars); starts not yet reached and requests never started are left out."""
    allocs = (
        Allocation.objects.filter(pool=pool, started_at__isnull=False, started_at__lte=until)
        .filter(Q(ended_at__isnull=True) | Q(ended_at__gt=since))
        .annotate(
            whole=Count("items", filter=Q(items__kind=AllocationKind.GPU)),
            whole_borrowed=Count("items", filter=Q(items__kind=AllocationKind.GPU, items__borrowed=True)),
            slices=Count("items", filter=Q(items__kind=AllocationKind.MIG)),
        )
        .values_list("pk", "state", "started_at", "ended_at", "whole", "whole_borrowed", "slices")
    )
    rows = list(allocs)
    shared: dict[int, list[int]] = {}
    for alloc_id, gpu_id in AllocationItem.objects.filter(
        allocation_id__in=[r[0] for r in rows], kind=AllocationKind.FRACTION
    ).values_list("allocation_id", "gpu_id"):
        shared.setdefault(alloc_id, []).append(gpu_id)
    spans = []
    for pk, state, started, ended, whole, borrowed, slices in rows:
        # an ended allocation without an end time (never written so) held nothing measurable
        end = None if state in HOLDING_STATES else (ended or started)
        spans.append(Span(started, end, whole, borrowed, slices, tuple(shared.get(pk, ()))))
    return usage_history(spans, since, until)


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
        ctx["rows"] = pool_rows(ctx["pools"])
        ctx["bar_width"] = BAR_WIDTH
        return ctx


class PoolView(RoleRequiredMixin, DetailView):
    """One pool: configuration, GPU and MIG-slice bars, its allocations (the user's tenants'),
    its hosts on the fabric map, and what it held over time (``?range=1h|1d|7d|30d``; by default
    the shortest range covering the pool's history, :func:`fitting_range`)."""

    template_name = "pools/pool.html"
    context_object_name = "pool"

    def get_queryset(self):
        return access.scope_pools(
            Pool.objects.select_related("tenant", "fabric", "partition"), self.request.user
        )

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        pool, user = self.object, self.request.user
        usage = pool_summary(pool)
        free_slices = MigSlice.objects.allocatable().filter(gpu__in=eligible_gpus(pool)).count()
        ctx.update(
            usage=usage,
            bar_width=BAR_WIDTH,
            gpu_bar=bar(usage, pool.quota_gpus),
            slice_bar=bar_segments(usage["slices"], usage["borrowed_slices"], free_slices, pool.quota_slices),
        )
        allocs = visible_allocations(user).filter(pool=pool)
        holding = allocs.filter(state__in=HOLDING_STATES)
        ctx["active_count"] = holding.count()
        ctx["active"] = [{"a": a, "where": placement(a)} for a in holding.order_by("-id")[:ACTIVE_SHOWN]]
        ended = allocs.exclude(state__in=HOLDING_STATES).order_by("-ended_at", "-id")[:ENDED_SHOWN]
        ctx["ended"] = [{"a": a, "where": placement(a)} for a in ended]
        ctx.update(self._hosts(pool, holding))
        ctx.update(self._history(pool))
        ctx.update(self._allocate(pool, kwargs.get("allocate_form")))
        return ctx

    def _allocate(self, pool: Pool, form: AllocateForm | None) -> dict:
        """The "Allocate" form when the user may allocate in ``pool`` (for its tenant, or for one
        of theirs in a shared pool), the tenants whose allocations they may release, and the
        allocation ``?allocation=<id>`` names (one of this pool's the user sees) with its hosts'
        environment: the result of an allocation just made."""
        user = self.request.user
        operable = access.operator_tenant_ids(user)
        tenants = allocation_tenants(pool, operable)
        if form is None and tenants:
            form = AllocateForm(pool=pool, tenants=tenants)
        out = {"allocate_form": form, "operable": operable}
        alloc_id = int_param(self.request.GET.get("allocation"))
        if alloc_id is not None:
            result = visible_allocations(user).filter(pool=pool, pk=alloc_id).first()
            if result is not None:
                out["result"] = {"a": result, "where": placement(result), "env": result.environment()}
        return out

    def _hosts(self, pool: Pool, holding) -> dict:
        """The hosts of the user's tenants' active allocations, the fabric map to draw (the pool's
        fabric, else the one with most of those hosts) and its CA GUIDs to highlight."""
        per_host = dict(
            AllocationItem.objects.filter(active=True, allocation__in=holding)
            .values("gpu__host_id")
            .annotate(n=Count("gpu", distinct=True))
            .values_list("gpu__host_id", "n")
        )
        hosts = list(Host.objects.filter(pk__in=per_host).select_related("fabric"))
        for host in hosts:
            host.held_gpus = per_host[host.pk]
        hosts.sort(key=lambda h: (h.fabric.name, h.name))
        fabrics = Counter(h.fabric_id for h in hosts)
        fabric = pool.fabric if pool.fabric_id else None
        if fabric is None and fabrics:
            fabric = Fabric.objects.get(pk=fabrics.most_common(1)[0][0])
        out: dict = {"hosts": hosts, "map_fabric": fabric, "other_fabrics": []}
        if fabric is None:
            return out
        cas = Node.objects.filter(
            host__in=[h for h in hosts if h.fabric_id == fabric.pk], node_type=NodeType.CA
        )
        rows = list(cas.order_by("node_guid").values_list("node_guid", "host_id"))
        guids = [guid for guid, _ in rows]
        out["highlight"] = " ".join(guids)
        # the map counts the marked HCAs after the label: the label counts their hosts
        n_hosts = len({host_id for _, host_id in rows})
        out["highlight_label"] = f"HCAs of {pool.name} on {n_hosts} host{'' if n_hosts == 1 else 's'}"
        if guids:
            query = urlencode({"fabric": fabric.pk, "highlight": ",".join(guids)})
            out["map_page_url"] = f"{reverse('fabric:map')}?{query}"
        out["map_url"] = reverse("fabric-api:fabric-map", args=[fabric.pk])
        others = Fabric.objects.filter(pk__in=fabrics).exclude(pk=fabric.pk).order_by("name")
        out["other_fabrics"] = [{"fabric": f, "hosts": fabrics[f.pk]} for f in others]
        return out

    def _history(self, pool: Pool) -> dict:
        wanted = self.request.GET.get("range", "")
        until = timezone.now()
        if wanted in HISTORY_RANGES:
            name = wanted
        else:
            first = Allocation.objects.filter(pool=pool, started_at__isnull=False).aggregate(
                t=Min("started_at")
            )["t"]
            name = fitting_range(until - min(t for t in (pool.created, first) if t is not None))
        series = pool_history(pool, until - HISTORY_RANGES[name], until)
        series |= {"quota": pool.quota_gpus, "guaranteed": pool.guaranteed_gpus, "range": name}
        return {"history": series, "history_range": name, "history_ranges": list(HISTORY_RANGES)}


def allocation_tenants(pool: Pool, operable: set[int]) -> list[tuple[int, str]]:
    """``[(tenant id, name)]`` a user who may operate in ``operable`` tenants
    (``access.operator_tenant_ids``) may allocate for in ``pool``: its own tenant, or for a shared
    pool each of theirs (by name)."""
    ids = [pool.tenant_id] if pool.tenant_id is not None else operable
    ids = [i for i in ids if i in operable]
    return list(Tenant.objects.filter(pk__in=ids).order_by("name").values_list("pk", "name"))


class PoolAllocateView(PoolView):
    """POST: allocate in the pool from its page (the allocate API's rules: the Operator role and an
    operator membership of the tenant; another tenant's pool is a 404). Refusals re-render the
    page with the form and the message under its field: 400 (bad input), 403 (not an operator of
    the tenant), 409 (quota exceeded, not enough free); success: the pool page showing the new
    allocation (``?allocation=<id>``). GET: to the pool page's form, nothing allocated."""

    required_role = Role.OPERATOR

    def get(self, request, *args, **kwargs):
        pool = get_object_or_404(self.get_queryset(), pk=kwargs["pk"])
        return redirect(reverse("pools:pool", args=[pool.pk]) + "#allocate-form")

    def post(self, request, *args, **kwargs):
        self.object = pool = get_object_or_404(self.get_queryset(), pk=kwargs["pk"])
        tenants = allocation_tenants(pool, access.operator_tenant_ids(request.user))
        form = AllocateForm(request.POST, pool=pool, tenants=tenants)
        status = 400
        if form.is_valid():
            v = form.request_data
            try:
                tenant_id = access.allocation_tenant(request.user, pool, v["tenant"])
                req = AllocationRequest(
                    kind=v["kind"], count=v["count"], mig_profile=v["mig_profile"], memory_mib=v["memory_mib"],
                    compute_pct=v["compute_pct"], job=v["job"], lease_s=v["lease_s"],
                    tenant_id=tenant_id if pool.tenant_id is None else None,
                )  # fmt: skip
                alloc = allocate(pool.pk, req, user=request.user)
            except access.TenantRefused as exc:
                if exc.status == 404:
                    raise Http404(str(exc)) from None
                form.add_error("tenant" if "tenant" in form.fields else None, str(exc))
                status = exc.status
            except AllocationError as exc:
                field = exc.details.get("field")
                form.add_error(field if field in form.fields else None, str(exc))
                status = exc.status
            except Pool.DoesNotExist:
                raise Http404("the pool was deleted meanwhile") from None
            else:
                messages.success(
                    request, f"Allocation #{alloc.pk} made: its hosts and environment are below."
                )
                return redirect(
                    reverse("pools:pool", args=[pool.pk]) + f"?allocation={alloc.pk}#allocation-result"
                )
        ctx = self.get_context_data(object=pool, allocate_form=form)
        return self.render_to_response(ctx, status=status)


class ReleaseView(RoleRequiredMixin, View):
    """POST: release an allocation from its pool's page (the release API's rules: the Operator
    role and an operator membership of its tenant; another tenant's allocation is a 404), through
    the allocation service (audited there); back to the pool page with the outcome (an allocation
    already ended: its state, as the API's 409 says). GET: to the pool page."""

    required_role = Role.OPERATOR

    def _alloc(self, request, pk: int) -> Allocation:
        return get_object_or_404(access.scope_allocations(Allocation.objects.all(), request.user), pk=pk)

    def get(self, request, pk: int):
        return redirect(reverse("pools:pool", args=[self._alloc(request, pk).pool_id]))

    def post(self, request, pk: int):
        alloc = self._alloc(request, pk)
        back = reverse("pools:pool", args=[alloc.pool_id])
        if not access.can_operate(request.user, alloc.tenant_id):
            raise PermissionDenied("releasing needs an operator membership of the tenant")
        try:
            release(alloc.pk, user=request.user, reason=request.POST.get("reason", "").strip()[:200])
        except AllocationError as exc:
            messages.error(request, f"Allocation #{alloc.pk} not released: {exc}.")
            return redirect(back)
        except Allocation.DoesNotExist:
            raise Http404(f"allocation {pk} was deleted meanwhile") from None
        messages.success(request, f"Allocation #{alloc.pk} released: its GPUs are free.")
        return redirect(back + "#active-allocations")


class HostListView(RoleRequiredMixin, ListView):
    """Hosts of the fabrics (``?fabric=<id>``, ``?q=`` part of the name) with their GPUs: how many
    are present, free, held, and their models. A host with a fabric fault
    (``pools.fabric_faults``: an HCA link down, an HCA gone or unreachable) shows its free GPUs
    as not schedulable, and why."""

    template_name = "pools/host_list.html"
    context_object_name = "hosts"
    paginate_by = 100

    def get_queryset(self):
        present = Q(gpus__missing_since__isnull=True)
        qs = Host.objects.select_related("fabric").annotate(
            n_gpus=Count("gpus", filter=present, distinct=True),
            # a MIG-mode GPU is never free as a whole GPU (the allocator hands out its slices)
            n_free=Count(
                "gpus",
                filter=present & Q(gpus__state="free") & ~Q(gpus__mig_mode_current=MigMode.ENABLED),
                distinct=True,
            ),
            n_cas=Count("nodes", filter=Q(nodes__node_type=NodeType.CA), distinct=True),
        )
        self.fabric = None
        fabric_id = int_param(self.request.GET.get("fabric"))
        if fabric_id is not None:
            self.fabric = Fabric.objects.filter(pk=fabric_id).first()
            qs = qs.filter(fabric_id=fabric_id)
        self.q = self.request.GET.get("q", "").strip()[:128]
        if self.q:
            qs = qs.filter(name__icontains=self.q)
        if self.request.GET.get("gpus") == "1":
            qs = qs.filter(n_gpus__gt=0)
        return qs.order_by("fabric__name", "name")

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        ctx.update(fabric=self.fabric, fabrics=Fabric.objects.order_by("name"), q=self.q)
        ctx["only_gpus"] = self.request.GET.get("gpus") == "1"
        models = (
            Gpu.objects.present()
            .filter(host__in=[h.pk for h in ctx["hosts"]])
            .values_list("host_id", "product_name")
            .distinct()
        )
        by_host: dict[int, list[str]] = {}
        for host_id, product in models:
            by_host.setdefault(host_id, []).append(product or "?")
        faults = host_fabric_faults(host_ids=[h.pk for h in ctx["hosts"]])
        for host in ctx["hosts"]:
            host.models = sorted(by_host.get(host.pk, []))
            host.faults = faults.get(host.pk, [])
        query = self.request.GET.copy()
        query.pop("page", None)
        ctx["query"] = query.urlencode()
        return ctx


class HostFindView(RoleRequiredMixin, View):
    """``?fabric=<id>&name=<host name>`` → the host's page (the map's panel links hosts by name)."""

    def get(self, request):
        fabric_id = int_param(request.GET.get("fabric"))
        name = request.GET.get("name", "")
        host = Host.objects.filter(fabric_id=fabric_id, name=name).first() if fabric_id else None
        if host is None:
            raise Http404("no such host")
        return redirect("pools:host", pk=host.pk)


class HostView(RoleRequiredMixin, DetailView):
    """A host: its GPUs (model, memory, health, MIG mode, rail HCA, state), MIG slices, its HCAs
    (CA nodes) with each port's GUID, LID, state, rate and the leaf switch it is cabled to (the
    rail), what the host agent last reported, and the allocations on it (the user's tenants')."""

    template_name = "pools/host.html"
    context_object_name = "host"
    queryset = Host.objects.select_related("fabric")

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        host = self.object
        gpus = list(
            host.gpus.select_related("rail_node").prefetch_related(
                Prefetch(
                    "mig_slices", queryset=MigSlice.objects.order_by("gpu_instance_id", "compute_instance_id")
                )
            )
        )
        ctx["gpus"] = gpus
        ctx["slices"] = [s for g in gpus for s in g.mig_slices.all()]
        ctx["inventory"] = HostInventory.objects.filter(host=host).first()
        hcas = []
        ports = Port.objects.with_link().order_by("port_num")
        cas = Node.objects.filter(host=host, node_type=NodeType.CA).prefetch_related(
            Prefetch("ports", queryset=ports)
        )
        for node in cas.order_by("name"):
            rows = [{"port": p, "remote": p.remote} for p in node.ports.all()]
            rail_gpus = [g for g in gpus if g.rail_node_id == node.pk]
            leaves = sorted({str(r["remote"].node) for r in rows if r["remote"] is not None})
            hcas.append({"node": node, "ports": rows, "gpus": rail_gpus, "leaves": leaves})
        ctx["hcas"] = hcas
        ctx["highlight"] = ",".join(h["node"].node_guid for h in hcas)
        allocs = (
            visible_allocations(self.request.user)
            .filter(state__in=HOLDING_STATES, items__active=True, items__gpu__host=host)
            .distinct()
            .order_by("-id")
        )
        rows, held_by = [], {}
        for alloc in allocs:
            here = placement(alloc, host.pk)
            elsewhere = len({i.gpu.host_id for i in alloc.items.all()} - {host.pk})
            rows.append({"a": alloc, "units": here[0]["units"] if here else [], "elsewhere": elsewhere})
            for item in alloc.items.all():
                if item.active and item.gpu.host_id == host.pk and alloc not in held_by.get(item.gpu_id, []):
                    held_by.setdefault(item.gpu_id, []).append(alloc)
        for gpu in gpus:
            gpu.held_by = held_by.get(gpu.pk, [])
            gpu.mig_held, gpu.mig_total = 0, None
            # a MIG-mode GPU is shown by its slices (its own state stays free: it is never handed
            # out whole), e.g. "MIG: 3 of 7 slices allocated"
            if gpu.mig_mode_current == MigMode.ENABLED:
                slices = [x for x in gpu.mig_slices.all() if x.present]
                gpu.mig_held = sum(1 for x in slices if x.state != GpuState.FREE)
                gpu.mig_total = len(slices)
        ctx["allocations"] = rows
        # a host with a down rail is never "free": say why the scheduler will not use it
        ctx["faults"] = host_fabric_faults(host_ids=[host.pk]).get(host.pk, [])
        ctx["gpu_counts"] = Counter(
            "mig" if g.mig_mode_current == MigMode.ENABLED else g.state for g in gpus if g.present
        )
        return ctx


# --- tenants and pools: the Admin's pages (what /api/pools/tenants/ and pools/ allow) ----------


def tenant_rows(tenants) -> list[dict]:
    """``[{"tenant", "pools": [{"pool", "usage"}], "held_gpus", "held_slices", "running",
    "pending"}]`` for the tenant list: its own pools with quota, guarantee, PKey and
    :func:`pool_usage` (one query a pool); GPUs (whole + shared) and MIG slices its active allocations hold in any
    pool (shared ones too); its jobs placed or running, and pending in the queue
    (``scheduler.Job`` through the ``jobs`` relation, as ``pools.services.tenancy`` counts them)."""
    tenants = list(
        tenants.annotate(
            running=Count("jobs", filter=Q(jobs__state__in=["placed", "running"]), distinct=True),
            pending=Count("jobs", filter=Q(jobs__state="pending"), distinct=True),
            n_members=Count("memberships", distinct=True),
        ).order_by("name")
    )
    pools: dict[int, list] = {}
    for pool in (
        Pool.objects.filter(tenant__in=tenants).select_related("fabric", "partition").order_by("name")
    ):
        pools.setdefault(pool.tenant_id, []).append({"pool": pool, "usage": pool_usage(pool.pk)})
    held = AllocationItem.objects.filter(active=True, allocation__tenant__in=tenants)
    gpus = dict(
        held.exclude(kind=AllocationKind.MIG)
        .values("allocation__tenant_id")
        .annotate(n=Count("gpu", distinct=True))
        .values_list("allocation__tenant_id", "n")
    )
    slices = dict(
        held.filter(kind=AllocationKind.MIG)
        .values("allocation__tenant_id")
        .annotate(n=Count("id"))
        .values_list("allocation__tenant_id", "n")
    )
    return [
        {"tenant": t, "pools": pools.get(t.pk, []), "held_gpus": gpus.get(t.pk, 0),
         "held_slices": slices.get(t.pk, 0), "running": t.running, "pending": t.pending}
        for t in tenants
    ]  # fmt: skip


class TenantListView(RoleRequiredMixin, ListView):
    """Tenants the user may see (``pools.access``: an Admin every one, others their own), each
    with its pools' PKeys, quotas and usage, what it holds and its jobs; an Admin gets the
    create, edit and delete links (the API's write role for tenants and pools)."""

    template_name = "pools/tenant_list.html"
    context_object_name = "tenants"

    def get_queryset(self):
        return access.scope_tenants(Tenant.objects.all(), self.request.user)

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        ctx["rows"] = tenant_rows(ctx["tenants"])
        return ctx


class _EditView(RoleRequiredMixin, FormView):
    """Create (no ``pk``) or edit a ``model`` row through ``form_class`` (the API serializer's
    checks) and ``write`` (``pools.services.tenancy``): Admin, as the API's ``write_role``."""

    required_role = Role.ADMIN
    model: type = None
    write = None

    def dispatch(self, request, *args, **kwargs):
        self.object = None
        if "pk" in kwargs and has_role(request.user, self.required_role):  # else 403 first: no id probing
            self.object = get_object_or_404(self.model, pk=kwargs["pk"])
        return super().dispatch(request, *args, **kwargs)

    def get_form_kwargs(self):
        return {**super().get_form_kwargs(), "instance": self.object}

    def get_context_data(self, **kwargs):
        return {**super().get_context_data(**kwargs), "object": self.object}

    def form_invalid(self, form):
        """The form again with the serializer's messages under their fields, as a 400."""
        return self.render_to_response(self.get_context_data(form=form), status=400)

    def form_valid(self, form):
        try:
            saved = type(self).write(form.serializer, self.request.user)
        except self.model.DoesNotExist:
            raise Http404(f"the {self.model._meta.verbose_name} was deleted meanwhile") from None
        except DrfValidationError as exc:  # e.g. the PKey taken meanwhile (checked again under lock)
            for field, errs in exc.detail.items() if isinstance(exc.detail, dict) else [(None, exc.detail)]:
                form.row_error(field, [str(e) for e in errs])
            return self.form_invalid(form)
        except IntegrityError:  # a unique name or PKey taken by a request that committed meanwhile
            form.row_error(
                None, ["Another change saved meanwhile took this name or PKey: check and send again."]
            )
            return self.form_invalid(form)
        messages.success(self.request, f"{self.model._meta.verbose_name.capitalize()} {saved} saved.")
        return redirect(self.success_url_for(saved))


class TenantFormView(_EditView):
    """Add or edit a tenant: name, description, members with their tenant role."""

    template_name = "pools/tenant_form.html"
    form_class = TenantForm
    model = Tenant

    @staticmethod
    def write(serializer, user):
        return tenancy.write_tenant(serializer)

    def success_url_for(self, tenant):
        return reverse("pools:tenant_list") + f"#tenant-{tenant.pk}"


class PoolFormView(_EditView):
    """Add or edit a pool: filters, quotas, guarantees, borrowing weight, PKey, job isolation."""

    template_name = "pools/pool_form.html"
    form_class = PoolForm
    model = Pool

    @staticmethod
    def write(serializer, user):
        return tenancy.write_pool(serializer, user=user)

    def success_url_for(self, pool):
        return reverse("pools:pool", args=[pool.pk])


class _DeleteView(RoleRequiredMixin, DetailView):
    """GET asks for the confirmation; POST with ``confirm=1`` deletes through ``delete``
    (``pools.services.tenancy``, audited). Without the confirmation: the page again, 400; refused
    (active allocations, queued jobs): the page with the service's message, 409."""

    required_role = Role.ADMIN
    template_name = "pools/delete.html"
    context_object_name = "object"
    remove = None
    back = ""

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        ctx.update(
            kind=self.model._meta.verbose_name, cancel_url=self.cancel_url(), consequences=self.consequences()
        )
        return ctx

    def post(self, request, *args, **kwargs):
        self.object = obj = self.get_object()
        if request.POST.get("confirm") != "1":
            ctx = self.get_context_data(object=obj, error="Confirm the deletion (tick the box).")
            return self.render_to_response(ctx, status=400)
        try:
            type(self).remove(obj, request.user)
        except tenancy.TenancyConflict as exc:
            return self.render_to_response(
                self.get_context_data(object=obj, error=str(exc)), status=exc.status
            )
        except self.model.DoesNotExist:
            raise Http404(f"the {self.model._meta.verbose_name} was deleted meanwhile") from None
        messages.success(request, f"{self.model._meta.verbose_name.capitalize()} {obj} deleted.")
        return redirect(self.back)


class TenantDeleteView(_DeleteView):
    model = Tenant
    back = "pools:tenant_list"

    @staticmethod
    def remove(tenant, user):
        tenancy.delete_tenant(tenant, user=user)

    def cancel_url(self):
        return reverse("pools:tenant_list")

    def consequences(self) -> list[str]:
        t = self.object
        pools = list(t.pools.select_related("partition").order_by("name"))
        out = [
            f"{len(pools)} pool(s) go with it: " + ", ".join(p.name for p in pools)
            if pools
            else "it owns no pool"
        ]
        pkeys = [p.partition.pkey_hex for p in pools if p.partition_id]
        if pkeys:
            out.append("their PKeys are taken off the fabric at the next apply: " + ", ".join(pkeys))
        out.append(f"{t.memberships.count()} membership(s) and its ended allocations and jobs are deleted")
        return out


class PoolDeleteView(_DeleteView):
    model = Pool
    queryset = Pool.objects.select_related("tenant", "partition")
    back = "pools:pool_list"

    @staticmethod
    def remove(pool, user):
        tenancy.delete_pool(pool, user=user)

    def cancel_url(self):
        return reverse("pools:pool", args=[self.object.pk])

    def consequences(self) -> list[str]:
        p = self.object
        out = [f"its {p.allocations.count()} ended allocation(s) and its ended jobs are deleted"]
        if p.partition_id:
            out.append(f"its PKey {p.partition.pkey_hex} is taken off the fabric at the next apply")
        return out

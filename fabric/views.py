"""Fabric pages: fabric list/detail, network map, node and port details, topology changes, import,
partitions (PKeys) with their members and applied state.

Pages read the same querysets as the API (``fabric.querysets``) and run the same use cases
(``fabric.services.requests``, ``fabric.services.partitions``); the partition form runs the API
serializer's checks (``fabric.forms``), nothing else comes from ``fabric.api``. The map and import pages are
drawn/driven by JavaScript against the REST API (``/api/fabric/``); the others are plain
server-rendered HTML. Templates of other apps are included only when they exist
(``telemetry/_port_charts.html``, ``events/_object_alarms.html``).
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.mixins import LoginRequiredMixin
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template import TemplateDoesNotExist
from django.template.loader import select_template
from django.urls import reverse
from django.views import View
from django.views.generic import DetailView, ListView, TemplateView

from accounts.roles import Role, has_role
from accounts.scoping import scope_rows
from core.params import int_param
from core.sites import SiteDown

from . import upload
from .choices import ApplyRunState, NodeType
from .forms import PartitionForm
from .guid import is_guid, normalize_guid
from .models import Discovery, Fabric, IsolatedPort, Node, Partition, PartitionApply, Port
from .parsers.node_name_map import NodeNameMapError
from .parsers.records import TopologyParseError
from .services import cables, switchhealth
from .services import partitions as partition_service
from .services.names import MapUnreadable, fabric_names
from .services.portactions import ACTIONS as PORT_ACTIONS
from .services.portactions import PortActionFailed, PortActionRefused, request_port_action
from .services.reference import (
    ReferenceRefused,
    ReplaceNotConfirmed,
    compare_fabric,
    set_raise_events,
    set_reference_from_discovery,
    set_reference_from_text,
)
from .services.requests import NoLiveAccess, request_discovery, set_node_name_map
from .upload import UploadError, read_limited, topology_text

PORT_CHARTS_TEMPLATE = "telemetry/_port_charts.html"
OBJECT_ALARMS_TEMPLATE = "events/_object_alarms.html"
PORT_COUNTERS_TEMPLATE = "telemetry/_port_counters.html"
#: the jobs whose routed paths cross a port (scheduler), when installed
PORT_JOBS_TEMPLATE = "scheduler/_port_jobs.html"
#: the fabric page's topology download for other schedulers (scheduler), when installed
FABRIC_EXPORT_TEMPLATE = "scheduler/_fabric_export.html"


def optional_template(name: str) -> str | None:
    """``name`` when that template exists (another app may not have shipped it yet), else None."""
    try:
        select_template([name])
    except TemplateDoesNotExist:
        return None
    return name


class RoleRequiredMixin(LoginRequiredMixin):
    """Signed-in users with at least ``required_role`` (403 otherwise)."""

    required_role: Role = Role.VIEWER

    def dispatch(self, request, *args, **kwargs):
        if request.user.is_authenticated and not has_role(request.user, self.required_role):
            raise PermissionDenied(f"This page needs the {self.required_role.name.lower()} role.")
        return super().dispatch(request, *args, **kwargs)


class FabricListView(RoleRequiredMixin, ListView):
    """All fabrics with node/link counts and their last discovery."""

    template_name = "fabric/fabric_list.html"
    context_object_name = "fabrics"

    def get_queryset(self):
        return Fabric.objects.with_counts()


class FabricView(RoleRequiredMixin, DetailView):
    """One fabric: counts, subnet managers, last discoveries, "Discover now" (Operator), its
    partitions, and the topology download for other schedulers (``FABRIC_EXPORT_TEMPLATE``)."""

    template_name = "fabric/fabric.html"
    context_object_name = "fabric"

    def get_queryset(self):
        return Fabric.objects.with_counts()

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        fabric = self.object
        ctx["subnet_managers"] = fabric.subnet_managers.all()
        ctx["discoveries"] = fabric.discoveries.all()[:10]
        ctx["tiers"] = (
            fabric.nodes.filter(node_type=NodeType.SWITCH)
            .order_by("tier")
            .values_list("tier")
            .annotate(n=Count("id"))
        )
        ctx["host_count"] = fabric.hosts.count()
        # SHARP capability per switch: the switches with an Aggregation Node, and the ANs (no hosts)
        ans = fabric.nodes.filter(aggregation_node=True)
        ctx["aggregation_count"] = ans.count()
        ctx["sharp_switches"] = (
            ans.exclude(aggregation_switch_guid="").values("aggregation_switch_guid").distinct().count()
        )
        ctx["live"] = fabric.has_live_access
        ctx["export_template"] = optional_template(FABRIC_EXPORT_TEMPLATE)
        if not ctx["live"]:
            ctx["last_import"] = fabric.discoveries.filter(source__in=("file", "upload")).first()
        try:
            ctx["name_map_entries"] = len(fabric_names(fabric))
        except (MapUnreadable, NodeNameMapError) as exc:
            ctx["name_map_entries"] = 0
            ctx["name_map_error"] = str(exc).splitlines()[0]
        return ctx


#: Event codes of the SM history (``fabric.event_types``; written by ``fabric.services.sm``).
SM_HISTORY_CODES = (
    "sm.master_changed",
    "sm.master_lost",
    "sm.master_found",
    "sm.unreachable",
    "sm.reachable",
)


class SubnetManagersView(RoleRequiredMixin, DetailView):
    """The subnet managers of one fabric: master and standbys as the last SMInfo poll stored them
    (``fabric.SubnetManager``: GUID, LID, priority, state, ActCount) and the failover history,
    the ``sm.*`` events ``fabric.services.sm.observe_sms`` recorded (newest first, ``SM_HISTORY``)."""

    template_name = "fabric/subnet_managers.html"
    context_object_name = "fabric"
    queryset = Fabric.objects.all()
    SM_HISTORY = 200

    def get_context_data(self, **kwargs):
        from events.models import Event

        ctx = super().get_context_data(**kwargs)
        fabric = self.object
        sms = list(fabric.subnet_managers.all())
        guids = [sm.guid for sm in sms]  # SMInfo's GUID is the SM's port GUID
        names = {
            p.port_guid: p.node
            for p in Port.objects.filter(node__fabric=fabric, port_guid__in=guids).select_related("node")
        }
        for node in Node.objects.filter(fabric=fabric, node_guid__in=guids):
            names.setdefault(node.node_guid, node)
        for sm in sms:
            sm.node = names.get(sm.guid)
            sm.is_current_master = sm.guid == fabric.master_sm_guid
        ctx["subnet_managers"] = sms
        ctx["history"] = Event.objects.filter(fabric=fabric, code__in=SM_HISTORY_CODES).order_by(
            "-at", "-id"
        )[: self.SM_HISTORY]
        ctx["live"] = fabric.has_live_access
        return ctx


class FabricNamesView(FabricView):
    """POST (Admin): set the fabric's node-name map from an uploaded file, pasted text or a server
    path (``op=clear`` removes it), through the audited service; a refused map re-renders the
    fabric page with every bad line located (status 400, nothing changed). GET (a reload, a typed
    or bookmarked address): to the fabric page's form, as the app's other form URLs show their
    page, rather than a bare 405."""

    required_role = Role.ADMIN

    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        fabric = get_object_or_404(self.get_queryset(), pk=pk)
        messages.info(request, "The node-name map is set with the form under the fabric's details.")
        return redirect(fabric.get_absolute_url() + "#name-map-form")

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        self.object = fabric = get_object_or_404(self.get_queryset(), pk=pk)
        text, path, filename = "", "", ""
        errors: list[dict] = []
        if request.POST.get("op") != "clear":
            path = request.POST.get("path", "").strip()
            text = request.POST.get("text", "")
            upload = request.FILES.get("file")
            try:
                if upload is not None:
                    filename = upload.name
                    text = topology_text(read_limited(upload, filename), filename)
            except UploadError as exc:
                errors = [{"source": filename, "line": 0, "message": str(exc)}]
            if text.strip() and path:
                text = "" if upload is None and text == fabric.node_name_map else text
        if not errors:
            try:
                result = set_node_name_map(fabric, text=text, path=path, filename=filename, user=request.user)
            except NodeNameMapError as exc:
                errors = exc.as_dicts()
            except (MapUnreadable, ValueError) as exc:
                errors = [{"source": path or filename, "line": 0, "message": str(exc)}]
        if errors:
            ctx = self.get_context_data(object=fabric)
            ctx["name_map_errors"] = errors
            return self.render_to_response(ctx, status=400)
        messages.success(
            request,
            f"Node-name map of {fabric.name}: {result['entries']} names, {result['renamed']} nodes renamed, "
            f"{result['rehosted']} moved to another host.",
        )
        return redirect(fabric.get_absolute_url())


class FabricDiscoverView(RoleRequiredMixin, View):
    """POST: queue a live discovery of the fabric (Operator), then back to the fabric page. GET:
    to the fabric page's button with a message (as ``FabricNamesView``), nothing queued."""

    required_role = Role.OPERATOR

    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        fabric = get_object_or_404(Fabric, pk=pk)
        messages.info(request, "A discovery is started with the “Discover now” button of the fabric page.")
        return redirect(fabric.get_absolute_url() + "#discover-form")

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        fabric = get_object_or_404(Fabric, pk=pk)
        try:
            request_discovery(fabric, request.user)
        except (NoLiveAccess, SiteDown) as exc:
            messages.error(request, str(exc))
            return redirect(fabric.get_absolute_url())
        messages.success(request, f"Discovery of {fabric.name} queued; refresh in a few seconds.")
        return redirect(fabric.get_absolute_url())


#: report sections of the compare page: (key, title)
COMPARE_SECTIONS = (
    ("miswired", "Miswired links"),
    ("missing_links", "Missing links"),
    ("extra_links", "Extra links"),
    ("missing_nodes", "Missing nodes"),
    ("extra_nodes", "Extra nodes"),
    ("below_reference", "Links below the reference's width/speed"),
)


class CompareIndexView(RoleRequiredMixin, TemplateView):
    """``/fabric/compare/``: the compare page of the only fabric, or a choice of fabrics (the menu's
    entry), each with whether it has a reference."""

    template_name = "fabric/compare_index.html"

    def get(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        fabrics = list(Fabric.objects.order_by("name").select_related("reference"))
        if len(fabrics) == 1:
            return redirect(reverse("fabric:compare", args=[fabrics[0].pk]))
        return self.render_to_response(self.get_context_data(fabrics=fabrics))


class CompareView(RoleRequiredMixin, DetailView):
    """``/fabric/<id>/compare/``: the fabric against its reference topology (Viewer), and (Admin,
    POST) ``op=discovery`` the latest discovery as the reference, ``op=file`` an uploaded topology
    file (both with ``confirm`` only when they replace a reference), ``op=events``
    (``raise_events``, with ``confirm``) the events after each discovery. Refusals re-render the
    page with the reason (400/409), nothing changed."""

    template_name = "fabric/compare.html"
    context_object_name = "fabric"
    queryset = Fabric.objects.select_related("last_discovery")

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        report = compare_fabric(self.object)
        ctx["report"] = report
        if report:  # an aware datetime, shown like the other pages' times (date filter, TIME_ZONE)
            ctx["reference_set"] = datetime.fromisoformat(report["reference"]["set"])
        ctx["sections"] = [
            {"key": key, "title": title, "items": report[key][:500], "total": len(report[key])}
            for key, title in COMPARE_SECTIONS
        ] if report else []  # fmt: skip
        ctx["is_admin"] = has_role(self.request.user, Role.ADMIN)
        return ctx

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        if not has_role(request.user, Role.ADMIN):
            raise PermissionDenied("Setting the reference topology needs the admin role.")
        self.object = fabric = self.get_object()
        op = request.POST.get("op", "")
        # replacing a reference needs the box ticked; the first one does not (nothing to replace):
        # the service checks under the reference's row lock
        confirmed = request.POST.get("confirm") == "1"
        error, status = "", 400
        if op == "discovery":
            try:
                if fabric.last_discovery is None:
                    raise ReferenceRefused(f"{fabric.name} has no discovery yet")
                set_reference_from_discovery(fabric, fabric.last_discovery, request.user, replace=confirmed)
                messages.success(request, f"The latest discovery of {fabric.name} is now its reference.")
            except ReplaceNotConfirmed:
                error = "Confirm replacing the reference (tick the box)."
            except ReferenceRefused as exc:
                error, status = str(exc), 409
        elif op == "file":
            upload_file = request.FILES.get("file")
            try:
                if upload_file is None:
                    raise UploadError("choose a topology file")
                text = topology_text(read_limited(upload_file, upload_file.name), upload_file.name)
                set_reference_from_text(fabric, text, upload_file.name, request.user, replace=confirmed)
                messages.success(request, f"{upload_file.name} is now the reference of {fabric.name}.")
            except ReplaceNotConfirmed:
                error = "Confirm replacing the reference (tick the box)."
            except (UploadError, TopologyParseError) as exc:
                error = str(exc)
        elif not confirmed:
            error = "Confirm the change (tick the box)."
        elif op == "events":
            on = request.POST.get("raise_events") == "1"
            try:
                set_raise_events(fabric, on, request.user)
                messages.success(request, f"Compare events after each discovery: {'on' if on else 'off'}.")
            except ReferenceRefused as exc:
                error, status = str(exc), 409
        else:
            error = "Unknown operation."
        if error:
            ctx = self.get_context_data(object=fabric)
            ctx["form_error"] = error
            return self.render_to_response(ctx, status=status)
        return redirect(reverse("fabric:compare", args=[fabric.pk]))


#: the most GUIDs ``?highlight=`` marks on the map (a URL of about 80 kB)
MAX_HIGHLIGHT = 4096


def highlight_guids(text: str, limit: int = MAX_HIGHLIGHT) -> list[str]:
    """The canonical GUIDs of a ``?highlight=`` value (separated by commas or spaces), in order,
    once each, at most ``limit``; what does not parse as a GUID is left out (a mark, not a query)."""
    out: dict[str, None] = {}
    for token in text.replace(",", " ").split():
        if len(out) >= limit:
            break
        if is_guid(token):
            out[normalize_guid(token)] = None
    return list(out)


class MapView(RoleRequiredMixin, TemplateView):
    """The network map of one fabric (``?fabric=<id or name>``, default the first fabric);
    ``?focus=<GUID>`` selects a node, ``?highlight=<GUID>,<GUID>…`` marks nodes (a pool's hosts)."""

    template_name = "fabric/map.html"

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        fabrics = list(Fabric.objects.order_by("name"))
        fabric = None
        wanted = self.request.GET.get("fabric", "")
        if wanted.isdigit():
            fabric = next((f for f in fabrics if f.pk == int_param(wanted)), None)
        elif wanted:
            fabric = next((f for f in fabrics if f.name == wanted), None)
        if fabric is None and fabrics and not wanted:
            fabric = fabrics[0]
        ctx.update(fabrics=fabrics, fabric=fabric, wanted=wanted)
        if fabric is not None:
            ctx["map_url"] = reverse("fabric-api:fabric-map", args=[fabric.pk])
        ctx["focus"] = self.request.GET.get("focus", "")
        ctx["highlight"] = " ".join(highlight_guids(self.request.GET.get("highlight", "")))
        poll = self.request.GET.get("poll", "")
        poll_s = int_param(poll)
        ctx["poll_s"] = max(1, min(poll_s, 3600)) if poll_s is not None else 30
        return ctx


class NodeView(RoleRequiredMixin, DetailView):
    """A node: identity, ports with state/width/speed/rate and remote end, and alarms."""

    template_name = "fabric/node.html"
    context_object_name = "node"

    def get_queryset(self):
        return Node.objects.with_linked_ports()

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        node = self.object
        rows = []
        ports = list(node.ports.all())
        cable_rows = cables.latest_by_port([p.pk for p in ports])  # the Cable column
        for port in ports:
            cable = cable_rows.get(port.pk)
            rows.append(
                {
                    "port": port,
                    "link": port.link,
                    "remote": port.remote,
                    "cable": cable.data if cable else None,
                }
            )
        ctx["port_rows"] = rows
        ctx["linked"] = sum(1 for r in rows if r["link"] is not None)
        ctx["siblings"] = node.host.nodes.exclude(pk=node.pk).order_by("name") if node.host_id else []
        ctx["mapped"] = bool(node.name) and node.name != node.description.strip()
        # SHARP: a switch's Aggregation Node(s), an AN's switch (fabric.services.derive.aggregation_nodes)
        if node.node_type == NodeType.SWITCH:
            ctx["aggregation_nodes"] = list(node.sharp_aggregation_nodes.order_by("node_guid"))
        ctx["aggregation_switch"] = node.aggregation_switch if node.aggregation_node else None
        if node.node_type == NodeType.SWITCH and not node.aggregation_node:
            ctx.update(switchhealth.page_context(node))
        ctx["alarms_template"] = optional_template(OBJECT_ALARMS_TEMPLATE)
        return ctx


class PortView(RoleRequiredMixin, DetailView):
    """A port: identity, its link and remote end, telemetry charts and alarms (when present)."""

    template_name = "fabric/port.html"
    context_object_name = "port"

    def get_queryset(self):
        return Port.objects.with_link().select_related("node__fabric", "node__host")

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        port = self.object
        ctx["node"] = port.node
        ctx["link"] = port.link
        ctx["remote"] = port.remote
        ctx["charts_template"] = optional_template(PORT_CHARTS_TEMPLATE)
        ctx["counters_template"] = optional_template(PORT_COUNTERS_TEMPLATE)
        ctx["alarms_template"] = optional_template(OBJECT_ALARMS_TEMPLATE)
        ctx["jobs_template"] = optional_template(PORT_JOBS_TEMPLATE)
        ctx["port_actions"] = PORT_ACTIONS if port.node.node_type == NodeType.SWITCH and port.port_num else {}
        ctx.update(cables.page_context(port))
        ctx["may_act"] = has_role(self.request.user, Role.OPERATOR)
        ctx["isolation"] = (
            IsolatedPort.objects.filter(
                fabric_id=port.node.fabric_id, node_guid=port.node.node_guid, port_num=port.port_num
            )
            .select_related("by")
            .first()
        )
        return ctx


class PortActionView(PortView):
    """POST (Operator): ``action`` = disable / enable / reset / clear_counters on a switch port,
    with ``confirm=1`` (``fabric.services.portactions``: refused for CA ports and the SM's own
    path). Back to the port page with the outcome; a refusal re-renders it with the reason: 400
    (no confirmation, unknown action), 409 (refused), 502 (the tool failed). GET: to the port
    page's form with a message (as ``FabricNamesView``), nothing done."""

    required_role = Role.OPERATOR

    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        port = get_object_or_404(self.get_queryset(), pk=pk)
        messages.info(request, "Port actions are taken with the form of the port page.")
        return redirect(port.get_absolute_url() + "#port-actions")

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        self.object = port = get_object_or_404(self.get_queryset(), pk=pk)
        action = request.POST.get("action", "")
        error, status = "", 400
        if action not in PORT_ACTIONS:
            error = f"Unknown action {action[:40]!r}."
        elif request.POST.get("confirm") != "1":
            error = "Confirm the action (tick the box)."
        else:
            try:
                result = request_port_action(port, action, user=request.user)
            except PortActionRefused as exc:
                error, status = f"Refused: {exc}.", 409
            except PortActionFailed as exc:
                error, status = f"Failed: {exc}", 502
            except SiteDown as exc:
                error, status = str(exc), 503
        if error:
            ctx = self.get_context_data(object=port)
            ctx["action_error"] = error
            return self.render_to_response(ctx, status=status)
        done = result.as_dict()
        state = f": now {done['state']} / {done['phys_state']}" if done["state"] else "."
        messages.success(request, f"{PORT_ACTIONS[action].split(' (')[0]} {result.port} done{state}")
        return redirect(port.get_absolute_url())


class IsolatedPortsView(RoleRequiredMixin, ListView):
    """The ports isolated on purpose (``fabric.IsolatedPort``, written by
    ``fabric.services.isolation``): fabric, port, its peer when it was isolated, who isolated it,
    when, and from where (the port page or the UFM API). Their links are down by intent, so no
    ``link.down`` is raised for them; enable a port (port page, UFM ``HEALTHY``) to end it."""

    template_name = "fabric/isolated.html"
    context_object_name = "isolated"

    def get_queryset(self):
        rows = list(IsolatedPort.objects.select_related("fabric", "by").order_by("-since", "-id"))
        ports = {
            (p.node.fabric_id, p.node.node_guid, p.port_num): p
            for p in Port.objects.filter(node__node_guid__in={r.node_guid for r in rows}).select_related(
                "node"
            )
        }
        for r in rows:
            r.port = ports.get((r.fabric_id, r.node_guid, r.port_num))
        return rows


class ChangesView(RoleRequiredMixin, ListView):
    """Discoveries and imports, newest first, with counts and the expandable diff."""

    template_name = "fabric/changes.html"
    context_object_name = "discoveries"
    paginate_by = 25

    def get_queryset(self):
        qs = Discovery.objects.with_fabric()
        self.fabric = None
        wanted = self.request.GET.get("fabric", "")
        if wanted.isdigit():
            pk = int_param(wanted)
            self.fabric = Fabric.objects.filter(pk=pk).first() if pk is not None else None
            qs = qs.filter(fabric_id=pk) if pk is not None else qs.none()
        if self.request.GET.get("changed") == "1":
            qs = qs.filter(Q(added__gt=0) | Q(removed__gt=0) | Q(changed__gt=0))
        return qs

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        ctx["fabrics"] = Fabric.objects.order_by("name")
        ctx["fabric"] = self.fabric
        ctx["only_changed"] = self.request.GET.get("changed") == "1"
        ctx["rows"] = [{"d": d, "sections": diff_sections(d.diff)} for d in ctx["discoveries"]]
        return ctx


class ImportView(RoleRequiredMixin, TemplateView):
    """Upload an ibnetdiscover file (plain or gzip) into a new or existing fabric (Admin)."""

    template_name = "fabric/import.html"
    required_role = Role.ADMIN

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        ctx["fabrics"] = Fabric.objects.order_by("name")
        ctx["import_url"] = reverse("fabric-api:fabric-import-new")
        ctx["max_upload_mb"] = f"{upload.max_bytes() / 2**20:.4g}"  # MiB, WEFT_IMPORT_MAX_BYTES
        ctx["max_remove_pct"] = round(settings.WEFT_IMPORT_MAX_REMOVE_SHARE * 100)
        return ctx


def diff_sections(diff: dict, limit: int = 200) -> list[dict]:
    """Flatten a ``Discovery.diff`` for display.

    Returns ``[{"name": "added", "kinds": [{"kind": "links", "total": n, "items": [str], "more": k}]}]``;
    items are natural keys (strings), or ``key: field old → new`` for dict items of ``changed``.
    """
    out = []
    for section in ("added", "removed", "changed"):
        value = (diff or {}).get(section) or {}
        if isinstance(value, list):
            value = {"items": value}
        kinds = []
        for kind, items in value.items():
            items = items if isinstance(items, list) else [items]
            rendered = [_render_diff_item(item) for item in items[:limit]]
            kinds.append(
                {"kind": kind, "total": len(items), "items": rendered, "more": max(len(items) - limit, 0)}
            )
        out.append({"name": section, "kinds": kinds, "total": sum(k["total"] for k in kinds)})
    return out


def _render_diff_item(item) -> str:
    if not isinstance(item, dict):
        return str(item)
    key = item.get("key") or item.get("guid") or item.get("object_key") or ""
    rest = []
    for name, value in item.items():
        if name in {"key", "guid", "object_key"}:
            continue
        if isinstance(value, (list, tuple)) and len(value) == 2:
            rest.append(f"{name} {value[0]} → {value[1]}")
        else:
            rest.append(f"{name}={value}")
    return f"{key}: {', '.join(rest)}" if key else ", ".join(rest)


class PartitionListView(RoleRequiredMixin, ListView):
    """Partitions (PKeys) of all fabrics, or of ``?fabric=<id>``: PKey, flags, member count and
    what the last apply found; an Admin gets "New partition" (the API's write role)."""

    template_name = "fabric/partition_list.html"
    context_object_name = "partitions"

    def get_queryset(self):
        qs = Partition.objects.select_related("fabric").annotate(member_count=Count("members"))
        qs = scope_rows(qs, self.request.user)  # not another tenant's pool or job partitions
        fabric_id = int_param(self.request.GET.get("fabric"))
        return qs.filter(fabric_id=fabric_id) if fabric_id else qs

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        fabric_id = int_param(self.request.GET.get("fabric"))
        ctx["fabric"] = Fabric.objects.filter(pk=fabric_id).first() if fabric_id else None
        return ctx


#: states of a requested apply that are not final (the page follows them)
APPLY_RUNNING = (ApplyRunState.QUEUED, ApplyRunState.RUNNING, ApplyRunState.COALESCED)


def apply_record(fabric: Fabric, wanted) -> PartitionApply | None:
    """The requested apply a partition page shows: ``wanted`` (``?apply=<id>``) when it is one of
    ``fabric``'s, else the fabric's latest (applies are per fabric: the file holds them all)."""
    applies = PartitionApply.objects.filter(fabric=fabric).select_related("requested_by")
    apply_id = int_param(wanted)
    rec = applies.filter(pk=apply_id).first() if apply_id else None
    return rec or applies.order_by("-created", "-id").first()


def queue_page_apply(request: HttpRequest, fabric: Fabric) -> PartitionApply | None:
    """After a change from a page: request an apply of ``fabric``'s partitions as the API's
    ``POST partitions/apply/`` does (``request_apply``: a ``PartitionApply`` record, audited,
    run by a worker), when the fabric has a partitions file (``auto_apply_enabled``); else, or
    when its site has no live worker, say why the change stays pending. Returns the record."""
    if not partition_service.auto_apply_enabled(fabric):
        messages.warning(
            request,
            f"Not applied: fabric {fabric.name} has no partitions file (partitions_path); the change "
            "stays pending until OpenSM is given the file.",
        )
        return None
    try:
        return partition_service.request_apply(fabric, user=request.user, source="page")
    except SiteDown as exc:
        messages.warning(request, f"Saved, not applied: {exc}")
        return None


class PartitionView(RoleRequiredMixin, DetailView):
    """One partition: flags, applied state and drift, its members (GUID or keyword, membership,
    reason, the port when the topology knows it), who owns it (a pool, a job), and the fabric's
    requested apply (``?apply=<id>``, else the latest) with its state, followed by
    ``static/fabric/partition.js`` until it ends. An Admin gets Edit, Delete and Apply now."""

    template_name = "fabric/partition.html"
    context_object_name = "partition"

    def get_queryset(self):
        return scope_rows(Partition.objects.select_related("fabric"), self.request.user)

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        p = self.object
        ctx["members"] = p.members.select_related("port__node").order_by("port_guid")
        ctx["owner"] = partition_service.partition_owner(p)
        ctx["apply"] = rec = apply_record(p.fabric, self.request.GET.get("apply"))
        ctx["apply_running"] = rec is not None and rec.state in APPLY_RUNNING
        ctx["auto_apply"] = partition_service.auto_apply_enabled(p.fabric)
        return ctx


class PartitionFormView(RoleRequiredMixin, TemplateView):
    """Create (``?fabric=<id>``) or edit a partition (Admin, the API's ``write_role``): name,
    PKey, description, IPoIB flags and members picked from the fabric's hosts (each adds its HCA
    ports) or typed as port GUIDs (``fabric.forms.PartitionForm``: the API serializer's checks).

    One transaction through the API's writers (``save_partition``, then ``set_members``: a
    refused member list leaves nothing created or changed), each audited as the API's; then an
    apply is requested (:func:`queue_page_apply`) and the partition page follows it. A partition
    a pool or a job owns keeps its name, PKey and pool members (the service's ``PartitionOwned``
    message, 409); its flags and extra members are edited here. Refusals re-render the form with
    the message under the field (400), nothing written."""

    template_name = "fabric/partition_form.html"
    required_role = Role.ADMIN

    def dispatch(self, request, *args, **kwargs):
        self.object = None
        if request.user.is_authenticated and has_role(request.user, self.required_role):  # 403 first
            if "pk" in kwargs:
                qs = scope_rows(Partition.objects.select_related("fabric"), request.user)
                self.object = get_object_or_404(qs, pk=kwargs["pk"])
                self.fabric = self.object.fabric
            else:
                fabric_id = int_param(request.POST.get("fabric") or request.GET.get("fabric"))
                fabrics = list(Fabric.objects.order_by("name")[:2])
                if fabric_id is None and len(fabrics) == 1:
                    fabric_id = fabrics[0].pk
                if fabric_id is None:
                    return self.render_to_response({"choose": Fabric.objects.order_by("name")})
                self.fabric = get_object_or_404(Fabric, pk=fabric_id)
        return super().dispatch(request, *args, **kwargs)

    def form(self, data=None) -> PartitionForm:
        owner = partition_service.partition_owner(self.object) if self.object else None
        self.owner = owner
        return PartitionForm(data, fabric=self.fabric, instance=self.object,
                             member_reason="extra" if owner else None)  # fmt: skip

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        form = kwargs.get("form") or self.form()
        ctx.update(form=form, object=self.object, fabric=self.fabric, owner=self.owner)
        picked = {str(v) for v in form["hosts"].value() or []}
        ctx["host_options"] = [
            {"value": v, "label": label, "ports": len(form.ports_of[int(v)]), "selected": v in picked}
            for v, label in form.fields["hosts"].choices
        ]
        return ctx

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        form = self.form(request.POST)
        if not form.is_valid():
            return self.render_to_response(self.get_context_data(form=form), status=400)
        try:
            changed = self._write(form)
        except partition_service.PartitionError as exc:  # PartitionOwned too (409)
            if self.object is not None:
                self.object.refresh_from_db()  # as stored: the refused values were set on it
            owned = isinstance(exc, partition_service.PartitionOwned)
            form.add_error(None if owned or exc.field not in form.fields else exc.field, str(exc))
            return self.render_to_response(self.get_context_data(form=form), status=409 if owned else 400)
        partition = self.saved
        if not changed:
            messages.info(request, f"Partition {partition} unchanged.")
            return redirect(partition.get_absolute_url())
        messages.success(request, f"Partition {partition} saved.")
        rec = queue_page_apply(request, self.fabric)
        return redirect(partition.get_absolute_url() + (f"?apply={rec.pk}" if rec else ""))

    def _write(self, form: PartitionForm) -> bool:
        """Save the partition and its members in one transaction (the API's writers); whether
        anything changed. Raises the service's ``PartitionError``/``PartitionOwned``."""
        user, created = self.request.user, self.object is None
        partition = self.object or Partition(fabric=self.fabric)
        changed = False
        with transaction.atomic():
            if form.serializer is not None:
                for k, v in form.serializer.validated_data.items():
                    setattr(partition, k, v)
                action = "partition.create" if created else "partition.update"
                partition_service.save_partition(partition, user=user, action=action)
                changed = True
            now = (
                dict(form.edited_members(partition).values_list("port_guid", "membership"))
                if not created
                else {}
            )
            if dict(form.wanted_members) != now:
                partition_service.set_members(
                    partition, form.wanted_members, reason=form.member_reason, user=user
                )
                changed = True
        self.saved = partition
        return changed


class PartitionDeleteView(RoleRequiredMixin, DetailView):
    """GET asks for the confirmation; POST with ``confirm=1`` deletes the partition (Admin) through
    ``delete_partition`` (audited ``partition.delete``, as the API's ``DELETE``), then requests an
    apply that takes its PKey off the ports. Without the confirmation: 400; the default partition:
    400; a pool's or a job's: 409 with the service's message; nothing deleted."""

    template_name = "fabric/partition_delete.html"
    context_object_name = "partition"
    required_role = Role.ADMIN

    def get_queryset(self):
        return scope_rows(Partition.objects.select_related("fabric"), self.request.user)

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        ctx["owner"] = partition_service.partition_owner(self.object)
        ctx["member_count"] = self.object.members.count()
        return ctx

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        self.object = partition = self.get_object()
        error, status = "", 400
        if request.POST.get("confirm") != "1":
            error = "Confirm the deletion (tick the box)."
        else:
            try:
                partition_service.delete_partition(partition, user=request.user)
            except partition_service.PartitionOwned as exc:
                error, status = str(exc), 409
            except partition_service.PartitionError as exc:
                error = str(exc)
        if error:
            return self.render_to_response(
                self.get_context_data(object=partition, error=error), status=status
            )
        messages.success(request, f"Partition {partition.name} ({partition.pkey_hex}) deleted.")
        rec = queue_page_apply(request, partition.fabric)
        if rec is not None:
            messages.info(request, f"Apply #{rec.pk} of fabric {partition.fabric.name} requested.")
        return redirect(reverse("fabric:partition_list") + f"?fabric={partition.fabric_id}")


class PartitionApplyView(PartitionView):
    """POST (Admin): "Apply now" on a partition page: request an apply of its fabric's partitions
    (``request_apply``, as ``POST /api/fabric/partitions/apply/``), then back to the page, which
    follows it. GET: to the partition page, nothing requested."""

    required_role = Role.ADMIN

    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        return redirect(get_object_or_404(self.get_queryset(), pk=pk).get_absolute_url())

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        partition = get_object_or_404(self.get_queryset(), pk=pk)
        try:
            rec = partition_service.request_apply(partition.fabric, user=request.user, source="page")
        except SiteDown as exc:
            messages.error(request, str(exc))
            return redirect(partition.get_absolute_url())
        messages.success(request, f"Apply #{rec.pk} of fabric {partition.fabric.name} requested.")
        return redirect(partition.get_absolute_url() + f"?apply={rec.pk}")

"""Pages of the events app: dashboard (``/``), alarms, events, health reports, event policies."""

from __future__ import annotations

import csv
import re

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.mixins import LoginRequiredMixin
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import Http404, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views import View
from django.views.generic import CreateView, DetailView, ListView, TemplateView, UpdateView

from accounts import audit
from accounts.audit import model_changes
from accounts.roles import Role, has_role
from core.converters import RowIdConverter
from core.csvcells import spreadsheet_safe
from core.params import int_param
from fabric.models import Fabric
from fabric.views import optional_template

from . import dashboard, health, registry, services
from .alerting import deliveries, send_test
from .filtersets import AlarmFilterSet, EventFilterSet
from .forms import AlertTargetForm, EventPolicyForm
from .models import Alarm, AlertTarget, Event, EventPolicy, HealthReport, Severity
from .policies import default_recipients
from .reports import run_health_report
from .scoping import scope_alarms, scope_events


class RoleMixin(LoginRequiredMixin):
    """Signed-in users with at least ``required_role`` (403 otherwise)."""

    required_role: Role = Role.VIEWER

    def dispatch(self, request, *args, **kwargs):
        if request.user.is_authenticated and not has_role(request.user, self.required_role):
            raise PermissionDenied(f"This page needs the {self.required_role.name.lower()} role.")
        return super().dispatch(request, *args, **kwargs)


def _fabrics():
    return Fabric.objects.order_by("name")


#: the pools app's card of pool usage (tenant-scoped), included when that app ships it
POOLS_TEMPLATE = "pools/_dashboard_pools.html"
#: the devices app's health tiles (Ethernet devices answering, fans, PSUs, temperatures)
DEVICES_TEMPLATE = "devices/_dashboard_health.html"


class DashboardView(RoleMixin, TemplateView):
    """Home: fabric summary, open alarms by severity, top congested and erroring ports (live),
    the pools' usage (``POOLS_TEMPLATE``) and the Ethernet devices' health (``DEVICES_TEMPLATE``)."""

    template_name = "events/dashboard.html"

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        fabric_id = self.request.GET.get("fabric")
        ctx["fabric_id"] = int_param(fabric_id)
        ctx["summary"] = dashboard.summary(ctx["fabric_id"], user=self.request.user)
        ctx["severities"] = [(s.value, s.label) for s in reversed(Severity)]
        ctx["pools_template"] = optional_template(POOLS_TEMPLATE)
        ctx["devices_template"] = optional_template(DEVICES_TEMPLATE)
        return ctx


class DashboardSummaryView(RoleMixin, View):
    """JSON of :func:`events.dashboard.summary` for the live dashboard."""

    def get(self, request):
        fabric_id = request.GET.get("fabric")
        return JsonResponse(dashboard.summary(int_param(fabric_id), user=request.user))


class AlarmListView(RoleMixin, ListView):
    """Alarms, open by default (``?state=cleared`` or ``?open=`` for history), live over Channels.
    Open alarms are listed most severe first, then most recent; history by time."""

    template_name = "events/alarm_list.html"
    context_object_name = "alarms"
    paginate_by = 200

    def get_queryset(self):
        qs = scope_alarms(
            Alarm.objects.select_related("fabric", "acknowledged_by", "cleared_by"), self.request.user
        )
        params = self.request.GET.copy()
        if "state" not in params and "open" not in params:
            params["open"] = "true"
        self.filterset = AlarmFilterSet(params, queryset=qs)
        if self.filterset.data.get("open") in ("true", "True", "1"):
            return self.filterset.qs.by_severity()  # what needs attention first
        return self.filterset.qs.order_by("-last_seen", "-id")  # history: by time

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        ctx["filter"] = self.filterset
        ctx["severities"] = [(s.value, s.label) for s in reversed(Severity)]
        ctx["fabrics"] = _fabrics()
        ctx["counts"] = scope_alarms(Alarm.objects.open(), self.request.user).counts_by_severity()
        ctx["showing_open"] = self.filterset.data.get("open") in ("true", "True", "1")
        return ctx


class AlarmBulkAcknowledgeView(RoleMixin, View):
    """POST ``alarm`` (ids, repeated) from the alarm list's check boxes: acknowledge them
    (Operator, ``events.services.acknowledge_many``), then back to the list."""

    required_role = Role.OPERATOR

    def post(self, request):
        values = request.POST.getlist("alarm")
        # row ids as in URLs (core.converters): a longer number overflowed the 64-bit id column
        if not all(re.fullmatch(RowIdConverter.regex, v) for v in values):
            return HttpResponseBadRequest("alarm: row ids expected (1 to 18 digits)")
        ids = [int(v) for v in values]
        if not ids:
            messages.error(request, "No alarm selected.")
        else:
            out = services.acknowledge_many(ids, request.user)
            text = f"{out['acknowledged']} alarm{'s' * (out['acknowledged'] != 1)} acknowledged"
            if out["skipped"]:
                text += f"; {out['skipped']} skipped (already acknowledged or cleared)"
            messages.success(request, text + ".")
        back = request.POST.get("next", "")
        return redirect(back if back.startswith("/alarms/") else "events:alarm_list")


#: Columns of the alarm CSV export (header, value of an Alarm).
ALARM_CSV_COLUMNS = [
    ("id", lambda a: a.pk),
    ("severity", lambda a: a.severity),
    ("type", lambda a: a.code),
    ("name", lambda a: a.name),
    ("fabric", lambda a: a.fabric.name if a.fabric_id else ""),
    ("object_type", lambda a: a.object_type),
    ("object_key", lambda a: a.object_key),
    ("object", lambda a: a.object_repr),
    ("state", lambda a: a.state),
    ("state_text", lambda a: a.state_text),
    ("first_seen", lambda a: a.first_seen.isoformat()),
    ("last_seen", lambda a: a.last_seen.isoformat()),
    ("count", lambda a: a.count),
    ("acknowledged_by", lambda a: a.acknowledged_by.username if a.acknowledged_by_id else ""),
    ("acknowledged_at", lambda a: a.acknowledged_at.isoformat() if a.acknowledged_at else ""),
    ("cleared_at", lambda a: a.cleared_at.isoformat() if a.cleared_at else ""),
    ("clear_reason", lambda a: a.clear_reason),
    ("message", lambda a: a.message),
]


class AlarmCSVView(AlarmListView):
    """The alarm list's rows as CSV (same filters and order, every page, at most ``CSV_MAX``
    rows); times ISO 8601 with offset; text cells spreadsheet-safe (``core.csvcells``)."""

    CSV_MAX = 100_000

    def get(self, request, *args, **kwargs):
        rows = self.get_queryset().select_related("cleared_by")[: self.CSV_MAX]
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="weft-alarms.csv"'
        writer = csv.writer(response)
        writer.writerow([name for name, _ in ALARM_CSV_COLUMNS])
        for alarm in rows:
            cells = (value(alarm) for _, value in ALARM_CSV_COLUMNS)
            writer.writerow([spreadsheet_safe(c) if isinstance(c, str) else c for c in cells])
        return response


class AlarmView(RoleMixin, DetailView):
    """One alarm: its events (raising and clearing), acknowledge/clear (Operator)."""

    template_name = "events/alarm.html"
    context_object_name = "alarm"
    queryset = Alarm.objects.select_related("fabric", "acknowledged_by", "cleared_by", "node", "port__node")

    def get_queryset(self):
        """Another tenant's alarm does not exist for a tenant member (``events.scoping``)."""
        return scope_alarms(super().get_queryset(), self.request.user)

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        alarm = self.object
        ctx["events"] = scope_events(
            Event.objects.filter(fabric=alarm.fabric, object_key=alarm.object_key, at__gte=alarm.first_seen),
            self.request.user,
        ).order_by("-at")[:100]
        return ctx


class AlarmActionView(RoleMixin, View):
    """POST acknowledge/clear from the page (the live page uses the REST API instead)."""

    required_role = Role.OPERATOR

    def post(self, request, pk: int, op: str):
        try:
            if op == "acknowledge":
                services.acknowledge(pk, request.user)
            elif op == "clear":
                services.clear_alarm(pk, request.user, request.POST.get("reason", ""))
            else:
                raise Http404(op)
        except Alarm.DoesNotExist:
            raise Http404("no such alarm")
        except ValueError as exc:
            messages.error(request, str(exc))
        return redirect("events:alarm", pk=pk)


class EventListView(RoleMixin, ListView):
    """Events with filters (severity, type, category, object, time range)."""

    template_name = "events/event_list.html"
    context_object_name = "events"
    paginate_by = 100

    def get_queryset(self):
        events = scope_events(Event.objects.select_related("fabric"), self.request.user)  # events.scoping
        self.filterset = EventFilterSet(self.request.GET, queryset=events)
        return self.filterset.qs

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        ctx["filter"] = self.filterset
        ctx["codes"] = [t.code for t in registry.all_types()]
        ctx["severities"] = [(s.value, s.label) for s in Severity]
        query = self.request.GET.copy()
        query.pop("page", None)
        ctx["query"] = query.urlencode()
        return ctx


class HealthListView(RoleMixin, ListView):
    """Health reports, newest first, and "Run now" per fabric (Operator)."""

    template_name = "events/health_list.html"
    context_object_name = "reports"
    paginate_by = 50
    queryset = HealthReport.objects.select_related("fabric", "created_by").defer("findings")

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        ctx["fabrics"] = _fabrics()
        return ctx

    def post(self, request):
        if not has_role(request.user, Role.OPERATOR):
            raise PermissionDenied("Running a health check needs the operator role.")
        fabric = get_object_or_404(_fabrics(), pk=int_param(request.POST.get("fabric")) or 0)
        report = run_health_report(fabric, request.user)
        return redirect(report.get_absolute_url())


class HealthReportView(RoleMixin, DetailView):
    template_name = "events/health_report.html"
    context_object_name = "report"
    queryset = HealthReport.objects.select_related("fabric", "created_by")

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        ctx["checks"] = health.CHECKS
        return ctx


class HealthReportJSONView(RoleMixin, View):
    """JSON export of a report (download)."""

    def get(self, request, pk: int):
        report = get_object_or_404(HealthReport.objects.select_related("fabric", "created_by"), pk=pk)
        response = JsonResponse(health.report_json(report), json_dumps_params={"indent": 2})
        name = f"weft-health-{report.fabric.name}-{report.created:%Y%m%dT%H%M%S}.json"
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response


class EventPolicyListView(RoleMixin, ListView):
    """Event policies (Admin), one per event type."""

    template_name = "events/eventpolicy_list.html"
    context_object_name = "policies"
    required_role = Role.ADMIN

    def get_queryset(self):
        return EventPolicy.objects.prefetch_related("recipient_users", "recipient_groups")

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        ctx["default_recipients"] = default_recipients()
        ctx["default_from_admins"] = not settings.WEFT_ALERT_EMAILS
        return ctx


class EventPolicyEditView(RoleMixin, UpdateView):
    """Edit one policy (Admin); changes are audited."""

    template_name = "events/eventpolicy_edit.html"
    form_class = EventPolicyForm
    model = EventPolicy
    context_object_name = "policy"
    required_role = Role.ADMIN

    def form_valid(self, form):
        with transaction.atomic():  # the edit and its audit entry commit together
            old = EventPolicy.objects.select_for_update().get(pk=self.object.pk)
            response = super().form_valid(form)
            fields = ["enabled", "severity", "threshold", "consecutive", "ttl_s", "raise_alarm", "email",
                      "notify_clear", "digest", "recipient_emails"]  # fmt: skip
            audit.record("event_policy.update", self.object, model_changes(old, self.object, fields))
        messages.success(self.request, f"Policy {self.object.code} saved.")
        return response

    def get_success_url(self):
        return reverse("events:eventpolicy_list")


class AlertTargetListView(RoleMixin, ListView):
    """Alert targets beside mail (Admin): each with its kind, address, minimum severity, and its
    last delivery; a form adds one (``events.alerting``)."""

    template_name = "events/alerttarget_list.html"
    context_object_name = "targets"
    required_role = Role.ADMIN
    model = AlertTarget

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        for t in ctx["targets"]:
            t.last = deliveries(t, 1).first()
        ctx["form"] = kwargs.get("form") or AlertTargetForm()
        return ctx


class AlertTargetCreateView(RoleMixin, CreateView):
    """Add a target (Admin, audited ``alert_target.create``, the secret left out)."""

    form_class = AlertTargetForm
    model = AlertTarget
    required_role = Role.ADMIN
    template_name = "events/alerttarget_list.html"

    def form_invalid(self, form):
        view = AlertTargetListView()
        view.setup(self.request)
        view.object_list = view.get_queryset()
        return view.render_to_response(view.get_context_data(form=form), status=400)

    def form_valid(self, form):
        with transaction.atomic():
            response = super().form_valid(form)
            fields = ["name", "kind", "url", "min_severity", "enabled"]
            audit.record("alert_target.create", self.object,
                         {**{f: getattr(self.object, f) for f in fields}, "secret_set": bool(self.object.secret)})  # fmt: skip
        messages.success(self.request, f"Alert target {self.object.name} added.")
        return response


class AlertTargetView(RoleMixin, UpdateView):
    """One target (Admin): edit it, "Send test" (the result shown here), delete it, and its
    delivery log (the last 50 messages with status, attempts, answer and error)."""

    template_name = "events/alerttarget.html"
    form_class = AlertTargetForm
    model = AlertTarget
    context_object_name = "target"
    required_role = Role.ADMIN

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        ctx["deliveries"] = list(deliveries(self.object, 50))
        test_id = self.request.session.pop(f"alert-target-test-{self.object.pk}", None)
        ctx["test"] = next((d for d in ctx["deliveries"] if d.pk == test_id), None)
        return ctx

    def form_valid(self, form):
        with transaction.atomic():
            old = AlertTarget.objects.select_for_update().get(pk=self.object.pk)
            response = super().form_valid(form)
            changes = model_changes(old, self.object, ["name", "kind", "url", "min_severity", "enabled"])
            if old.secret != self.object.secret:
                changes["secret"] = "changed"
            audit.record("alert_target.update", self.object, changes)
        messages.success(self.request, f"Alert target {self.object.name} saved.")
        return response

    def get_success_url(self):
        return reverse("events:alerttarget", args=[self.object.pk])


class AlertTargetActionView(RoleMixin, View):
    """POST ``test`` (send a test message now; the page shows its delivery) or ``delete`` (Admin)."""

    required_role = Role.ADMIN

    def post(self, request, pk: int, op: str):
        target = get_object_or_404(AlertTarget, pk=pk)
        if op == "test":
            row = send_test(target, user=request.user)
            request.session[f"alert-target-test-{target.pk}"] = row.pk
            return redirect("events:alerttarget", pk=target.pk)
        if op == "delete":
            with transaction.atomic():
                audit.record("alert_target.delete", target)
                name = target.name
                target.delete()
            messages.success(request, f"Alert target {name} deleted.")
            return redirect("events:alerttarget_list")
        raise Http404(f"no action {op!r}")

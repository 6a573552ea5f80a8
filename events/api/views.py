"""REST API of events, alarms (acknowledge/clear), event policies (Admin) and health reports."""

from __future__ import annotations

from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.filters import OrderingFilter
from rest_framework.response import Response

from accounts.api.mixins import AuditedWritesMixin
from accounts.audit import model_changes
from accounts.roles import Role
from fabric.models import Fabric

from .. import services
from ..alerting import deliveries, send_test
from ..filtersets import AlarmFilterSet, EventFilterSet, EventPolicyFilterSet
from ..models import Alarm, AlertTarget, Event, EventPolicy, HealthReport, severity_rank
from ..reports import run_health_report
from ..scoping import scope_alarms, scope_events
from .serializers import (
    AlarmClearSerializer,
    AlarmSerializer,
    AlertTargetSerializer,
    DeliverySerializer,
    EventPolicySerializer,
    EventSerializer,
    HealthReportSerializer,
)


class SeverityOrdering(OrderingFilter):
    """``?ordering=severity`` (or ``-severity``) sorts by severity rank (Info < Warning < Minor <
    Critical, ``events.choices.SEVERITY_RANK``), not by the stored strings' alphabetical order; the
    other fields sort as DRF's OrderingFilter does, with ``id`` last so pages are stable."""

    def filter_queryset(self, request, queryset, view):
        ordering = self.get_ordering(request, queryset, view)
        if not ordering:
            return queryset
        if any(o.lstrip("-") == "severity" for o in ordering):
            queryset = queryset.alias(severity_rank=severity_rank())
            ordering = [
                o.replace("severity", "severity_rank") if o.lstrip("-") == "severity" else o for o in ordering
            ]
        if not any(o.lstrip("-") == "id" for o in ordering):
            ordering = [*ordering, "-id"]
        return queryset.order_by(*ordering)


_FILTERS = [DjangoFilterBackend, SeverityOrdering]


class EventViewSet(viewsets.ReadOnlyModelViewSet):
    """Events, newest first; filters: severity, type, category, object, time range (see filterset)."""

    queryset = Event.objects.select_related("fabric")
    serializer_class = EventSerializer
    filterset_class = EventFilterSet
    filter_backends = _FILTERS
    ordering_fields = ["at", "severity", "id"]

    def get_queryset(self):
        """Another tenant's events do not exist for a tenant member (``events.scoping``)."""
        return scope_events(super().get_queryset(), self.request.user)


class AlarmViewSet(viewsets.ReadOnlyModelViewSet):
    """Alarms (open and past). ``acknowledge`` and ``clear`` need the Operator role."""

    queryset = Alarm.objects.select_related("fabric", "acknowledged_by", "cleared_by")
    serializer_class = AlarmSerializer
    filterset_class = AlarmFilterSet
    filter_backends = _FILTERS
    ordering_fields = ["last_seen", "first_seen", "severity", "count", "id"]
    action_roles = {"acknowledge": Role.OPERATOR, "clear": Role.OPERATOR}

    def get_queryset(self):
        """Another tenant's alarms do not exist for a tenant member (``events.scoping``)."""
        return scope_alarms(super().get_queryset(), self.request.user)

    @extend_schema(request=None, responses=AlarmSerializer)
    @action(detail=True, methods=["post"])
    def acknowledge(self, request, pk=None):
        alarm = self.get_object()
        try:
            alarm = services.acknowledge(alarm.pk, request.user)
        except ValueError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(AlarmSerializer(alarm).data)

    @extend_schema(request=AlarmClearSerializer, responses=AlarmSerializer)
    @action(detail=True, methods=["post"])
    def clear(self, request, pk=None):
        alarm = self.get_object()
        body = AlarmClearSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            alarm = services.clear_alarm(alarm.pk, request.user, body.validated_data.get("reason", ""))
        except ValueError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(AlarmSerializer(alarm).data)


class EventPolicyViewSet(AuditedWritesMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                         mixins.UpdateModelMixin, viewsets.GenericViewSet):  # fmt: skip
    """Event policies, one per event type (Admin: read and edit; types come from the event-type registry,
    rows from ``ensure_policies`` after migrate).
    An edit and its ``event_policy.update`` audit entry commit together."""

    queryset = EventPolicy.objects.prefetch_related("recipient_users", "recipient_groups")
    serializer_class = EventPolicySerializer
    filterset_class = EventPolicyFilterSet
    read_role = Role.ADMIN
    write_role = Role.ADMIN
    audit_prefix = "event_policy"

    def audit_update_changes(self, serializer, before, after):
        fields = ["enabled", "severity", "threshold", "consecutive", "clear_consecutive", "clear_factor", "ttl_s", "raise_alarm", "email",
                  "notify_clear", "digest", "recipient_emails"]  # fmt: skip
        return model_changes(before, after, fields)


class HealthReportViewSet(viewsets.ReadOnlyModelViewSet):
    """Health reports; ``run`` (POST ``{"fabric": id}``, Operator) runs the checks now."""

    queryset = HealthReport.objects.select_related("fabric", "created_by")
    serializer_class = HealthReportSerializer
    filterset_fields = ["fabric", "status", "trigger"]
    action_roles = {"run": Role.OPERATOR}

    @extend_schema(request=None, responses=HealthReportSerializer)
    @action(detail=False, methods=["post"])
    def run(self, request):
        try:
            fabric = Fabric.objects.get(pk=int(request.data.get("fabric")))
        except (TypeError, ValueError, Fabric.DoesNotExist):
            return Response({"fabric": ["a fabric id is required"]}, status=status.HTTP_400_BAD_REQUEST)
        report = run_health_report(fabric, request.user)
        return Response(HealthReportSerializer(report).data, status=status.HTTP_201_CREATED)


class AlertTargetViewSet(AuditedWritesMixin, viewsets.ModelViewSet):
    """Alert targets beside mail (Admin): signed webhooks, Slack, Alertmanager, syslog
    (``events.alerting``). ``test`` (POST) sends a test message now and answers its delivery
    (``status``, ``response_code``, ``last_error``); ``deliveries`` (GET) is the target's
    delivery log, newest first (``?limit=``, at most 200). Writes are audited
    (``alert_target.*``; the secret is never written to the audit log)."""

    queryset = AlertTarget.objects.all()
    serializer_class = AlertTargetSerializer
    filterset_fields = ["kind", "enabled"]
    read_role = Role.ADMIN
    write_role = Role.ADMIN
    action_roles = {"test": Role.ADMIN, "deliveries": Role.ADMIN}
    audit_prefix = "alert_target"

    def audit_create_changes(self, serializer, instance):
        data = {k: v for k, v in serializer.validated_data.items() if k != "secret"}
        return {**data, "secret_set": bool(instance.secret)}

    def audit_update_changes(self, serializer, before, after):
        fields = [f for f in serializer.validated_data if f != "secret"]
        changes = model_changes(before, after, fields)
        if before.secret != after.secret:
            changes["secret"] = "changed"
        return changes

    @extend_schema(request=None, responses=DeliverySerializer)
    @action(detail=True, methods=["post"])
    def test(self, request, pk=None):
        row = send_test(self.get_object(), user=request.user)
        return Response(DeliverySerializer(row).data)

    @extend_schema(responses=DeliverySerializer(many=True))
    @action(detail=True, methods=["get"])
    def deliveries(self, request, pk=None):
        try:
            limit = min(max(int(request.query_params.get("limit", 50)), 1), 200)
        except ValueError:
            return Response({"limit": "an integer"}, status=status.HTTP_400_BAD_REQUEST)
        return Response(DeliverySerializer(deliveries(self.get_object(), limit), many=True).data)

"""REST serializers of events, alarms, event policies and health reports."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.validators import validate_email
from rest_framework import serializers

from outbound.models import WebhookDelivery

from .. import registry
from ..models import Alarm, AlertTarget, Event, EventPolicy, HealthReport, target_url_error


class EventSerializer(serializers.ModelSerializer):
    type = serializers.CharField(source="code", read_only=True)
    name = serializers.SerializerMethodField()
    fabric_name = serializers.CharField(source="fabric.name", read_only=True, default="")

    class Meta:
        model = Event
        fields = ["id", "fabric", "fabric_name", "at", "type", "code", "name", "severity", "category",
                  "object_type", "object_key", "object_repr", "node", "port", "message", "details"]  # fmt: skip
        brief_fields = ["id", "at", "code", "severity", "object_repr"]

    def get_name(self, obj) -> str:
        return registry.get(obj.code).name


class AlarmSerializer(serializers.ModelSerializer):
    type = serializers.CharField(source="code", read_only=True)
    name = serializers.CharField(read_only=True)
    fabric_name = serializers.CharField(source="fabric.name", read_only=True, default="")
    acknowledged_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    cleared_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    url = serializers.CharField(source="get_absolute_url", read_only=True)
    state_text = serializers.CharField(read_only=True)

    class Meta:
        model = Alarm
        fields = ["id", "fabric", "fabric_name", "type", "code", "name", "severity", "category", "state",
                  "object_type", "object_key", "object_repr", "node", "port", "message", "details",
                  "first_seen", "last_seen", "count", "ttl_s", "raised_event", "acknowledged_by",
                  "acknowledged_at", "cleared_at", "cleared_event", "cleared_by", "clear_reason", "state_text", "url"]  # fmt: skip
        read_only_fields = fields
        brief_fields = ["id", "code", "severity", "state", "object_repr"]


class AlarmClearSerializer(serializers.Serializer):
    reason = serializers.CharField(required=False, allow_blank=True, max_length=150)


class EventPolicySerializer(serializers.ModelSerializer):
    name = serializers.CharField(read_only=True)
    category = serializers.CharField(read_only=True)
    threshold_unit = serializers.SerializerMethodField()
    recipient_users = serializers.SlugRelatedField(
        slug_field="username", many=True, required=False, queryset=get_user_model().objects.all()
    )
    recipient_groups = serializers.SlugRelatedField(
        slug_field="name", many=True, required=False, queryset=Group.objects.all()
    )

    class Meta:
        model = EventPolicy
        fields = ["id", "code", "name", "category", "enabled", "severity", "threshold", "threshold_unit",
                  "consecutive", "clear_consecutive", "clear_factor", "ttl_s", "raise_alarm", "email", "notify_clear", "digest",
                  "recipient_emails", "recipient_users", "recipient_groups", "updated"]  # fmt: skip
        read_only_fields = ["code", "updated"]

    def get_threshold_unit(self, obj) -> str:
        return registry.get(obj.code).threshold_unit

    def validate_recipient_emails(self, value: str) -> str:
        for address in [a.strip() for a in value.replace(";", ",").replace("\n", ",").split(",")]:
            if address:
                try:
                    validate_email(address)
                except Exception:
                    raise serializers.ValidationError(f"{address!r} is not an email address")
        return value

    def validate_clear_consecutive(self, value: int) -> int:
        if value < 1:
            raise serializers.ValidationError("clear_consecutive must be at least 1 sweep")
        return value

    def validate_clear_factor(self, value: float) -> float:
        if not 0 < value <= 1:
            raise serializers.ValidationError(
                "clear_factor must be in (0, 1]: the clear level is threshold × factor"
            )
        return value

    def validate_consecutive(self, value: int) -> int:
        if value < 1:
            raise serializers.ValidationError("consecutive must be at least 1 sweep")
        return value


class HealthReportSerializer(serializers.ModelSerializer):
    fabric_name = serializers.CharField(source="fabric.name", read_only=True)
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)

    class Meta:
        model = HealthReport
        fields = ["id", "fabric", "fabric_name", "created", "created_by", "trigger", "status", "duration_s",
                  "summary", "findings"]  # fmt: skip
        read_only_fields = fields


class AlertTargetSerializer(serializers.ModelSerializer):
    """An alert target (``events.models.AlertTarget``). ``secret`` is write-only; ``secret_set``
    says whether one is stored. ``url`` is checked against ``kind`` (``target_url_error``)."""

    secret = serializers.CharField(write_only=True, required=False, allow_blank=True, max_length=200)
    secret_set = serializers.SerializerMethodField()

    class Meta:
        model = AlertTarget
        fields = ["id", "name", "kind", "url", "secret", "secret_set", "min_severity", "enabled", "created"]
        read_only_fields = ["created"]

    def get_secret_set(self, obj) -> bool:
        return bool(obj.secret)

    def validate(self, attrs):
        kind = attrs.get("kind", getattr(self.instance, "kind", ""))
        url = attrs.get("url", getattr(self.instance, "url", ""))
        error = target_url_error(kind, url)
        if error:
            raise serializers.ValidationError({"url": error})
        return attrs


class DeliverySerializer(serializers.ModelSerializer):
    """One message to a target and its attempts (``outbound.models.WebhookDelivery``)."""

    class Meta:
        model = WebhookDelivery
        fields = ["id", "created", "event", "source", "status", "attempts", "response_code", "last_error",
                  "next_attempt_at", "delivered_at", "body"]  # fmt: skip

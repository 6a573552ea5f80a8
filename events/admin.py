"""Django admin for events, alarms, policies, the mail outbox and health reports (read mostly)."""

from django.contrib import admin

from .models import Alarm, Event, EventPolicy, HealthReport, Notification


@admin.register(Event)
class EventAdmin(admin.ModelAdmin):
    list_display = ["at", "fabric", "severity", "code", "object_repr", "evaluated"]
    list_filter = ["severity", "category", "code", "fabric"]
    search_fields = ["object_key", "object_repr", "message"]
    date_hierarchy = "at"


@admin.register(Alarm)
class AlarmAdmin(admin.ModelAdmin):
    list_display = ["last_seen", "fabric", "severity", "code", "object_repr", "state", "count"]
    list_filter = ["state", "severity", "code", "fabric"]
    search_fields = ["object_key", "object_repr", "message"]


@admin.register(EventPolicy)
class EventPolicyAdmin(admin.ModelAdmin):
    list_display = [
        "code",
        "enabled",
        "severity",
        "raise_alarm",
        "email",
        "notify_clear",
        "digest",
        "threshold",
    ]
    list_editable = ["enabled", "severity", "raise_alarm", "email"]
    filter_horizontal = ["recipient_users", "recipient_groups"]


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = ["created", "recipient", "kind", "status", "sent_at", "subject"]
    list_filter = ["status", "kind"]
    search_fields = ["recipient", "subject"]


@admin.register(HealthReport)
class HealthReportAdmin(admin.ModelAdmin):
    list_display = ["created", "fabric", "status", "trigger", "created_by"]
    list_filter = ["status", "trigger", "fabric"]

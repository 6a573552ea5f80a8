"""Django admin of the scheduler app: tenants' fair-share weights are set here (audited as
``tenant_share.create`` / ``update`` / ``delete`` in the admin's transaction). Jobs and their
decisions are listed read-only: the queue service is their one writer (the API submits,
cancels, starts and finishes them)."""

from __future__ import annotations

from django.contrib import admin
from django.db import transaction

from accounts import audit
from core.admin import ReadOnlyAdmin

from .models import Job, JobDecision, TenantShare


@admin.register(TenantShare)
class TenantShareAdmin(admin.ModelAdmin):
    list_display = ["tenant", "weight"]
    search_fields = ["tenant__name"]

    def save_model(self, request, obj: TenantShare, form, change: bool) -> None:
        with transaction.atomic():
            before = TenantShare.objects.filter(pk=obj.pk).first() if change else None
            super().save_model(request, obj, form, change)
            changes = audit.model_changes(before, obj, ["weight"])
            audit.record(f"tenant_share.{'update' if change else 'create'}", obj, changes, user=request.user)

    def delete_model(self, request, obj: TenantShare) -> None:
        with transaction.atomic():
            audit.record("tenant_share.delete", obj, {"weight": obj.weight}, user=request.user)
            super().delete_model(request, obj)

    def delete_queryset(self, request, queryset) -> None:
        with transaction.atomic():
            for obj in queryset:
                self.delete_model(request, obj)


class _ReadOnly(ReadOnlyAdmin):
    """Jobs and decisions are written by the queue service only."""


@admin.register(Job)
class JobAdmin(_ReadOnly):
    list_display = [
        "id",
        "name",
        "tenant",
        "pool",
        "state",
        "pending_code",
        "priority_class",
        "count",
        "submitted_at",
    ]
    list_filter = ["state", "priority_class", "kind", "pending_code"]
    search_fields = ["name", "tenant__name", "pool__name"]


@admin.register(JobDecision)
class JobDecisionAdmin(_ReadOnly):
    list_display = ["id", "job", "code", "count", "at", "last_at"]
    list_filter = ["code"]

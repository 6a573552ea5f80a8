"""Admin classes the apps share."""

from __future__ import annotations

from django.contrib import admin


class ReadOnlyAdmin(admin.ModelAdmin):
    """A model the admin shows but never adds, changes or deletes: its rows have one writer
    elsewhere (a service, a discovery, the audit log), which records and audits what it writes."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

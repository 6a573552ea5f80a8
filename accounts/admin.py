"""Django admin: the audit log (view only, for everyone), API tokens (view and revoke), and users
with the rules of ``accounts.guards``."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
from django.core.exceptions import PermissionDenied

from core.admin import ReadOnlyAdmin

from .models import ApiToken, AuditEntry
from .tokens import revoke_token


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    """The audit log, view only: no add, change or delete, superusers included (the model and,
    on PostgreSQL, a trigger refuse them too)."""

    list_display = ("at", "username", "action", "object_type", "object_repr", "remote_addr")
    list_filter = ("action", "object_type")
    search_fields = ("username", "object_repr", "action")
    readonly_fields = [f.name for f in AuditEntry._meta.fields]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """API tokens: listed (never their keys) and revoked (deleted, audited); new ones come from the
    API or ``manage.py create_token``."""

    list_display = ("prefix", "user", "name", "created", "expires_at", "last_used_at")
    list_filter = ("user",)
    search_fields = ("prefix", "name", "user__username")
    readonly_fields = ("user", "name", "prefix", "created", "expires_at", "last_used_at")
    exclude = ("key_hash",)

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        if obj is not None and obj.user.is_superuser and not request.user.is_superuser:
            return False
        return super().has_delete_permission(request, obj)

    def delete_model(self, request, obj) -> None:
        revoke_token(obj, reason="revoked in the admin")

    def delete_queryset(self, request, queryset) -> None:
        for token in queryset.select_related("user"):
            if self.has_delete_permission(request, token):
                revoke_token(token, reason="revoked in the admin")


User = get_user_model()
if admin.site.is_registered(User):
    admin.site.unregister(User)


@admin.register(User)
class GuardedUserAdmin(DjangoUserAdmin):
    """Django's user admin with ``accounts.guards``' rules for staff who are not superusers:
    superusers are view only; one's own superuser/staff/active flags, groups (roles) and
    permissions are read-only, and one cannot delete oneself."""

    def has_change_permission(self, request, obj=None) -> bool:
        if obj is not None and obj.is_superuser and not request.user.is_superuser:
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None) -> bool:
        if obj is not None and (
            obj.pk == request.user.pk or (obj.is_superuser and not request.user.is_superuser)
        ):
            return False
        return super().has_delete_permission(request, obj)

    def delete_queryset(self, request, queryset) -> None:
        """The bulk "delete selected" action checks the model permission only: check each user."""
        if any(not self.has_delete_permission(request, user) for user in queryset):
            raise PermissionDenied("The selection holds a user you may not delete.")
        super().delete_queryset(request, queryset)

    def get_readonly_fields(self, request, obj=None):
        fields = list(super().get_readonly_fields(request, obj))
        if not request.user.is_superuser:
            fields += ["is_superuser", "user_permissions"]
            if obj is not None and obj.pk == request.user.pk:
                fields += ["is_staff", "is_active", "groups"]
        return fields

"""Django admin of the fabric app: fabrics are edited here (as with the REST API: live access
``local_hca`` / ``ca_name`` / ``ca_port`` / ``tool_env``, periodic discovery and polling), audited
as ``fabric.create`` / ``fabric.update`` / ``fabric.delete`` in the admin's transaction, with the
same validation as the API; a fabric created (or given live access) here gets its first discovery
queued (``fabric.services.requests.discover_new_fabric``). The topology (nodes, ports, links,
discoveries) comes from discovery and imports: listed and searchable by GUID and description,
never added, changed or deleted here (no bulk delete of topology rows)."""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.db import transaction

from accounts import audit
from core.admin import ReadOnlyAdmin

from .guid import normalize_guid
from .models import Discovery, Fabric, Link, Node, Port
from .services.requests import discover_new_fabric

#: Fabric fields an admin edits (the rest is written by discovery and the SM watch).
EDITABLE = [
    "name",
    "description",
    "subnet_prefix",
    "site",
    "local_hca",
    "ca_name",
    "ca_port",
    "tool_env",
    "discovery_timeout_s",
    "discovery_enabled",
    "polling_enabled",
]


class FabricForm(forms.ModelForm):
    """The API's validation (``fabric.api.serializers.FabricSerializer``): a GUID-shaped subnet
    prefix, and a ``tool_env`` of lab variables only (``check_tool_env``: no arbitrary
    ``LD_PRELOAD`` for the diags)."""

    class Meta:
        model = Fabric
        fields = EDITABLE

    def clean_subnet_prefix(self) -> str:
        value = self.cleaned_data.get("subnet_prefix") or ""
        try:
            return normalize_guid(value) if value else value
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from exc

    def clean_tool_env(self) -> dict:
        from .collectors.tools import check_tool_env

        try:
            return check_tool_env(self.cleaned_data.get("tool_env") or {})
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from exc


@admin.register(Fabric)
class FabricAdmin(admin.ModelAdmin):
    """Fabrics, audited writes (``accounts.audit.record`` in the same transaction as the change)."""

    form = FabricForm
    list_display = ("name", "description", "site", "live_access", "discovery_enabled", "polling_enabled",
                    "master_sm_guid", "last_discovery", "created")  # fmt: skip
    list_filter = ("site", "discovery_enabled", "polling_enabled", "local_hca")
    search_fields = ("name", "description", "ca_name", "master_sm_guid")
    readonly_fields = ("master_sm_guid", "master_sm_lid", "last_discovery", "created")

    @admin.display(boolean=True, description="live access")
    def live_access(self, obj: Fabric) -> bool:
        return obj.has_live_access

    def save_model(self, request, obj: Fabric, form, change: bool) -> None:
        with transaction.atomic():
            before = Fabric.objects.select_for_update().filter(pk=obj.pk).first() if change else None
            had_access = before.has_live_access if before is not None else False
            super().save_model(request, obj, form, change)
            if change:
                changes = audit.model_changes(before, obj, list(form.changed_data))
                audit.record("fabric.update", obj, changes, user=request.user)
            else:
                values = audit.model_changes(None, obj, EDITABLE)
                audit.record("fabric.create", obj, {k: v[1] for k, v in values.items()}, user=request.user)
            if obj.has_live_access and not had_access:
                discover_new_fabric(obj, request.user)  # on commit

    def get_deleted_objects(self, objs, request):
        """Deleting a fabric deletes its topology with it: the topology admins' "no delete" is about
        single rows, so it does not block the fabric's delete (it would, as a missing permission)."""
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        topology = {m._meta.verbose_name for m in (Node, Port, Link, Discovery)}
        return deleted, counts, {p for p in perms_needed if p not in topology}, protected

    def delete_model(self, request, obj: Fabric) -> None:
        with transaction.atomic():
            audit.record("fabric.delete", obj, {"name": obj.name}, user=request.user)
            super().delete_model(request, obj)

    def delete_queryset(self, request, queryset) -> None:
        """The "delete selected" action: one audited delete per fabric, all in one transaction."""
        with transaction.atomic():
            for fabric in queryset:
                self.delete_model(request, fabric)


class TopologyAdmin(ReadOnlyAdmin):
    """Read-only: topology rows are written by discovery and imports only."""


@admin.register(Node)
class NodeAdmin(TopologyAdmin):
    list_display = ("description", "node_guid", "node_type", "lid", "num_ports", "fabric", "last_seen",
                    "unreachable_since")  # fmt: skip
    list_filter = ("fabric", "node_type")
    search_fields = ("node_guid", "system_image_guid", "description")
    list_select_related = ("fabric",)


@admin.register(Port)
class PortAdmin(TopologyAdmin):
    list_display = ("__str__", "port_guid", "lid", "state", "width", "speed", "rate_gbps")
    list_filter = ("node__fabric", "state")
    search_fields = ("port_guid", "node__node_guid", "node__description")
    list_select_related = ("node",)


@admin.register(Link)
class LinkAdmin(TopologyAdmin):
    list_display = ("__str__", "width", "speed", "rate_gbps", "fabric", "first_seen")
    list_filter = ("fabric", "speed")
    search_fields = ("port_a__node__node_guid", "port_a__node__description", "port_a__port_guid",
                     "port_b__node__node_guid", "port_b__node__description", "port_b__port_guid")  # fmt: skip
    list_select_related = ("fabric", "port_a__node", "port_b__node")


@admin.register(Discovery)
class DiscoveryAdmin(TopologyAdmin):
    list_display = ("started", "fabric", "source", "status", "filename", "added", "removed", "changed",
                    "duration_s")  # fmt: skip
    list_filter = ("fabric", "source", "status")
    search_fields = ("filename", "error")
    date_hierarchy = "started"
    list_select_related = ("fabric",)
    exclude = ("diff",)  # can be megabytes; the fabric's changes page shows it

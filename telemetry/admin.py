"""Admin: sweeps and latest port counters (read-only), with an audited counter-reset action."""

from __future__ import annotations

from django.contrib import admin, messages

from .models import PortCounters, Sweep


@admin.register(Sweep)
class SweepAdmin(admin.ModelAdmin):
    list_display = (
        "started",
        "fabric",
        "status",
        "ports",
        "stale",
        "saturated",
        "saturated_ports",
        "resets",
        "duration_s",
        "mechanism",
    )
    list_filter = ("fabric", "status", "mechanism")
    date_hierarchy = "started"
    readonly_fields = [f.name for f in Sweep._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(PortCounters)
class PortCountersAdmin(admin.ModelAdmin):
    list_display = (
        "port",
        "sampled_at",
        "xmit_bytes_per_s",
        "rcv_bytes_per_s",
        "utilisation",
        "congestion",
        "xmit_wait",
        "symbol_errors",
        "stale",
        "reset",
    )
    list_filter = ("stale", "reset", "extended", "port__node__fabric")
    search_fields = ("port__node__name", "port__node__description", "port__node__node_guid")
    list_select_related = ("port__node",)
    readonly_fields = [f.name for f in PortCounters._meta.fields]
    actions = ["reset_counters"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    @admin.action(description="Reset the counters of the selected ports on the fabric (audited)")
    def reset_counters(self, request, queryset):
        """Clear the device counters (PerfMgt Set) of the selected ports; other tools reading the
        same counters will see the reset too. Audited as ``telemetry.reset_counters``."""
        from .services.sweep import reset_ports

        ports = [pc.port for pc in queryset.select_related("port__node")]
        try:
            out = reset_ports(ports, user=request.user)
        except Exception as exc:  # collector failures are shown to the operator, not a 500
            self.message_user(request, f"reset failed: {exc}", messages.ERROR)
            return
        level = messages.WARNING if out["failed"] else messages.SUCCESS
        self.message_user(request, f"counters reset on {out['ports']} ports ({out['failed']} failed)", level)

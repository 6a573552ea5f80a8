"""Device pages (read-only, Viewer): the device list and a device's page (identification, poll
state, interfaces with rates, sensors, LLDP neighbours, open alarms). Credentials are configured
through the API (Admin) and are never shown."""

from __future__ import annotations

from django.db.models import Count, Q
from django.views.generic import DetailView, ListView

from events.models import Alarm
from fabric.views import RoleRequiredMixin

from .models import Device


class DeviceListView(RoleRequiredMixin, ListView):
    """Every device with its poll state, identification and interface count."""

    template_name = "devices/device_list.html"
    context_object_name = "devices"
    paginate_by = 200

    def get_queryset(self):
        return (
            Device.objects.select_related("fabric")
            .annotate(
                n_ifaces=Count("interfaces", filter=Q(interfaces__present=True), distinct=True),
                n_down=Count(
                    "interfaces",
                    filter=Q(interfaces__present=True, interfaces__admin_status="up")
                    & ~Q(interfaces__oper_status="up"),
                    distinct=True,
                ),
            )
            .order_by("name")
        )


class DeviceView(RoleRequiredMixin, DetailView):
    """A device: identification, poll state, interfaces (rates), sensors, LLDP neighbours, alarms."""

    template_name = "devices/device.html"
    context_object_name = "device"
    queryset = Device.objects.select_related("fabric", "node")

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        d = self.object
        ctx["interfaces"] = list(d.interfaces.filter(present=True).order_by("if_index"))
        ctx["sensors"] = list(d.sensors.order_by("kind", "index"))
        ctx["neighbours"] = list(d.neighbours.select_related("interface", "remote").order_by("local_port"))
        ctx["alarms"] = list(
            Alarm.objects.open()
            .filter(fabric_id=d.fabric_id)
            .filter(Q(object_key=d.name) | Q(object_key__startswith=d.name + "/"))
            .by_severity()
        )
        return ctx

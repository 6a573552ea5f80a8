"""Device pages: the device list and a device's page (Viewer: identification, poll state,
interfaces with rates, sensors, LLDP neighbours, open alarms), and the device form (Admin: add or
edit a device and its credentials, which are write-only and never shown; audited without them;
delete a device after a confirmation)."""

from __future__ import annotations

from django.contrib import messages
from django.db.models import Count, Q
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect
from django.views.generic import DetailView, FormView, ListView

from accounts.roles import Role
from fabric.views import RoleRequiredMixin

from .forms import DeviceForm
from .models import DOWN_OPER_STATES, Device
from .services.config import delete_device, open_alarms, save_device


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
                    filter=Q(
                        interfaces__present=True,
                        interfaces__admin_status="up",
                        interfaces__oper_status__in=DOWN_OPER_STATES,
                    ),
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
        # the history chart starts on the busiest interface (else the first one that is up)
        busy = [i for i in ctx["interfaces"] if i.utilisation is not None]
        up = [i for i in ctx["interfaces"] if i.oper_status == "up"]
        ctx["chart_interface"] = (
            max(busy, key=lambda i: i.utilisation) if busy else (up or ctx["interfaces"] or [None])[0]
        )
        ctx["sensors"] = list(d.sensors.order_by("kind", "index"))
        ctx["neighbours"] = list(d.neighbours.select_related("interface", "remote").order_by("local_port"))
        ctx["alarms"] = list(open_alarms(d).by_severity())
        return ctx


class DeviceFormView(RoleRequiredMixin, FormView):
    """Add (no ``pk``) or edit a device and its SNMP credentials (Admin); one transaction with its
    audit entry (``devices.services.config.save_device``), credentials never rendered or audited."""

    template_name = "devices/device_form.html"
    form_class = DeviceForm
    required_role = Role.ADMIN

    def dispatch(self, request, *args, **kwargs):
        self.device = get_object_or_404(Device, pk=kwargs["pk"]) if "pk" in kwargs else None
        return super().dispatch(request, *args, **kwargs)

    def get_form_kwargs(self):
        return {**super().get_form_kwargs(), "instance": self.device or Device()}

    def get_context_data(self, **kwargs):
        return {**super().get_context_data(**kwargs), "device": self.device}

    def form_invalid(self, form):
        """The form again with its errors located, as a 400 (a user's mistake is a 4xx)."""
        return self.render_to_response(self.get_context_data(form=form), status=400)

    def form_valid(self, form):
        try:
            device = save_device(form.values(), form.secrets(), self.device)
        except Device.DoesNotExist:
            raise Http404("the device was deleted meanwhile") from None
        messages.success(self.request, f"Device {device.name} saved.")
        return redirect(device.get_absolute_url())


class DeviceDeleteView(RoleRequiredMixin, DetailView):
    """Delete a device (the role of the device form, Admin): GET asks for the confirmation, POST
    with ``confirm=1`` deletes it with its audit entry (``devices.services.config.delete_device``:
    its interfaces, sensors and LLDP rows go, its open alarms are cleared, its history stays until
    retention drops it) and goes
    back to the device list. Without the confirmation: the page again with the reason, 400."""

    template_name = "devices/device_delete.html"
    context_object_name = "device"
    required_role = DeviceFormView.required_role
    queryset = Device.objects.select_related("fabric")

    def get_context_data(self, **kwargs):
        from .models import DeviceSample

        ctx = super().get_context_data(**kwargs)
        d = self.object
        ctx["counts"] = {
            "interfaces": d.interfaces.count(),
            "sensors": d.sensors.count(),
            "neighbours": d.neighbours.count(),
            "samples": DeviceSample.objects.filter(device_id=d.pk).count(),
            "alarms": open_alarms(d).count(),
        }
        return ctx

    def post(self, request, *args, **kwargs):
        self.object = device = self.get_object()
        if request.POST.get("confirm") != "1":
            ctx = self.get_context_data(object=device, error="Confirm the deletion (tick the box).")
            return self.render_to_response(ctx, status=400)
        try:
            delete_device(device)
        except Device.DoesNotExist:
            raise Http404("the device was deleted meanwhile") from None
        messages.success(request, f"Device {device.name} deleted.")
        return redirect("devices:device_list")

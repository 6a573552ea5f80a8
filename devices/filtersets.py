"""Filters of the devices API (django-filter): by id, fabric, device, name and state."""

from __future__ import annotations

from django_filters import rest_framework as filters

from fabric.filtersets import ModelIdsFilter
from fabric.models import Fabric

from .choices import PollStatus, SnmpVersion
from .models import Device, Interface, Neighbour, Sensor


class DeviceFilterSet(filters.FilterSet):
    fabric = ModelIdsFilter(queryset=Fabric.objects.all())
    status = filters.MultipleChoiceFilter(choices=PollStatus.choices)
    version = filters.MultipleChoiceFilter(choices=SnmpVersion.choices)
    q = filters.CharFilter(method="search", label="name, address or sysName contains")

    class Meta:
        model = Device
        fields = ["id", "name", "address", "enabled", "sys_name", "model", "serial"]

    def search(self, queryset, name, value):
        from django.db.models import Q

        return queryset.filter(
            Q(name__icontains=value) | Q(address__icontains=value) | Q(sys_name__icontains=value)
        )


class InterfaceFilterSet(filters.FilterSet):
    device = ModelIdsFilter(queryset=Device.objects.all())

    class Meta:
        model = Interface
        fields = ["id", "if_index", "name", "admin_status", "oper_status", "hc", "present"]


class SensorFilterSet(filters.FilterSet):
    device = ModelIdsFilter(queryset=Device.objects.all())

    class Meta:
        model = Sensor
        fields = ["id", "index", "kind", "status", "component"]


class NeighbourFilterSet(filters.FilterSet):
    device = ModelIdsFilter(queryset=Device.objects.all())

    class Meta:
        model = Neighbour
        fields = ["id", "local_port", "sys_name", "chassis_id"]

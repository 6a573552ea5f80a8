"""django-filter filtersets of the events app (API and pages)."""

from __future__ import annotations

import django_filters
from django.db.models import Q

from core.fields import BoundedIsoDateTimeFilter

from .models import Alarm, Category, Event, EventPolicy, Severity


class EventFilterSet(django_filters.FilterSet):
    """Filters: ``severity`` (one or more), ``min_severity``, ``type``/``code``, ``category``,
    ``object_type``, ``object`` (natural key exact, or substring of the description), ``node``,
    ``port``, ``fabric`` (id) / ``fabric_name``, time range ``since``/``until`` (ISO 8601)."""

    severity = django_filters.MultipleChoiceFilter(choices=Severity.choices)
    min_severity = django_filters.ChoiceFilter(choices=Severity.choices, method="filter_min_severity")
    type = django_filters.CharFilter(field_name="code")
    code = django_filters.CharFilter(field_name="code")
    category = django_filters.MultipleChoiceFilter(choices=Category.choices)
    object = django_filters.CharFilter(method="filter_object")
    fabric_name = django_filters.CharFilter(field_name="fabric__name")
    since = BoundedIsoDateTimeFilter(field_name="at", lookup_expr="gte")
    until = BoundedIsoDateTimeFilter(field_name="at", lookup_expr="lt")

    class Meta:
        model = Event
        fields = ["fabric", "node", "port", "object_type", "object_key"]

    def filter_object(self, queryset, name, value):
        return queryset.filter(Q(object_key=value) | Q(object_repr__icontains=value))

    def filter_min_severity(self, queryset, name, value):
        order = [s.value for s in Severity]
        return queryset.filter(severity__in=order[order.index(value) :])


class AlarmFilterSet(EventFilterSet):
    """As :class:`EventFilterSet` (time range on ``last_seen``) plus ``state`` and ``open``."""

    state = django_filters.MultipleChoiceFilter(choices=Alarm._meta.get_field("state").choices)
    open = django_filters.BooleanFilter(method="filter_open")
    since = BoundedIsoDateTimeFilter(field_name="last_seen", lookup_expr="gte")
    until = BoundedIsoDateTimeFilter(field_name="first_seen", lookup_expr="lt")

    class Meta:
        model = Alarm
        fields = ["fabric", "node", "port", "object_type", "object_key"]

    def filter_open(self, queryset, name, value):
        return queryset.open() if value else queryset.filter(state="cleared")


class EventPolicyFilterSet(django_filters.FilterSet):
    class Meta:
        model = EventPolicy
        fields = ["code", "enabled", "severity", "raise_alarm", "email"]

"""django-filter filtersets of the scheduler API (``/api/scheduler/``).

Jobs by tenant, pool (ids, or names), state, kind, priority class, pending code, owner and name;
by ``host`` (a host name of its placement) and by the links its traffic crosses (the job→links
index, ``scheduler.JobLink``): ``port`` (a port key ``<guid>/<port>``: jobs whose paths leave by
it) and ``link`` (a link key ``<guid>/<port>-<guid>/<port>``: either direction); decisions by job
and code.
"""

from __future__ import annotations

from django_filters import rest_framework as filters
from rest_framework.exceptions import ValidationError

from fabric.filtersets import ModelIdsFilter
from fabric.keys import port_key, split_link_key, split_port_key
from pools.models import Pool, Tenant

from .choices import JobKind, JobState, PendingCode, PriorityClass
from .models import Job, JobDecision


class JobFilterSet(filters.FilterSet):
    tenant = ModelIdsFilter(queryset=Tenant.objects.all())
    tenant_name = filters.CharFilter(field_name="tenant__name")
    pool = ModelIdsFilter(queryset=Pool.objects.all())
    pool_name = filters.CharFilter(field_name="pool__name")
    state = filters.MultipleChoiceFilter(choices=JobState.choices)
    kind = filters.MultipleChoiceFilter(choices=JobKind.choices)
    priority_class = filters.MultipleChoiceFilter(choices=PriorityClass.choices)
    pending_code = filters.MultipleChoiceFilter(choices=PendingCode.choices)
    owner_name = filters.CharFilter(field_name="owner__username", label="owner user name")
    name_contains = filters.CharFilter(field_name="name", lookup_expr="icontains")
    host = filters.CharFilter(method="filter_host", label="a host of its placement")
    port = filters.CharFilter(method="filter_port", label="its paths leave by this port (<guid>/<port>)")
    link = filters.CharFilter(
        method="filter_link", label="its paths cross this link (<guid>/<port>-<guid>/<port>)"
    )

    def filter_host(self, qs, name, value):
        return qs.filter(placement__has_key=value)

    def filter_port(self, qs, name, value):
        try:
            key = port_key(*split_port_key(value))
        except ValueError as exc:
            raise ValidationError({"port": [str(exc)]}) from None
        return qs.filter(links__port_key=key).distinct()

    def filter_link(self, qs, name, value):
        try:
            ends = split_link_key(value)
        except ValueError as exc:
            raise ValidationError({"link": [str(exc)]}) from None
        return qs.filter(links__port_key__in=[port_key(*e) for e in ends]).distinct()

    class Meta:
        model = Job
        fields = ["id", "name", "preemptible", "owner", "allocation"]


class JobDecisionFilterSet(filters.FilterSet):
    job = ModelIdsFilter(queryset=Job.objects.all())

    class Meta:
        model = JobDecision
        fields = ["id", "code"]

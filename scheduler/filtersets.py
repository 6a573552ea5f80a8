"""django-filter filtersets of the scheduler API (``/api/scheduler/``).

Jobs by tenant, pool (ids, or names), state, kind, priority class, pending code, owner and name;
decisions by job and code.
"""

from __future__ import annotations

from django_filters import rest_framework as filters

from fabric.filtersets import ModelIdsFilter
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

    class Meta:
        model = Job
        fields = ["id", "name", "preemptible", "owner", "allocation"]


class JobDecisionFilterSet(filters.FilterSet):
    job = ModelIdsFilter(queryset=Job.objects.all())

    class Meta:
        model = JobDecision
        fields = ["id", "code"]

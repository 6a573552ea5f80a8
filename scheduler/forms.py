"""Forms of the scheduler pages: submit a whole-GPU job (the queue page's form) and ask where one
would go (the dry run). MIG and fraction jobs, and gang segments, are submitted through the API
(``POST /api/scheduler/jobs/``); the page's form covers the common case."""

from __future__ import annotations

from django import forms

from core.validators import printable_text

from .choices import PriorityClass, TopologyMode
from .locality import TIER_NAMES
from .services.queue import MAX_COUNT, MAX_TIME_LIMIT_S, JobSpec

_TIERS = [("", "any")] + [(name, name.replace("_", " ")) for name in TIER_NAMES]


class JobForm(forms.Form):
    """A whole-GPU job: ``pool`` is one of ``pools`` (the user's visible pools), ``tenant`` is
    needed for a shared pool when the user operates several tenants (one of ``tenants``)."""

    name = forms.CharField(max_length=128, initial="job", validators=[printable_text])
    pool = forms.TypedChoiceField(coerce=int)
    tenant = forms.TypedChoiceField(coerce=int, required=False, empty_value=None)
    count = forms.IntegerField(min_value=1, max_value=MAX_COUNT, initial=8, label="GPUs")
    gpus_per_host = forms.IntegerField(min_value=1, max_value=64, required=False, label="GPUs per host")
    priority_class = forms.ChoiceField(choices=PriorityClass.choices, initial=PriorityClass.NORMAL)
    preemptible = forms.BooleanField(required=False)
    tier = forms.ChoiceField(choices=_TIERS, required=False, label="within one")
    tier_mode = forms.ChoiceField(choices=TopologyMode.choices, initial=TopologyMode.PREFERRED)
    time_limit_s = forms.IntegerField(
        min_value=1, max_value=MAX_TIME_LIMIT_S, required=False, label="time limit (s)"
    )

    def __init__(self, *args, pools=(), tenants=(), **kwargs):
        super().__init__(*args, **kwargs)
        # the tenants' own pools first: the form's default then submits as it stands (a shared
        # pool needs a tenant named when the user operates several)
        ordered = sorted(pools, key=lambda p: (p.tenant_id is None, p.name))
        self.fields["pool"].choices = [
            (p.pk, f"{p.name} ({p.tenant.name if p.tenant_id else 'shared'})") for p in ordered
        ]
        self.fields["tenant"].choices = [("", "the pool's")] + [(t.pk, t.name) for t in tenants]

    def spec(self) -> JobSpec:
        """The submit request of a valid form."""
        v = self.cleaned_data
        return JobSpec(
            name=v["name"], pool_id=v["pool"], tenant_id=v["tenant"], count=v["count"],
            gpus_per_host=v["gpus_per_host"], priority_class=v["priority_class"], preemptible=v["preemptible"],
            tier=v["tier"] or None, tier_mode=v["tier_mode"], time_limit_s=v["time_limit_s"],
        )  # fmt: skip

"""Serializers of the scheduler REST API (``/api/scheduler/``): jobs (full and brief), the submit
body, the bodies of cancel/finish, decisions, queue entries and refusals."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.api.serializers import BaseModelSerializer
from core.fields import IdentityUrlField, OptionalWebUrlField
from core.validators import printable_text
from fabric.api.serializers import PartitionSerializer
from pools.api.serializers import AllocationSerializer, PoolSerializer, TenantSerializer

from ..choices import JobKind, OnFault, PriorityClass, TopologyMode, Traffic
from ..locality import TIER_NAMES
from ..models import Job, JobDecision
from ..services.queue import MAX_COUNT, MAX_SEGMENTS, MAX_TIME_LIMIT_S, describe


@extend_schema_field(OpenApiTypes.OBJECT)
class DecisionField(serializers.JSONField):
    """A decision as the placement engine and the queue explain it: ``code``, ``reasons`` (what
    people read), ``placed`` (host → GPUs), ``tier``/``tier_name``, ``units``, ``lower_bound``,
    ``domain``, ``segments``, ``congested``/``avoided`` (domain keys), ``scoring`` (``paths`` or
    ``leaf``), ``hot_ports``/``avoided_ports`` (``[{key, name, utilisation, congestion}]``: path-aware
    placement's hot ports crossed / avoided), and when they apply
    ``victims``, ``backfilled``, ``reservation`` ``{start, hosts, waits_for}``, ``allocation``."""


class JobSerializer(BaseModelSerializer):
    """A job: its request, priority, topology constraint, state with timestamps and reason, where
    it runs (``placement``: host → GPUs, slices or shares; its pools ``allocation``), the last
    decision with its explanation, and the reservation when it is the queue's head. In a pool with
    job isolation: ``pkey``/``pkey_hex`` (the job PKey it was given, kept after it ends) and
    ``partition`` (its own partition and applied state while it holds GPUs; null after).
    ``idempotency_key``: the ``Idempotency-Key`` its owner submitted it with (empty: none).
    ``faults``: why a ``degraded`` job is degraded (``[{"code", "object_type", "object_key",
    "host", "message", "details"}]``, codes ``scheduler.services.faults.REASON_CODES``; empty
    otherwise), ``degraded_at``; ``on_fault`` as submitted (blank: the pool's) and
    ``effective_on_fault``; ``webhook_url`` (the secret is never shown)."""

    url = IdentityUrlField(view_name="scheduler-api:job-detail")
    display = serializers.CharField(source="__str__", read_only=True)
    tenant = TenantSerializer(nested=True, read_only=True)
    pool = PoolSerializer(nested=True, read_only=True)
    owner = serializers.CharField(source="owner.username", read_only=True, allow_null=True, default=None)
    allocation = AllocationSerializer(nested=True, read_only=True, allow_null=True)
    request = serializers.SerializerMethodField(help_text="the request in words")
    tier_name = serializers.SerializerMethodField()
    segment_tier_name = serializers.SerializerMethodField()
    placement = serializers.DictField(child=serializers.IntegerField(), read_only=True)
    reserved_hosts = serializers.ListField(child=serializers.CharField(), read_only=True)
    webhook_url = OptionalWebUrlField(read_only=True)
    decision = DecisionField(read_only=True)
    pkey_hex = serializers.SerializerMethodField(help_text="the job PKey as 0x hex (null: not isolated)")
    partition = PartitionSerializer(
        nested=True, read_only=True, allow_null=True, help_text="the job's own partition while it holds GPUs"
    )
    faults = serializers.JSONField(read_only=True, help_text="why it is degraded now")
    effective_on_fault = serializers.CharField(read_only=True, help_text="on_fault, else its pool's")

    class Meta:
        model = Job
        fields = [
            "id", "url", "display", "name", "tenant", "pool", "owner", "kind", "count", "gpu_model", "mig_profile",
            "memory_mib", "compute_pct", "gpus_per_host", "segments", "segment_hosts", "segment_tier",
            "segment_tier_name", "request", "priority_class", "priority", "preemptible", "requeue", "preemptions", "tier", "tier_name",
            "tier_mode", "time_limit_s", "state", "reason", "pending_code", "submitted_at", "placed_at", "started_at",
            "ended_at", "allocation", "placement", "decision", "decided_at", "reserved_start", "reserved_hosts",
            "pkey", "pkey_hex", "partition", "idempotency_key", "faults", "degraded_at", "on_fault",
            "effective_on_fault", "webhook_url", "traffic",
        ]  # fmt: skip
        brief_fields = ["id", "url", "display", "name", "state"]

    def get_pkey_hex(self, job: Job) -> str | None:
        return job.pkey_hex

    def get_request(self, job: Job) -> str:
        return describe(job)

    def get_tier_name(self, job: Job) -> str | None:
        return TIER_NAMES[job.tier] if job.tier is not None else None

    def get_segment_tier_name(self, job: Job) -> str | None:
        return TIER_NAMES[job.segment_tier] if job.segment_tier is not None else None


class SubmitJobSerializer(serializers.Serializer):
    """``POST jobs/``: what the job asks for (``scheduler.services.queue.JobSpec``). ``tier`` and
    ``segment_tier`` take a tier number (0-4) or name (host, leaf, block, spine_group, fabric); an
    unknown one is refused (400 naming the field), never ignored."""

    name = serializers.CharField(max_length=128, validators=[printable_text])
    pool = serializers.IntegerField(min_value=1, max_value=2**62, help_text="pool id")
    tenant = serializers.IntegerField(
        min_value=1, max_value=2**62, required=False, allow_null=True, default=None,
        help_text="tenant the job is for (a shared pool; default: your one operator tenant)",
    )  # fmt: skip
    kind = serializers.ChoiceField(choices=JobKind.choices, default=JobKind.GPU)
    count = serializers.IntegerField(
        min_value=1,
        max_value=MAX_COUNT,
        default=1,
        help_text="GPUs or MIG slices: at most what the pool can ever hold (a 400 names count above it)",
    )
    gpu_model = serializers.CharField(max_length=96, required=False, default="", allow_blank=True)
    mig_profile = serializers.CharField(max_length=32, required=False, default="", allow_blank=True)
    memory_mib = serializers.IntegerField(
        min_value=1, max_value=2**31 - 1, required=False, allow_null=True, default=None
    )
    compute_pct = serializers.IntegerField(
        min_value=1, max_value=100, required=False, allow_null=True, default=None
    )
    gpus_per_host = serializers.IntegerField(
        min_value=1, max_value=64, required=False, allow_null=True, default=None
    )
    segments = serializers.IntegerField(
        min_value=1, max_value=MAX_SEGMENTS, required=False, allow_null=True, default=None
    )
    segment_hosts = serializers.IntegerField(
        min_value=1, max_value=MAX_SEGMENTS, required=False, allow_null=True, default=None
    )
    segment_tier = serializers.CharField(
        max_length=16, required=False, allow_null=True, allow_blank=True, default=None
    )
    priority_class = serializers.ChoiceField(choices=PriorityClass.choices, default=PriorityClass.NORMAL)
    preemptible = serializers.BooleanField(default=False)
    requeue = serializers.BooleanField(
        required=False, allow_null=True, default=None,
        help_text="back to pending (submit time and priority kept) when preempted; default: as preemptible",
    )  # fmt: skip
    tier = serializers.CharField(
        max_length=16, required=False, allow_null=True, allow_blank=True, default=None,
        help_text="topology tier: 0-4 or host, leaf, block, spine_group, fabric",
    )  # fmt: skip
    tier_mode = serializers.ChoiceField(choices=TopologyMode.choices, default=TopologyMode.PREFERRED)
    time_limit_s = serializers.IntegerField(min_value=1, max_value=MAX_TIME_LIMIT_S, required=False, allow_null=True, default=None)  # fmt: skip
    traffic = serializers.ChoiceField(
        choices=Traffic.choices, default=Traffic.ALL_TO_ALL,
        help_text="the collective on each rail: all-to-all (default) or ring (the job's links)",
    )  # fmt: skip
    on_fault = serializers.ChoiceField(
        choices=OnFault.choices, required=False, allow_blank=True, default="",
        help_text="when its fabric fails: notify, requeue or replace (blank: the pool's)",
    )  # fmt: skip
    webhook_url = OptionalWebUrlField(
        required=False, default="",
        help_text="POSTed, signed, on each state change (blank: the tenant's webhook)",
    )  # fmt: skip
    webhook_secret = serializers.CharField(
        max_length=200, required=False, allow_blank=True, default="", write_only=True,
        help_text="HMAC-SHA256 key of X-Weft-Signature (write-only)",
    )  # fmt: skip


class CancelJobSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=200, required=False, default="", allow_blank=True)


class FinishJobSerializer(serializers.Serializer):
    ok = serializers.BooleanField(default=True, help_text="completed (true) or failed (false)")
    reason = serializers.CharField(max_length=200, required=False, default="", allow_blank=True)


class JobErrorSerializer(serializers.Serializer):
    """A refusal (409): ``code`` ``wrong_state`` and the job's ``state``, or ``code``
    ``idempotency_key_reused`` with ``field`` ``Idempotency-Key``, the ``job`` the key queued and
    the request fields that ``differs`` from it."""

    detail = serializers.CharField()
    code = serializers.CharField()
    state = serializers.CharField(required=False)
    field = serializers.CharField(required=False)
    job = serializers.IntegerField(required=False)
    differs = serializers.ListField(child=serializers.CharField(), required=False)


class JobDecisionSerializer(BaseModelSerializer):
    """One decision about a job (``count`` times in a row, the last at ``last_at``)."""

    url = IdentityUrlField(view_name="scheduler-api:jobdecision-detail")
    display = serializers.CharField(source="__str__", read_only=True)
    job = JobSerializer(nested=True, read_only=True)
    reasons = serializers.ListField(child=serializers.CharField(), read_only=True)
    details = DecisionField(read_only=True)

    class Meta:
        model = JobDecision
        fields = ["id", "url", "display", "job", "at", "last_at", "count", "code", "reasons", "details"]
        brief_fields = ["id", "url", "display", "code"]


class QueueEntrySerializer(serializers.Serializer):
    """A pending job in pass order: ``position`` (0 = considered first, across every tenant),
    why it waits (``pending_code``, ``reasons``) and its reservation if it is the head."""

    position = serializers.IntegerField()
    job = JobSerializer(nested=True)
    tenant = TenantSerializer(nested=True)
    pool = PoolSerializer(nested=True)
    request = serializers.CharField()
    priority_class = serializers.CharField()
    priority = serializers.IntegerField()
    submitted_at = serializers.DateTimeField()
    decided_at = serializers.DateTimeField(allow_null=True)
    pending_code = serializers.CharField(allow_blank=True)
    reasons = serializers.ListField(child=serializers.CharField())
    reserved_start = serializers.DateTimeField(allow_null=True)
    reserved_hosts = serializers.ListField(child=serializers.CharField())


class RebalanceRequestSerializer(serializers.Serializer):
    """``POST rebalance/``: a dry run (the default) lists the actions; ``false`` takes them."""

    dry_run = serializers.BooleanField(default=True)


class RebalanceActionSerializer(serializers.Serializer):
    """One action of the rebalancer (``scheduler.services.rebalance.Action.as_dict``)."""

    kind = serializers.CharField(
        help_text="replace or requeue (a degraded job's on_fault), reclaim, move or congested"
    )
    label = serializers.CharField(
        help_text="what it is, in words: the kind, 'replace (admin option)', or for a congested report "
        "the alarms' real cause ('on links with symbol errors')"
    )
    job = serializers.IntegerField()
    execute = serializers.BooleanField(help_text="a real run carries it out (false: proposal or report)")
    reason = serializers.CharField()
    placed = serializers.DictField(child=serializers.IntegerField(), help_text="host → GPUs: where it goes")
    before = serializers.DictField(child=serializers.IntegerField(), help_text="host → GPUs: where it is")
    victims = serializers.ListField(child=serializers.IntegerField())
    frees = serializers.ListField(child=serializers.CharField(), help_text="units freed whole")
    details = serializers.JSONField()
    outcome = serializers.CharField(help_text="would execute / proposed / reported / done / refused: …")


class RebalanceResultSerializer(serializers.Serializer):
    dry_run = serializers.BooleanField()
    actions = RebalanceActionSerializer(many=True)
    counts = serializers.DictField(child=serializers.IntegerField())

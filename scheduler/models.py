"""Jobs of the queue, their placement decisions, and tenants' fair-share weights (issue 12, "Jobs").

A :class:`Job` asks a tenant's pool for whole GPUs (``count``, optionally ``gpus_per_host`` and
gang segments), MIG slices of one profile, or one shared-GPU fraction, with a priority class, a
topology tier (required or preferred) and a time limit. The queue (``scheduler.services.queue``,
the one writer of jobs and decisions) places it through the placement engine
(``scheduler.placement``) and binds its GPUs through the pools' allocation service: a placed or
running job owns exactly one :class:`pools.models.Allocation` (``allocation``, also referenced
by ``Allocation.job`` = ``"weft-job-<id>"``).

Every decision about a job is kept: the last one on the job (``decision``, JSON as
``scheduler.placement.Decision.as_dict`` plus the queue's own fields), and a short history in
:class:`JobDecision` (a repeated identical pending decision only bumps the last row's ``count``
and ``last_at``; at most ``WEFT_SCHEDULER_DECISION_HISTORY`` rows per job).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from core.validators import printable_text
from fabric.models import Partition
from pools.models import Allocation, Pool, Tenant

from .choices import JobKind, JobState, OnFault, PendingCode, PriorityClass, TopologyMode, Traffic


class Job(models.Model):
    """One job in the queue (see the module docstring and ``scheduler.choices`` for the states).

    Request: ``kind`` ``gpu`` (``count`` GPUs; with ``gpus_per_host`` whole hosts of that many
    GPUs; with ``segments`` × ``segment_hosts`` hosts each inside one domain of
    ``segment_tier``), ``mig`` (``count`` slices of ``mig_profile``) or ``fraction`` (one share:
    ``memory_mib`` MiB and ``compute_pct`` % of one GPU). ``gpu_model``: the GPU product name must
    contain it (case-insensitive), on top of the pool's own filter. ``tier`` (0 host … 4 fabric,
    ``scheduler.locality.TIERS``) with ``tier_mode``. ``time_limit_s``: the job is ended
    ``timeout`` when it runs longer than that from ``started_at`` (by every pass,
    ``queue.expire_time_limits``; backfill counts on it); null: the site default
    (``WEFT_SCHEDULER_DEFAULT_TIME_LIMIT_S``) for the queue's estimates, no enforcement.

    State: ``state`` with ``reason`` (why pending, or how it ended), ``pending_code``
    (``scheduler.choices.PendingCode``, empty unless pending after a pass), timestamps,
    ``placement`` (host name → GPUs, slices or shares), ``reserved_start``/``reserved_hosts``
    (the head job's reservation: backfill never delays it).

    Requeue: a job with ``requeue`` that loses its GPUs (preempted for a higher priority, reclaimed
    for a pool's guarantee, or its allocation ended by the pools) goes back to ``pending`` instead
    of ending ``preempted``: its ``submitted_at`` and priority are kept (it returns to its place
    in the queue), ``preemptions`` counts the times, its ``reason`` says why, and a
    ``job.preempted`` then a ``job.requeued`` event are written. Submit defaults ``requeue`` to
    ``preemptible`` (Kueue requeues evicted workloads; Slurm's ``PreemptMode=REQUEUE``); a job
    may ask for either. The time it held GPUs before is not counted in fair share (``placed_at``
    is cleared).

    Idempotency: ``idempotency_key`` is the key the owner sent with the submit (empty: none;
    unique per owner), so a retried submit returns this job instead of queueing a second one
    (``scheduler.services.queue.submit_with_key``). The request fields are never changed after
    submit, so the retry is compared with them. A key is kept ``WEFT_IDEMPOTENCY_TTL_S`` seconds
    from ``submitted_at``; then it is cleared (the daily prune,
    ``queue.expire_idempotency_keys``) and may queue a new job.

    Isolation (a pool with ``job_isolation``): ``partition`` is the job's own IB partition while
    it holds GPUs (its hosts' CA ports, full membership; deleted when it ends, which sets it
    null), ``pkey`` the PKey it had (kept after the end, for the record).

    Faults (``scheduler.services.faults``): ``faults`` is the list of causes that make a running
    job ``degraded`` now (``[{"code", "object_type", "object_key", "host", "message", ...}]``,
    codes in ``scheduler.services.faults.REASON_CODES``; empty while nothing is wrong),
    ``degraded_at`` when it became degraded. ``on_fault`` (blank: the pool's ``on_fault``) says
    what the queue does then (``scheduler.choices.OnFault``). ``webhook_url``/``webhook_secret``:
    the job's runner is told of its state changes by a signed webhook (``outbound``); blank: the
    tenant's. The secret is write-only in the API.
    """

    name = models.CharField(max_length=128, validators=[printable_text])
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="jobs")
    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="jobs")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs"
    )
    kind = models.CharField(max_length=10, choices=JobKind.choices, default=JobKind.GPU)
    count = models.PositiveIntegerField(help_text="GPUs or MIG slices (1 for a fraction)")
    gpu_model = models.CharField(max_length=96, blank=True, help_text="GPU product name contains this")
    mig_profile = models.CharField(max_length=32, blank=True)
    memory_mib = models.PositiveIntegerField(null=True, blank=True, help_text="fraction: GPU memory, MiB")
    compute_pct = models.PositiveSmallIntegerField(null=True, blank=True, help_text="fraction: SM share, %")
    gpus_per_host = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="whole hosts of this many GPUs"
    )
    segments = models.PositiveSmallIntegerField(null=True, blank=True, help_text="gang segments")
    segment_hosts = models.PositiveSmallIntegerField(null=True, blank=True, help_text="hosts per segment")
    segment_tier = models.PositiveSmallIntegerField(null=True, blank=True, help_text="each segment inside one domain of this tier")  # fmt: skip
    priority_class = models.CharField(
        max_length=10, choices=PriorityClass.choices, default=PriorityClass.NORMAL
    )
    priority = models.IntegerField(help_text="the class's number (scheduler.choices.PRIORITY)")
    preemptible = models.BooleanField(default=False)
    requeue = models.BooleanField(
        default=False, help_text="when preempted, go back to pending (submit time and priority kept)"
    )
    preemptions = models.PositiveIntegerField(default=0, help_text="times this job lost its GPUs")
    tier = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="topology tier 0-4 (host … fabric)"
    )
    tier_mode = models.CharField(max_length=10, choices=TopologyMode.choices, default=TopologyMode.PREFERRED)
    time_limit_s = models.PositiveIntegerField(null=True, blank=True)

    state = models.CharField(max_length=10, choices=JobState.choices, default=JobState.PENDING)
    reason = models.CharField(max_length=300, blank=True)
    pending_code = models.CharField(max_length=16, choices=PendingCode.choices, blank=True)
    submitted_at = models.DateTimeField(default=timezone.now)
    placed_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    allocation = models.OneToOneField(
        Allocation, null=True, blank=True, on_delete=models.SET_NULL, related_name="scheduler_job"
    )
    placement = models.JSONField(default=dict, blank=True, help_text="host name → GPUs (slices, shares)")
    partition = models.OneToOneField(
        Partition, null=True, blank=True, on_delete=models.SET_NULL, related_name="job", editable=False,
        help_text="the job's own partition while it holds GPUs (pools with job isolation)",
    )  # fmt: skip
    pkey = models.PositiveIntegerField(null=True, blank=True, help_text="the job PKey (15 bits) it was given")
    idempotency_key = models.CharField(
        max_length=255, blank=True, default="", editable=False,
        help_text="the submitter's Idempotency-Key (unique per owner): a retried submit gets this job",
    )  # fmt: skip
    decision = models.JSONField(default=dict, blank=True, help_text="the last decision")
    decided_at = models.DateTimeField(null=True, blank=True)
    reserved_start = models.DateTimeField(null=True, blank=True)
    reserved_hosts = models.JSONField(default=list, blank=True)
    on_fault = models.CharField(
        max_length=8, choices=OnFault.choices, blank=True, default="",
        help_text="what to do when its fabric fails (blank: the pool's)",
    )  # fmt: skip
    faults = models.JSONField(default=list, blank=True, help_text="why it is degraded now (machine-readable)")
    degraded_at = models.DateTimeField(null=True, blank=True)
    webhook_url = models.URLField(
        max_length=500, blank=True, help_text="the runner's webhook (blank: the tenant's)"
    )
    webhook_secret = models.CharField(max_length=200, blank=True, help_text="HMAC-SHA256 key of the webhook")
    traffic = models.CharField(
        max_length=10, choices=Traffic.choices, default=Traffic.ALL_TO_ALL,
        help_text="the collective on each rail: which HCA pairs exchange data (scheduler.jobpaths)",
    )  # fmt: skip

    class Meta:
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["state", "-priority", "id"], name="job_state_priority"),
            models.Index(fields=["tenant", "state"], name="job_tenant_state"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(count__gte=1), name="job_count_positive"),
            models.CheckConstraint(condition=Q(tier__isnull=True) | Q(tier__lte=4), name="job_tier_0_4"),
            models.UniqueConstraint(
                fields=["owner", "idempotency_key"],
                condition=~Q(idempotency_key=""),
                name="job_owner_idempotency_key",
            ),  # fmt: skip
        ]

    def __str__(self) -> str:
        return f"job {self.pk} {self.name}"

    @property
    def reference(self) -> str:
        """What the job's allocation carries in ``Allocation.job``."""
        return f"weft-job-{self.pk}"

    @property
    def effective_on_fault(self) -> str:
        """``on_fault``, else its pool's (``pools.Pool.on_fault``), else ``notify``."""
        return self.on_fault or getattr(self.pool, "on_fault", "") or OnFault.NOTIFY

    @property
    def pkey_hex(self) -> str | None:
        """The job PKey as ``0x`` and four hex digits (``Partition.pkey_hex``'s form); None when
        the job was never isolated."""
        return f"0x{self.pkey:04x}" if self.pkey is not None else None


class JobDecision(models.Model):
    """One decision of the queue about a job: ``code`` (``placed``, a pending code, or the
    queue's ``preempted``/``cancelled``…), the ``reasons`` people read, ``details`` (the engine's
    decision dict: tier, units, lower bound, congested/avoided domains; victims; reservation).
    ``count``/``last_at``: the same decision repeated by later passes."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="decisions")
    at = models.DateTimeField(default=timezone.now)
    last_at = models.DateTimeField(default=timezone.now)
    count = models.PositiveIntegerField(default=1)
    code = models.CharField(max_length=16)
    reasons = models.JSONField(default=list, blank=True)
    details = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["job", "-id"], name="jobdecision_job")]

    def __str__(self) -> str:
        return f"job {self.job_id} {self.code} at {self.at:%Y-%m-%d %H:%M:%S}"


class TenantShare(models.Model):
    """A tenant's fair-share weight (absent: 1). Within one priority, the queue serves tenants in
    the order of their recent GPU usage divided by this weight (lowest first)."""

    tenant = models.OneToOneField(Tenant, on_delete=models.CASCADE, related_name="share")
    weight = models.PositiveIntegerField(default=1)

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(weight__gte=1), name="tenantshare_weight_positive")]

    def __str__(self) -> str:
        return f"{self.tenant} weight {self.weight}"


class JobLink(models.Model):
    """The job→links index (issue 24 §2): one row per (running job, directed port, rail) its
    traffic crosses, written only by ``scheduler.services.joblinks`` (one transaction per job,
    ``job_links_changed`` on commit) from the routes (``routing``) and the job's rails and
    traffic model (``scheduler.jobpaths``).

    ``port_key`` is the egress port of the link (``fabric.keys.port_key``: ``"<guid>/<port>"``,
    a switch out port or an HCA's port); ``rail`` the rail (the HCA's own index, ``mlx5_3`` → 3: ``faults.rails``);
    ``paths`` how many of the rail's ordered HCA pairs cross it (the job's path count);
    ``snapshot_id`` the ``routing.RoutingSnapshot`` it was computed from; ``dead_end``: the
    routes forward the rail's pairs to this port but its link is gone from the topology (down,
    until the SM re-routes: ``scheduler.jobpaths.dead_ends``). Queried both ways:
    a job's links (``job``), a port's jobs (``port_key``).
    """

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="links")
    fabric_id = models.IntegerField(help_text="the fabric of the port (fabric.Fabric id)")
    port_key = models.CharField(max_length=64, db_index=True)
    rail = models.PositiveSmallIntegerField()
    paths = models.PositiveIntegerField()
    snapshot_id = models.IntegerField(null=True, blank=True)
    dead_end = models.BooleanField(
        default=False, help_text="its paths stop here: the routes forward to this port, whose link is down"
    )

    class Meta:
        ordering = ["job", "rail", "port_key"]
        constraints = [
            models.UniqueConstraint(fields=["job", "port_key", "rail"], name="joblink_job_port_rail"),
        ]

    def __str__(self) -> str:
        return f"job {self.job_id} rail {self.rail} {self.port_key} x{self.paths}"

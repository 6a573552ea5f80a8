"""What a job asks for and the queue's refusals: :class:`JobSpec` and its validation (a tier by number
or name, MIG profiles as ``nvidia-smi mig -lgip`` names them, fractions, gang segments, time limits,
webhooks), :func:`check_capacity` (a job larger than its pool can ever hold is refused at submit),
:func:`describe` (the request in words), and the errors every use case raises: :class:`JobError`,
:class:`InvalidJob` (400, ``field`` names the bad one), :class:`JobConflict` (409). Reads nothing
but the pool's capacity; writes nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pools.models import Pool
from pools.services.allocation import MAX_COUNT, pool_capacity

from ...choices import PRIORITY, JobKind, OnFault, PriorityClass, TopologyMode, Traffic
from ...locality import TIER_NAMES, UnknownTier, tier_number
from ...models import Job
from ...placement import Fraction, Request, RequestError, Segments

#: the most segments, and hosts per segment, a gang may ask for (the columns are small integers)
MAX_SEGMENTS = 32767
#: GPU-instance slices a GPU has at most (an A100/H100 in 7 × ``1g`` slices): a MIG job's bound
MIG_SLICES_PER_GPU = 7
#: the longest time limit a job may ask for (a year)
MAX_TIME_LIMIT_S = 366 * 86400
#: a MIG GPU instance profile name as ``nvidia-smi mig -lgip`` prints it: compute slices "g", memory
#: "gb", an optional media-extension suffix ("1g.10gb", "7g.80gb", "1g.12gb+me")
MIG_PROFILE_RE = re.compile(r"[1-8]g\.[1-9][0-9]{0,3}gb(\+me|\+gfx|-me)?")


class JobError(Exception):
    """Base of the queue's refusals: ``status`` (HTTP), ``code``, ``field``; :meth:`as_dict`."""

    status = 409
    code = "conflict"

    def __init__(self, message: str, *, field: str | None = None, **details: Any):
        super().__init__(message)
        self.field = field
        self.details = details

    def as_dict(self) -> dict[str, Any]:
        out = {"detail": str(self), "code": self.code, **self.details}
        if self.field:
            out["field"] = self.field
        return out


class InvalidJob(JobError):
    """A job that cannot be queued as written (400); ``field`` names the field."""

    status = 400
    code = "invalid"


class JobConflict(JobError):
    """A transition the state machine does not allow (cancel a completed job, start a pending
    one); ``state`` is the job's state."""

    code = "wrong_state"


@dataclass
class JobSpec:
    """What a submit asks for (the fields of :class:`~scheduler.models.Job`; see there).

    ``tier``/``segment_tier``: a tier number 0-4 or name (``leaf``, ``block``, ``spine_group``,
    ``fabric``, ``host``); ``tenant_id``: on whose behalf (required for a shared pool);
    ``requeue``: back to pending when preempted (None: as ``preemptible``, see ``Job``).
    """

    name: str
    pool_id: int
    tenant_id: int | None = None
    kind: str = JobKind.GPU
    count: int = 1
    gpu_model: str = ""
    mig_profile: str = ""
    memory_mib: int | None = None
    compute_pct: int | None = None
    gpus_per_host: int | None = None
    segments: int | None = None
    segment_hosts: int | None = None
    segment_tier: int | str | None = None
    priority_class: str = PriorityClass.NORMAL
    preemptible: bool = False
    requeue: bool | None = None
    tier: int | str | None = None
    tier_mode: str = TopologyMode.PREFERRED
    time_limit_s: int | None = None
    #: what to do when its fabric fails (blank: the pool's; ``scheduler.services.faults``)
    on_fault: str = ""
    #: the collective on each rail (``scheduler.choices.Traffic``; the job→links index)
    traffic: str = Traffic.ALL_TO_ALL
    #: the runner's signed webhook (blank: the tenant's); the secret is its HMAC key
    webhook_url: str = ""
    webhook_secret: str = ""

    def validate(self) -> tuple[int | None, int | None]:
        """Check every field; returns ``(tier, segment_tier)`` as numbers. Raises
        :class:`InvalidJob` naming the first bad field."""
        if not isinstance(self.name, str) or not self.name.strip() or len(self.name) > 128:
            raise InvalidJob("name must be 1-128 characters", field="name")
        if self.kind not in JobKind.values:
            raise InvalidJob(f"kind must be one of {', '.join(JobKind.values)}", field="kind")
        if (
            not isinstance(self.count, int)
            or isinstance(self.count, bool)
            or not 1 <= self.count <= MAX_COUNT
        ):
            raise InvalidJob(f"count must be 1..{MAX_COUNT}", field="count")
        if self.priority_class not in PRIORITY:
            raise InvalidJob(f"priority_class must be one of {', '.join(PRIORITY)}", field="priority_class")
        if self.requeue is not None and not isinstance(self.requeue, bool):
            raise InvalidJob("requeue is true or false", field="requeue")
        if self.tier_mode not in TopologyMode.values:
            raise InvalidJob("tier_mode must be required or preferred", field="tier_mode")
        if self.time_limit_s is not None and not 1 <= self.time_limit_s <= MAX_TIME_LIMIT_S:
            raise InvalidJob(f"time_limit_s must be 1..{MAX_TIME_LIMIT_S}", field="time_limit_s")
        if len(self.gpu_model) > 96:
            raise InvalidJob("gpu_model is at most 96 characters", field="gpu_model")
        if self.traffic not in Traffic.values:
            raise InvalidJob(f"traffic must be one of {', '.join(Traffic.values)}", field="traffic")
        if self.on_fault and self.on_fault not in OnFault.values:
            raise InvalidJob(
                f"on_fault must be one of {', '.join(OnFault.values)} (blank: the pool's)", field="on_fault"
            )
        if self.webhook_url and (
            len(self.webhook_url) > 500 or not self.webhook_url.startswith(("http://", "https://"))
        ):
            raise InvalidJob(
                "webhook_url is an http:// or https:// URL of at most 500 characters", field="webhook_url"
            )
        if len(self.webhook_secret or "") > 200:
            raise InvalidJob("webhook_secret is at most 200 characters", field="webhook_secret")
        tier = seg_tier = None
        if self.tier not in (None, ""):
            try:
                tier = tier_number(self.tier)
            except UnknownTier as exc:
                raise InvalidJob(str(exc), field="tier") from exc
        elif self.tier_mode == TopologyMode.REQUIRED:
            raise InvalidJob("a required topology constraint needs a tier", field="tier")
        if self.kind == JobKind.MIG:
            if not self.mig_profile or len(self.mig_profile) > 32:
                raise InvalidJob("MIG jobs name a profile (e.g. 1g.10gb)", field="mig_profile")
            if not MIG_PROFILE_RE.fullmatch(self.mig_profile):
                raise InvalidJob(
                    f"{self.mig_profile!r} is not a MIG GPU instance profile: <slices>g.<memory>gb, "
                    "optionally +me (as nvidia-smi mig -lgip names them, e.g. 1g.10gb, 3g.40gb, 1g.12gb+me)",
                    field="mig_profile",
                )
        elif self.mig_profile:
            raise InvalidJob("mig_profile is for kind 'mig'", field="mig_profile")
        if self.kind == JobKind.FRACTION:
            if self.count != 1:
                raise InvalidJob("a fraction is one share of one GPU: count must be 1", field="count")
            if not self.memory_mib or self.memory_mib < 1:
                raise InvalidJob("a fraction needs memory_mib ≥ 1", field="memory_mib")
            if not self.compute_pct or not 1 <= self.compute_pct <= 100:
                raise InvalidJob("a fraction needs compute_pct in 1..100", field="compute_pct")
        elif self.memory_mib is not None or self.compute_pct is not None:
            raise InvalidJob("memory_mib/compute_pct are for kind 'fraction'", field="memory_mib")
        seg = (self.segments, self.segment_hosts, self.segment_tier)
        if any(v not in (None, "") for v in seg):
            if self.segments is None or self.segment_hosts is None or self.segment_tier in (None, ""):
                raise InvalidJob("segments need segments, segment_hosts and segment_tier", field="segments")
            try:
                seg_tier = tier_number(self.segment_tier)
            except UnknownTier as exc:
                raise InvalidJob(str(exc), field="segment_tier") from exc
        for name in ("segments", "segment_hosts"):
            v = getattr(self, name)
            if v is not None and not 1 <= v <= MAX_SEGMENTS:
                raise InvalidJob(f"{name} must be 1..{MAX_SEGMENTS}", field=name)
        if self.kind != JobKind.GPU and (self.gpus_per_host is not None or self.segments is not None):
            raise InvalidJob("gpus_per_host and segments are for whole-GPU jobs", field="gpus_per_host")
        try:  # the engine's own consistency rules (counts, segments adding up)
            Request(
                count=self.count, gpus_per_host=self.gpus_per_host, mig_profile=self.mig_profile,
                fraction=Fraction(self.memory_mib or 0, self.compute_pct or 0) if self.kind == JobKind.FRACTION else None,
                segments=Segments(self.segments, self.segment_hosts, seg_tier) if seg_tier is not None else None,
                tier=tier,
            )  # fmt: skip
        except RequestError as exc:
            msg = str(exc)
            fld = "segments" if "segment" in msg else "gpus_per_host" if "gpus_per_host" in msg else "count"
            raise InvalidJob(msg, field=fld) from exc
        return tier, seg_tier


def check_capacity(spec: JobSpec, pool: Pool) -> None:
    """Refuse a job larger than its pool can ever hold (``pools.services.allocation.pool_capacity``:
    its present GPUs matching its filters and the job's ``gpu_model``, whatever their state; MIG:
    :data:`MIG_SLICES_PER_GPU` slices each): :class:`InvalidJob` naming ``count`` (400). A job
    within it may wait (pending ``capacity``) but can place once the pool's GPUs are free. A
    fraction asks for one share: never refused here."""
    if spec.kind == JobKind.FRACTION:
        return
    gpus = pool_capacity(pool, spec.gpu_model)
    cap = gpus * MIG_SLICES_PER_GPU if spec.kind == JobKind.MIG else gpus
    if spec.count > cap:
        what = "MIG slices" if spec.kind == JobKind.MIG else "GPUs"
        model = f" of model {spec.gpu_model!r}" if spec.gpu_model else ""
        raise InvalidJob(
            f"count {spec.count} is more than pool {pool.name} can ever hold: {cap} {what}{model} "
            f"(its present GPUs matching its filters)",
            field="count",
        )


def describe(job: Job) -> str:
    """The request in words: ``16 GPUs (2 hosts × 8), within one block (required)``."""
    if job.kind == JobKind.MIG:
        what = f"{job.count} MIG slice{'s' if job.count != 1 else ''} {job.mig_profile}"
    elif job.kind == JobKind.FRACTION:
        what = f"{job.memory_mib} MiB + {job.compute_pct} % of one GPU"
    else:
        what = f"{job.count} GPU{'s' if job.count != 1 else ''}"
        if job.gpus_per_host:
            hosts = job.count // job.gpus_per_host
            what += f" ({hosts} host{'s' if hosts != 1 else ''} × {job.gpus_per_host})"
        if job.segments:
            what += f", {job.segments} segments of {job.segment_hosts} hosts each in one {TIER_NAMES[job.segment_tier]}"
    if job.gpu_model:
        what += f", model {job.gpu_model}"
    if job.tier is not None:
        what += f", within one {TIER_NAMES[job.tier]} ({job.tier_mode})"
    return what

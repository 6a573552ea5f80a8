"""The demo's job stream (``manage.py demo``; issue 12, Demo): jobs of mixed sizes, priorities and
tenants submitted against the demo pools (``pools.lab.DEMO_POOLS``), started once placed, and
finished after a while, so the queue page shows pending reasons, placements and preemptions.

Everything goes through the queue's services (``scheduler.services.queue``: ``submit``,
``start``, ``finish``); the scheduling passes follow from their signals (``scheduler.signals``),
as in production. The stream only touches the jobs it submitted (names start with
:data:`PREFIX`).

Preemption needs a fabric short of GPUs, and the demo pools' quotas (112 GPUs) are far below the
demo fabric's capacity; so the stream also keeps the fabric nearly full with preemptible batch
*fill* jobs in a shared pool without quota (:data:`FILL_POOL`, created once): a training or
serving job that then finds too few free GPUs preempts the fewest fill jobs (the job page and the
queue say which). ``fill=False`` leaves that out.

The inference pool isolates each job (``Pool.job_isolation``, ``pools.lab.DEMO_POOLS``): its
serve, embed and hotfix jobs — about one a minute — get a job PKey of their own while they hold
GPUs, which the lab's OpenSM applies (one SIGHUP per placement and per end); the job page shows
the PKey and whether it is applied.

Light on purpose (a 2-core demo machine): one step every ``interval`` seconds (default 20 s:
three submits a minute at most), at most ``max_pending`` of the stream's jobs pending.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import close_old_connections
from django.utils import timezone

from fabric.choices import NodeType
from fabric.models import Node
from pools.models import Pool, Tenant
from pools.services.allocation import pool_summary

from .choices import RUNNING_STATES, JobState
from .models import Job, JobLink
from .services import queue

log = logging.getLogger(__name__)

#: names of the stream's jobs start with this
PREFIX = "demo-"
#: the shared pool without quota the fill jobs use (created by :meth:`JobStream.setup`)
FILL_POOL = "scavenger"


@dataclass(frozen=True)
class DemoJob:
    """A kind of job of the stream: pool (by name; ``tenant`` for a shared pool), request,
    priority, topology preference, how long it runs (``runtime_s`` range, seconds; its time limit
    is twice the upper end) and how often it is picked (``weight``)."""

    name: str
    pool: str
    count: int
    gpus_per_host: int | None = None
    priority_class: str = "normal"
    preemptible: bool = False
    tier: str | None = None
    tier_mode: str = "preferred"
    runtime_s: tuple[float, float] = (60.0, 180.0)
    tenant: str | None = None
    weight: int = 1
    on_fault: str = ""


#: the mix (pools and tenants of ``pools.lab.DEMO_POOLS``)
DEMO_JOBS: tuple[DemoJob, ...] = (
    DemoJob(
        "train",
        "research-h100",
        16,
        8,
        "normal",
        tier="leaf",
        runtime_s=(120, 300),
        weight=3,
        on_fault="replace",
    ),
    DemoJob(
        "pretrain", "research-h100", 32, 8, "high", tier="block", runtime_s=(180, 420), on_fault="requeue"
    ),
    DemoJob("sweep", "research-h100", 4, None, "batch", preemptible=True, runtime_s=(60, 150), weight=3),
    DemoJob(
        "serve",
        "inference-h100",
        8,
        8,
        "high",
        tier="leaf",
        tier_mode="required",
        runtime_s=(240, 480),
        weight=2,
        on_fault="replace",
    ),  # fmt: skip
    DemoJob("embed", "inference-h100", 2, None, "batch", preemptible=True, runtime_s=(60, 120), weight=2),
    DemoJob("hotfix", "inference-h100", 16, 8, "critical", runtime_s=(60, 120)),
    DemoJob("burst", "burst", 8, 8, "normal", preemptible=True, runtime_s=(60, 150), tenant="research"),
    DemoJob("burst", "burst", 8, 8, "normal", preemptible=True, runtime_s=(60, 150), tenant="inference"),
)
#: the fill job (``fill=True``): 8 whole hosts of batch work anyone may preempt
FILL_JOB = DemoJob(
    "fill", FILL_POOL, 64, 8, "batch", preemptible=True, runtime_s=(600, 1200), tenant="research"
)


def kind_of(name: str, kinds: tuple[DemoJob, ...] = (*DEMO_JOBS, FILL_JOB)) -> DemoJob | None:
    """The kind of a stream job from its name (``demo-<kind>-<n>``), None for another job."""
    if not name.startswith(PREFIX):
        return None
    stem = name[len(PREFIX) :].rsplit("-", 1)[0]
    return next((k for k in kinds if k.name == stem), None)


def runtime_of(job: Job, kind: DemoJob) -> float:
    """How long a stream job runs (seconds), fixed by its id (the same after a restart)."""
    lo, hi = kind.runtime_s
    return random.Random(job.pk).uniform(lo, hi)


class JobStream(threading.Thread):
    """Daemon thread running :meth:`step` every ``interval`` seconds (see the module docstring).
    ``fabric``: the demo's fabric (the fill pool is limited to it); ``seed`` makes the mix
    reproducible; ``keep_free``: GPUs the fill jobs leave free; ``fill_job``: their shape (a small
    fabric needs smaller ones)."""

    def __init__(self, fabric, interval: float = 20.0, *, seed: int | None = None, max_pending: int = 6,
                 fill: bool = True, keep_free: int = 48, fill_per_step: int = 2,
                 fill_job: DemoJob = FILL_JOB):  # fmt: skip
        super().__init__(name="weft-job-stream", daemon=True)
        if interval <= 0:
            raise ValueError("interval must be > 0 seconds")
        self.fabric = fabric
        self.interval = float(interval)
        self.random = random.Random(seed)
        self.max_pending = max_pending
        self.fill = fill
        self.keep_free = keep_free
        self.fill_per_step = fill_per_step
        self.fill_job = fill_job
        self.submitted = 0
        self._stop_event = threading.Event()

    def setup(self) -> None:
        """Create the fill pool (shared, on the demo fabric, H100, no quota) when ``fill``, and
        give every tenant without contacts one (``<tenant>-team@tenants.weft.local``): their
        jobs' fault mail shows on the demo's console."""
        for tenant in Tenant.objects.filter(contacts=[]):
            tenant.contacts = [f"{tenant.name}-team@tenants.weft.local"]
            tenant.save(update_fields=["contacts"])
        if self.fill:
            Pool.objects.get_or_create(
                name=FILL_POOL,
                defaults=dict(
                    fabric=self.fabric, gpu_model="H100", description="demo fill jobs: preemptible batch"
                ),
            )

    def stop(self) -> None:
        self._stop_event.set()

    def run(self) -> None:
        try:
            self.setup()
            while True:
                try:
                    self.step()
                except Exception:
                    log.warning("job stream step failed", exc_info=True)
                finally:
                    close_old_connections()
                if self._stop_event.wait(self.interval):
                    break
        finally:
            close_old_connections()

    def _spec(self, kind: DemoJob) -> queue.JobSpec | None:
        pool = Pool.objects.filter(name=kind.pool).first()
        if pool is None:
            return None
        tenant_id = None
        if pool.tenant_id is None:
            tenant_id = Tenant.objects.filter(name=kind.tenant).values_list("pk", flat=True).first()
            if tenant_id is None:
                return None
        self.submitted += 1
        return queue.JobSpec(
            name=f"{PREFIX}{kind.name}-{self.submitted}", pool_id=pool.pk, tenant_id=tenant_id, count=kind.count,
            gpus_per_host=kind.gpus_per_host, priority_class=kind.priority_class, preemptible=kind.preemptible,
            tier=kind.tier, tier_mode=kind.tier_mode, time_limit_s=int(2 * kind.runtime_s[1]),
            on_fault=kind.on_fault,
        )  # fmt: skip

    def step(self, now: datetime | None = None) -> dict:
        """One round: finish the stream's running jobs whose run is over (one in ten fails),
        start its placed ones, submit one job of the mix when fewer than ``max_pending`` of its
        jobs are pending, and fill jobs while the fabric has spare GPUs. Returns
        ``{"finished": [id], "started": [id], "submitted": [id]}``."""
        now = now or timezone.now()
        out: dict[str, list[int]] = {"finished": [], "started": [], "submitted": []}
        mine = Job.objects.filter(name__startswith=PREFIX)
        for job in mine.filter(state__in=RUNNING_STATES).order_by("pk"):
            kind = kind_of(job.name)
            if kind is None or job.started_at + timedelta(seconds=runtime_of(job, kind)) > now:
                continue
            ok = random.Random(-job.pk).random() >= 0.1
            try:
                queue.finish(
                    job.pk, ok=ok, reason="" if ok else "demo: the job exited with status 1", now=now
                )
                out["finished"].append(job.pk)
            except queue.JobError:  # ended meanwhile (preempted, timed out)
                pass
        for pk in mine.filter(state=JobState.PLACED).order_by("pk").values_list("pk", flat=True):
            try:
                queue.start(pk, now=now)
                out["started"].append(pk)
            except queue.JobError:
                pass
        if mine.filter(state=JobState.PENDING).count() < self.max_pending:
            kinds = list(DEMO_JOBS)
            kind = self.random.choices(kinds, weights=[k.weight for k in kinds])[0]
            spec = self._spec(kind)
            if spec is not None:
                out["submitted"].append(queue.submit(spec, now=now).pk)
        if self.fill:
            out["submitted"] += self._fill(now)
        return out

    def _fill(self, now: datetime) -> list[int]:
        """Fill jobs while the fill pool sees more than ``keep_free`` + one fill job of free GPUs
        and none of them is pending."""
        pool = Pool.objects.filter(name=FILL_POOL).first()
        if pool is None:
            return []
        fills = Job.objects.filter(pool=pool, name__startswith=f"{PREFIX}{self.fill_job.name}-")
        if fills.filter(state=JobState.PENDING).exists():
            return []
        free = pool_summary(pool)["free_gpus"]
        out = []
        for _ in range(self.fill_per_step):
            if free < self.keep_free + self.fill_job.count:
                break
            spec = self._spec(self.fill_job)
            if spec is None:
                break
            out.append(queue.submit(spec, now=now).pk)
            free -= self.fill_job.count
        return out


def running_job_hcas(fabric_id: int, exclude: set[str] = frozenset()) -> list[tuple[str, int]]:
    """``[(HCA node name, port 1)]`` of the hosts the stream's running jobs (not fill jobs) hold
    GPUs on, on ``fabric_id``: what the demo's fault injector may pull (``lab.faults``, kind
    ``hca``), minus the names in ``exclude`` (the SM's own HCA). Called from the injector's
    thread: its database connection is closed when done."""
    try:
        return _running_job_hcas(fabric_id, exclude)
    finally:
        close_old_connections()


def _running_job_hcas(fabric_id: int, exclude) -> list[tuple[str, int]]:
    hosts = set()
    for placement in (
        Job.objects.filter(state=JobState.RUNNING, name__startswith=PREFIX)
        .exclude(name__startswith=f"{PREFIX}{FILL_JOB.name}-")
        .values_list("placement", flat=True)
    ):
        hosts.update(placement or {})
    names = Node.objects.filter(fabric_id=fabric_id, host__name__in=hosts).exclude(node_type=NodeType.SWITCH)
    return sorted((n, 1) for n in names.values_list("name", flat=True) if n not in exclude)


class BusyJobPorts:
    """The demo traffic player's ``busy`` ports (``lab.traffic.traffic_pattern``): the ``count``
    switch egress ports that the running jobs' routed paths cross most (the job→links index,
    ``JobLink``, summed paths), as ``(node GUID, port)``; read again every ``every_s`` seconds
    (the player asks every tick). The hot spots then carry jobs: the heatmap's hot-spot list and
    the map's link panel name them (issue 24 §5). Called from the player's thread: its database
    connection is closed after each read (``close``; False for a caller that owns its
    connection, e.g. inside a transaction); a failed read keeps the last answer."""

    def __init__(self, fabric_id: int, count: int = 4, every_s: float = 10.0, *, close: bool = True):
        self.fabric_id, self.count, self.every_s, self.close = fabric_id, count, every_s, close
        self._at = float("-inf")
        self._ports: list[tuple[str, int]] = []

    def __call__(self) -> list[tuple[str, int]]:
        now = time.monotonic()
        if now - self._at >= self.every_s:
            self._at = now
            try:
                self._ports = self.read()
            except Exception:  # the demo goes on with the last ports
                log.warning("could not read the jobs' busiest ports", exc_info=True)
            finally:
                if self.close:
                    close_old_connections()
        return self._ports

    def read(self) -> list[tuple[str, int]]:
        """The busiest switch egress ports of the running jobs now (see the class docstring)."""
        paths: dict[str, int] = {}
        for key, n in JobLink.objects.filter(
            fabric_id=self.fabric_id, job__state__in=RUNNING_STATES, dead_end=False
        ).values_list("port_key", "paths"):
            paths[key] = paths.get(key, 0) + n
        switches = set(
            Node.objects.filter(fabric_id=self.fabric_id, node_type=NodeType.SWITCH).values_list(
                "node_guid", flat=True
            )
        )
        ranked = sorted(
            ((n, k) for k, n in paths.items() if k.rpartition("/")[0] in switches),
            key=lambda x: (-x[0], x[1]),
        )
        return [(k.rpartition("/")[0], int(k.rpartition("/")[2])) for _, k in ranked[: self.count]]

"""Enumerations of the GPU inventory (``pools`` app).

Values follow ``nvidia-smi -q -x`` (NVML) where the tool has a name for them: MIG mode is NVML's
``nvmlDeviceGetMigMode`` current/pending, shown as ``Enabled``/``Disabled`` (``N/A`` on GPUs
without MIG).
"""

from django.db import models


class GpuState(models.TextChoices):
    """Who holds a GPU or MIG slice. Written only by the allocation service (a later step of
    issue 11); the inventory ingest creates rows ``free`` and never changes this field, so an
    allocated GPU stays allocated across reports, even while it is missing."""

    FREE = "free", "Free"
    ALLOCATED = "allocated", "Allocated"
    SHARED = "shared", "Shared (fractions allocated)"
    DRAINED = "drained", "Drained (not allocatable)"


class Health(models.TextChoices):
    """Health derived from one report (``pools.parsers.records.derive_health``): ``unhealthy``
    when NVML asks for a recovery action or reports uncorrectable ECC errors / a row-remapping
    failure; ``degraded`` when pages or rows are pending retirement/remapping; ``unknown`` when the
    report carries none of these fields."""

    HEALTHY = "healthy", "Healthy"
    DEGRADED = "degraded", "Degraded"
    UNHEALTHY = "unhealthy", "Unhealthy"
    UNKNOWN = "unknown", "Unknown"


class MigMode(models.TextChoices):
    """NVML MIG mode (``nvmlDeviceGetMigMode``); ``unsupported`` is nvidia-smi's ``N/A``."""

    ENABLED = "enabled", "Enabled"
    DISABLED = "disabled", "Disabled"
    UNSUPPORTED = "unsupported", "Not supported"


class ReportSource(models.TextChoices):
    """Where an inventory report came from."""

    AGENT = "agent", "Host agent"
    IMPORT = "import", "File import"
    LAB = "lab", "Lab seed"


class TenantRole(models.TextChoices):
    """What a member may do inside a tenant. The effective right is the lower of this and the
    user's site role (``accounts.roles``): a site Viewer who is a tenant ``operator`` still only
    reads; site Admins act in every tenant without a membership."""

    VIEWER = "viewer", "Viewer (reads the tenant's pools and allocations)"
    OPERATOR = "operator", "Operator (allocates and releases in the tenant)"


class AllocationKind(models.TextChoices):
    """The unit of an allocation: whole GPUs, MIG slices, or one fraction (memory MiB + compute
    %) of a GPU in shared mode (HAMi's ``gpumem``/``gpucores``)."""

    GPU = "gpu", "Whole GPUs"
    MIG = "mig", "MIG slices"
    FRACTION = "fraction", "Shared-GPU fraction"


class AllocationState(models.TextChoices):
    """Life of an allocation. ``requested`` is kept for a queue (the scheduler issue): the
    allocation service creates allocations ``active`` or refuses them (409). ``released`` (by a
    user), ``expired`` (lease ran out, ``pools.tasks.expire_leases_task``) and ``reclaimed``
    (borrowed GPUs taken back for a pool's guaranteed share) are final and free the GPUs."""

    REQUESTED = "requested", "Requested"
    ACTIVE = "active", "Active"
    RELEASED = "released", "Released"
    EXPIRED = "expired", "Expired"
    RECLAIMED = "reclaimed", "Reclaimed"


#: states that hold GPUs
HOLDING_STATES = (AllocationState.REQUESTED, AllocationState.ACTIVE)


class BindingVia(models.TextChoices):
    """How a host agent's token came to be bound to a host (``pools.services.agents``)."""

    ADMIN = "admin", "Bound by an Admin"
    FIRST_REPORT = "first_report", "Bound by its first report"


class OnFault(models.TextChoices):
    """What the queue does when a running job's fabric fails (``scheduler.services.faults``):
    ``notify`` — the job is ``degraded`` and its tenant told, nothing else; ``requeue`` — its
    allocation is released and it goes back to ``pending`` with its submit time and priority;
    ``replace`` — the failed host is swapped for a healthy one of the same placement unit in the
    next scheduling pass (as ``requeue`` when none is free). A job's blank value takes its pool's
    (:attr:`pools.models.Pool.on_fault`)."""

    NOTIFY = "notify", "Notify"
    REQUEUE = "requeue", "Requeue"
    REPLACE = "replace", "Replace the failed host"

"""Telemetry models: counter sweeps, the latest counters and rates of every port, and history.

Semantics of the counters follow the IBTA spec, Vol 1 ch. 16.1 (Performance Management:
PortCounters, PortCountersExtended) and ``perfquery(8)``:

* ``xmit_data``/``rcv_data`` count **4-byte words** (octets / 4): bytes = value × 4.
* The 32-bit PortCounters (data, packets) and the 16/8/4-bit error counters saturate at their
  maximum and stop; the 64-bit PortCountersExtended (``extended=True``) practically never do.
* ``xmit_wait`` (PortXmitWait) counts ticks during which the port had data to send but sent
  none (no credits or no arbitration); see ``telemetry.semantics`` for the congestion index.

``PortCounters`` is the latest state (one row per port, rewritten by every sweep);
``CounterChunk`` is the compact history (see ``telemetry.services.history``).
"""

from __future__ import annotations

from django.db import models

from core.procs import worker_name

from . import semantics


class SweepStatus(models.TextChoices):
    OK = "ok", "OK"
    PARTIAL = "partial", "Partial (some ports stale)"
    FAILED = "failed", "Failed"
    #: nothing to read: the fabric was never discovered (no ports known); ``error`` says so
    SKIPPED = "skipped", "Skipped (fabric not discovered yet)"


class Sweep(models.Model):
    """One counter sweep of a fabric.

    ``duration_s`` wall time of collect + compute + store; ``interval_s`` seconds since the
    previous sweep of the fabric (null for the first); ``ports`` ports read, ``stale`` ports not
    read this time, ``saturated`` counters at their maximum (summed over the ports read; IBTA
    16.1.3: each counter saturates on its own), ``saturated_ports`` ports with at least one of them,
    ``resets`` ports whose counters went down (cleared by someone). ``mechanism`` names the
    collector (e.g. ``perfquery``).
    """

    fabric = models.ForeignKey("fabric.Fabric", on_delete=models.CASCADE, related_name="sweeps")
    started = models.DateTimeField(db_index=True)
    duration_s = models.FloatField(null=True, blank=True)
    interval_s = models.FloatField(null=True, blank=True)
    ports = models.PositiveIntegerField(default=0)
    stale = models.PositiveIntegerField(default=0)
    saturated = models.PositiveIntegerField(default=0, help_text="counters at their maximum")
    saturated_ports = models.PositiveIntegerField(default=0, help_text="ports with a saturated counter")
    resets = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=8, choices=SweepStatus.choices, default=SweepStatus.OK)
    error = models.TextField(blank=True)
    mechanism = models.CharField(max_length=32, blank=True)
    #: who ran it: the Celery worker's nodename, or ``<program>@<host>`` (``core.procs.worker_name``)
    worker = models.CharField(max_length=100, blank=True, default=worker_name, editable=False)

    class Meta:
        ordering = ["-started", "-id"]
        indexes = [models.Index(fields=["fabric", "-started"])]

    def __str__(self) -> str:
        return f"{self.fabric_id} sweep {self.started:%Y-%m-%d %H:%M:%S} {self.status}"

    def summary(self) -> dict:
        """What a sweep run reports (``poll_counters`` output, ``poll_fabric_task`` result):
        ``{"fabric": name, "sweep": id, "status", "ports", "stale", "duration_s", "saturated",
        "saturated_ports", "resets", "interval_s", "mechanism"}`` (seconds; ``saturated`` counts
        counters, the others count ports)."""
        return {
            "fabric": self.fabric.name,
            "sweep": self.pk,
            "status": self.status,
            "ports": self.ports,
            "stale": self.stale,
            "duration_s": self.duration_s,
            "saturated": self.saturated,
            "saturated_ports": self.saturated_ports,
            "resets": self.resets,
            "interval_s": self.interval_s,
            "mechanism": self.mechanism,
        }


#: Model field names of the PortCounters error counters, in IBTA attribute order, and of all 16
#: raw counters (rate counters first): defined with the pure semantics, re-exported for model users.
ERROR_COUNTERS = semantics.ERROR_COUNTERS
RAW_COUNTERS = semantics.ALL_COUNTERS


class PortCounters(models.Model):
    """The latest counters of one port and the rates over the last sweep interval.

    Raw values are as read (null when not read): data in 4-byte words, ``xmit_wait`` in ticks.
    Derived values (null when no rate could be computed: first sample, reset, stale, or that
    counter saturated — saturation is per counter, the port's other rates stay):
    ``*_bytes_per_s`` bytes/s, ``*_pkts_per_s`` packets/s, ``xmit_wait_per_s`` ticks/s,
    ``utilisation`` 0..1 (max of xmit and rcv over the link data rate), ``congestion`` 0..1
    (``telemetry.semantics.congestion_index``), ``error_deltas`` ``{counter: delta}`` of the
    unsaturated error counters that rose this interval. Flags: ``saturated`` list of counter names
    at their maximum, ``reset`` counters went down, ``stale`` not read by the last sweep (``stale_reason`` says why).
    """

    port = models.OneToOneField("fabric.Port", on_delete=models.CASCADE, related_name="counters")
    # no index: every sweep rewrites this column on every row, an index would make each update a
    # non-HOT update (PostgreSQL); nothing looks rows up by sweep. No database constraint either:
    # PostgreSQL checks a foreign key whose value changed once per row (an index probe and a row
    # lock on the Sweep, 25,000 per sweep of the Selene fabric, ~60 % of the UPDATE's time). The
    # only writer (``telemetry.services.sweep``) creates the Sweep in the same transaction before
    # any row points at it, and deleting a Sweep sets these to NULL through Django's collector
    # (``on_delete=SET_NULL`` is Django's, not the database's, with or without the constraint).
    sweep = models.ForeignKey(
        Sweep,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
        db_constraint=False,
    )
    sampled_at = models.DateTimeField(null=True, blank=True)

    xmit_data = models.BigIntegerField(null=True, blank=True)
    rcv_data = models.BigIntegerField(null=True, blank=True)
    xmit_pkts = models.BigIntegerField(null=True, blank=True)
    rcv_pkts = models.BigIntegerField(null=True, blank=True)
    xmit_wait = models.BigIntegerField(null=True, blank=True)
    symbol_errors = models.BigIntegerField(null=True, blank=True)
    link_error_recovery = models.BigIntegerField(null=True, blank=True)
    link_downed = models.BigIntegerField(null=True, blank=True)
    rcv_errors = models.BigIntegerField(null=True, blank=True)
    rcv_remote_phys_errors = models.BigIntegerField(null=True, blank=True)
    xmit_discards = models.BigIntegerField(null=True, blank=True)
    local_link_integrity_errors = models.BigIntegerField(null=True, blank=True)
    excessive_buffer_overrun_errors = models.BigIntegerField(null=True, blank=True)
    vl15_dropped = models.BigIntegerField(null=True, blank=True)
    xmit_constraint_errors = models.BigIntegerField(null=True, blank=True)
    rcv_constraint_errors = models.BigIntegerField(null=True, blank=True)
    extended = models.BooleanField(default=False, help_text="64-bit PortCountersExtended used for data/pkts")

    xmit_bytes_per_s = models.FloatField(null=True, blank=True)
    rcv_bytes_per_s = models.FloatField(null=True, blank=True)
    xmit_pkts_per_s = models.FloatField(null=True, blank=True)
    rcv_pkts_per_s = models.FloatField(null=True, blank=True)
    xmit_wait_per_s = models.FloatField(null=True, blank=True, help_text="PortXmitWait ticks per second")
    utilisation = models.FloatField(null=True, blank=True)
    congestion = models.FloatField(null=True, blank=True)
    error_deltas = models.JSONField(null=True, blank=True)

    saturated = models.JSONField(default=list, blank=True)
    reset = models.BooleanField(default=False)
    stale = models.BooleanField(default=False, db_index=True)
    stale_reason = models.TextField(blank=True)

    class Meta:
        verbose_name_plural = "port counters"

    def __str__(self) -> str:
        return f"counters of port {self.port_id}"

    @property
    def xmit_bytes(self) -> int | None:
        """Transmitted bytes (``xmit_data`` × 4)."""
        return None if self.xmit_data is None else self.xmit_data * 4

    @property
    def rcv_bytes(self) -> int | None:
        """Received bytes (``rcv_data`` × 4)."""
        return None if self.rcv_data is None else self.rcv_data * 4


class Resolution(models.IntegerChoices):
    """Time resolution of a history chunk: raw samples, per-minute and per-hour rollups."""

    RAW = 0, "raw"
    MINUTE = 60, "1 min"
    HOUR = 3600, "1 h"


class CounterChunk(models.Model):
    """A compact block of history: one time step of up to 256 ports (``port_id >> 8 == bucket``).

    ``data`` is the packed encoding of ``telemetry.services.history`` (a 256-bit presence mask,
    then per present port: rates as 24-bit floats, the error deltas and flags). Raw rows have ``t`` = the sweep
    time; rollup rows ``t`` = start of the minute/hour, values averaged (errors summed). Chunks
    of one bucket and resolution are read by a range scan of the (bucket, resolution, t) index.
    """

    fabric = models.ForeignKey("fabric.Fabric", on_delete=models.CASCADE, related_name="+")
    bucket = models.IntegerField()
    resolution = models.PositiveIntegerField(choices=Resolution.choices, default=Resolution.RAW)
    t = models.IntegerField(help_text="epoch seconds (UTC)")
    data = models.BinaryField()

    class Meta:
        indexes = [
            models.Index(fields=["bucket", "resolution", "t"], name="chunk_bucket_res_t"),
            models.Index(fields=["resolution", "t"], name="chunk_res_t"),
        ]

    def __str__(self) -> str:
        return f"chunk {self.bucket} @{self.t} res {self.resolution}"

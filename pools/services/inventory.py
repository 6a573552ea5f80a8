"""Store a host's GPU report (``pools.parsers``) as its current GPU inventory.

Rules (issue 11, "Inventory"):

* one transaction: the host row is locked (``select_for_update``) so two reports of one host
  queue; its GPUs and slices are locked too, in pk order (the order the allocation service uses).
* GPUs are matched by UUID; MIG slices by (GPU, GPU-instance id, compute-instance id).
* a report describes its own host only (issue 22): a reported UUID that is stored on another host
  is a conflict, never a move. The whole report is refused (:class:`GpuConflict`, HTTP 409) and
  nothing of it is written; :func:`record_conflict` then audits it (``gpu.conflict``) and writes a
  ``gpu.uuid_conflict`` event (an alarm on the reporting host) in a transaction of its own. A GPU
  that really moved is moved by an operator at the shell (``manage.py import_gpus --move``,
  ``allow_moves=True``).
* bounded (:class:`ReportRejected`, HTTP 400, nothing written): at most
  ``WEFT_GPUS_PER_REPORT_MAX`` GPUs in one report, at most ``WEFT_GPUS_PER_HOST_MAX`` GPU rows kept
  on one host (present and missing), every number within its column's range (a memory of
  10^30 MiB is the agent's mistake, not a database error), and every text (UUID, PCI bus id,
  product name…) within its column's length and free of the characters ``core.validators``
  refuses in names (a bidi override, a NUL).
* idempotent: an unchanged report writes no GPU or slice row and no event (``rows_written`` 0);
  the :class:`~pools.models.HostInventory` row (report time, warnings) and the audit entry are
  still written, as a Discovery is for an unchanged rediscovery.
* nothing is dropped: a GPU or slice no longer reported keeps its row with ``missing_since`` set
  (``gpu.disappeared``, an alarm); its ``state`` (allocation) is untouched; reported again it is
  present again (``gpu.appeared`` clears the alarm). The first report of a host writes no
  per-GPU ``gpu.appeared`` events.
* health: a GPU going unhealthy writes ``gpu.unhealthy``, back to healthy/degraded ``gpu.healthy``;
  impossible readings (the parser's warnings) write ``gpu.reading_impossible``.
* the rail: the report's ``rail_device`` (``mlx5_3``) is resolved to the host's CA node, through
  the agent's HCA list (device → node GUID) when given, else the CA NodeDescription
  ``"<host> <device>"`` (``fabric.services.derive.host_from_description``).
* ``pools.signals.inventory_committed`` is sent on commit, and ``inventory.changed`` is published
  to ``core.realtime.group_name("gpus", fabric_id)``.

Rails lost to the topology (:func:`resolve_lost_rails`): a CA node that loses its last link (a
cable pulled or flapping) is deleted by the discovery ingest and ``Gpu.rail_node`` goes NULL with
it (``on_delete=SET_NULL``) while ``rail_device`` stays. When a later discovery brings the CA back
(a new node row, same GUID and NodeDescription), the pools' reaction to ``discovery_committed``
(``pools.receivers``) resolves those GPUs' ``rail_device`` again, by the same rule as a report
(the host's last agent HCA list, else the NodeDescription), without waiting for the next report.
"""

from __future__ import annotations

import logging
import unicodedata
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.backends.base.operations import BaseDatabaseOperations
from django.utils import timezone

from accounts import audit
from core.realtime import group_name, publish
from core.validators import first_unprintable
from events.engine import process_pending_events
from events.services import EventSpec, record_events
from fabric.choices import NodeType
from fabric.guid import normalize_guid
from fabric.models import Host, Node

from ..models import Gpu, HostInventory, MigSlice
from ..parsers.records import GpuRecord, GpuReport
from ..signals import inventory_committed

_GPU_FIELDS = (
    "index",
    "minor_number",
    "product_name",
    "architecture",
    "serial",
    "memory_total_mib",
    "memory_reserved_mib",
    "pci_bus_id",
    "numa_node",
    "health",
    "health_reasons",
    "mig_mode_current",
    "mig_mode_pending",
    "rail_node_id",
    "rail_device",
    "rail_affinity",
)
_SLICE_FIELDS = (
    "mig_index",
    "profile",
    "profile_id",
    "placement_start",
    "placement_size",
    "uuid",
    "memory_total_mib",
    "sm_count",
)
log = logging.getLogger(__name__)
#: a temporary index while GPUs swap indexes (the present (host, index) pair is unique)
_TEMP_INDEX = 30000


class HostNotFound(LookupError):
    """No host (or several) of that name; the message says which and where to look."""


class ReportRejected(ValueError):
    """A report outside the bounds (too many GPUs, a number out of its column's range): HTTP 400.

    ``field`` names the report's field (``nvidia_smi_xml``), ``where`` the GPU/slice and value."""

    def __init__(self, message: str, *, field: str = "nvidia_smi_xml", where: str = ""):
        super().__init__(message)
        self.field = field
        self.where = where


class GpuConflict(Exception):
    """Reported GPU UUIDs that are stored on other hosts (HTTP 409; nothing of the report is
    written). ``host`` is the reporting host, ``conflicts`` ``[{"uuid", "host", "fabric",
    "state"}]`` the GPUs as stored. Record it with :func:`record_conflict` once the caller's
    transaction is over."""

    def __init__(self, host: Host, conflicts: list[dict[str, Any]]):
        self.host = host
        self.conflicts = conflicts
        others = sorted({f"{c['host']} ({c['fabric']})" for c in conflicts})
        super().__init__(
            f"{len(conflicts)} reported GPU(s) belong to another host ({', '.join(others)}): "
            f"{', '.join(c['uuid'] for c in conflicts[:8])}{' …' if len(conflicts) > 8 else ''}. "
            f"A report describes its own host only; a GPU that really moved is moved by an operator "
            f"(manage.py import_gpus --move)"
        )


@dataclass
class _Tally:
    rows: int = 0
    added: int = 0
    missing: int = 0
    returned: int = 0
    changed: int = 0


def find_host(name: str, fabric: str | None = None) -> Host:
    """The host named ``name`` (in fabric ``fabric`` when given).

    Raises:
        HostNotFound: none, or several in different fabrics without ``fabric``.
    """
    qs = Host.objects.select_related("fabric").filter(name=name)
    if fabric:
        qs = qs.filter(fabric__name=fabric)
    hosts = list(qs[:2])
    if not hosts:
        where = f" in fabric {fabric}" if fabric else ""
        raise HostNotFound(
            f"no host {name!r}{where}: hosts come from the fabric's CAs (discover or import it first)"
        )
    if len(hosts) > 1:
        raise HostNotFound(f"host {name!r} is in several fabrics: name one (--fabric)")
    return hosts[0]


def ingest_gpu_report(
    host: Host,
    report: GpuReport,
    *,
    source: str,
    hcas: list[dict[str, Any]] | None = None,
    user=None,
    allow_moves: bool = False,
) -> dict[str, Any]:
    """Store ``report`` as the GPUs of ``host``; return the summary ``{"host", "fabric", "gpus"
    (present), "mig_slices" (present), "warnings" ([{"where", "message"}]), "added", "missing",
    "returned", "changed", "rows_written"}``.

    ``source``: :class:`pools.choices.ReportSource` value; ``hcas``: the agent's local HCAs (see
    :class:`~pools.models.HostInventory`); ``allow_moves``: a reported UUID stored on another host
    moves to this one (an operator's ``import_gpus --move``; never for a host agent).

    Raises:
        ReportRejected: above ``WEFT_GPUS_PER_REPORT_MAX``/``WEFT_GPUS_PER_HOST_MAX``, or a number
            outside its column (nothing written).
        GpuConflict: a reported UUID is stored on another host and ``allow_moves`` is off (nothing
            written; the caller records it with :func:`record_conflict`).
    Database errors roll the whole report back.
    """
    check_bounds(report)
    now = timezone.now()
    tally = _Tally()
    events: list[EventSpec] = []
    with transaction.atomic():
        host = Host.objects.select_for_update().select_related("fabric").get(pk=host.pk)
        previous = HostInventory.objects.filter(host=host).first()
        first_report = previous is None
        rails = _rail_nodes(host, {g.rail_device for g in report.gpus if g.rail_device}, hcas)
        uuids = [g.uuid for g in report.gpus]
        stored = {g.uuid: g for g in Gpu.objects.select_for_update().filter(host=host).order_by("pk")}
        moved = {
            g.uuid: g
            for g in Gpu.objects.select_for_update()
            .filter(uuid__in=uuids)
            .exclude(host=host)
            .select_related("host__fabric")
            .order_by("pk")
        }
        if moved and not allow_moves:
            raise GpuConflict(host, [
                {"uuid": g.uuid, "host": g.host.name, "fabric": g.host.fabric.name, "state": g.state}
                for g in moved.values()
            ])  # fmt: skip
        new_rows = sum(1 for u in uuids if u not in stored and u not in moved)
        if new_rows and len(stored) + new_rows > settings.WEFT_GPUS_PER_HOST_MAX:
            raise ReportRejected(
                f"{host.name} would keep {len(stored) + new_rows} GPU rows ({len(stored)} stored, "
                f"{new_rows} new), above WEFT_GPUS_PER_HOST_MAX={settings.WEFT_GPUS_PER_HOST_MAX}"
            )
        # GPUs no longer reported: kept, marked missing (the allocation state stays)
        for uuid, gpu in stored.items():
            if uuid not in uuids and gpu.missing_since is None:
                gpu.missing_since = now
                gpu.save(update_fields=["missing_since"])
                tally.missing += 1
                tally.rows += 1
                events.append(_gpu_event("gpu.disappeared", gpu, host,
                                         f"{host.name} GPU{gpu.index} ({gpu.uuid}) is no longer reported",
                                         {"state": gpu.state}))  # fmt: skip
        # free the indexes of present GPUs whose index changes (swaps)
        swapping = [
            stored[r.uuid] for r in report.gpus
            if r.uuid in stored and stored[r.uuid].missing_since is None and stored[r.uuid].index != r.index
        ]  # fmt: skip
        for n, gpu in enumerate(swapping):
            Gpu.objects.filter(pk=gpu.pk).update(index=_TEMP_INDEX + n)
        # a missing GPU holding an index a reported GPU takes stays missing: nothing to free
        for rec in report.gpus:
            values = _gpu_values(rec, rails.get(rec.rail_device))
            gpu = stored.get(rec.uuid) or moved.get(rec.uuid)
            new_gpu = gpu is None
            if gpu is None:
                gpu = Gpu.objects.create(host=host, uuid=rec.uuid, **values)
                tally.added += 1
                tally.rows += 1
                if not first_report:
                    events.append(_gpu_event("gpu.appeared", gpu, host,
                                             f"{host.name} GPU{gpu.index} ({gpu.uuid}) appeared"))  # fmt: skip
                if gpu.health == "unhealthy":
                    events.append(_health_event(gpu, host))
            else:
                was_unhealthy = gpu.health == "unhealthy"
                diffs = {k: v for k, v in values.items() if getattr(gpu, k) != v}
                if gpu in swapping:
                    diffs["index"] = rec.index
                came_back = gpu.missing_since is not None or gpu.host_id != host.pk
                if came_back:
                    old_host = gpu.host_id
                    gpu.missing_since = None
                    gpu.host = host
                    diffs.update(missing_since=None, host_id=host.pk)
                    tally.returned += 1
                    moved_text = " (moved from another host)" if old_host != host.pk else ""
                    events.append(_gpu_event("gpu.appeared", gpu, host,
                                             f"{host.name} GPU{rec.index} ({gpu.uuid}) is reported again{moved_text}"))  # fmt: skip
                if diffs:
                    for k, v in diffs.items():
                        setattr(gpu, k, v)
                    gpu.save(
                        update_fields=sorted({k.removesuffix("_id") if k == "host_id" else k for k in diffs})
                    )
                    tally.rows += 1
                    tally.changed += 0 if came_back else 1
                if gpu.health == "unhealthy" and not was_unhealthy:
                    events.append(_health_event(gpu, host))
                elif was_unhealthy and gpu.health != "unhealthy":
                    events.append(_gpu_event("gpu.healthy", gpu, host,
                                             f"{host.name} GPU{gpu.index} is {gpu.health} again"))  # fmt: skip
            stored[rec.uuid] = gpu
            _sync_slices(gpu, rec, host, now, tally, events, new_gpu=new_gpu)
        for w in report.warnings:
            if "impossible" in w.message:
                uuid = next((g.uuid for g in report.gpus if g.uuid in w.message), "")
                events.append(EventSpec(code="gpu.reading_impossible", message=f"{host.name}: {w.message}",
                                        object_type="gpu", object_key=uuid or host.name,
                                        object_repr=host.name, details={"where": w.where}))  # fmt: skip
        warnings = [w.as_dict() for w in report.warnings]
        HostInventory.objects.update_or_create(
            host=host,
            defaults={
                "report_source": source,
                "reported_at": now,
                "driver_version": report.driver_version,
                "cuda_version": report.cuda_version,
                "attached_gpus": report.attached_gpus,
                "hcas": hcas if hcas is not None else (previous.hcas if previous else []),
                "warnings": warnings,
            },
        )
        if events:
            record_events(host.fabric, events, at=now)
            tally.rows += len(events)
        summary = {
            "host": host.name,
            "fabric": host.fabric.name,
            "gpus": Gpu.objects.filter(host=host).present().count(),
            "mig_slices": MigSlice.objects.filter(gpu__host=host).present().count(),
            "warnings": warnings,
            "added": tally.added,
            "missing": tally.missing,
            "returned": tally.returned,
            "changed": tally.changed,
            "rows_written": tally.rows,
        }
        audit.record("gpu.inventory", host, {k: v for k, v in summary.items() if k != "warnings"}
                     | {"source": source, "warnings": len(warnings)}, user=user)  # fmt: skip
        host_id, fabric_id = host.pk, host.fabric_id
        transaction.on_commit(lambda: _after_commit(host_id, fabric_id, summary))
    return summary


#: numeric record fields → the model column whose range bounds them
_GPU_NUMBERS = ("index", "minor_number", "memory_total_mib", "memory_reserved_mib", "numa_node")
_SLICE_NUMBERS = ("gpu_instance_id", "compute_instance_id", "mig_index", "profile_id", "placement_start",
                  "placement_size", "memory_total_mib", "sm_count")  # fmt: skip
#: text record fields → the model column whose length bounds them (and no control/bidi characters)
_GPU_TEXTS = ("uuid", "pci_bus_id", "product_name", "architecture", "serial", "rail_device", "rail_affinity")
_SLICE_TEXTS = ("profile", "uuid")


def _column_range(model, name: str) -> tuple[int, int]:
    """The portable range of an integer column (Django's ranges of the backends: PostgreSQL's
    smallint/integer, the positive ones from 0), whatever database runs now."""
    field = model._meta.get_field(name)
    low, high = BaseDatabaseOperations.integer_field_ranges[field.get_internal_type()]
    if field.get_internal_type().startswith("Positive"):
        low = 0
    return low, high


def check_bounds(report: GpuReport) -> None:
    """Refuse a report outside the bounds (module docstring) before anything is locked.

    Raises:
        ReportRejected: the first value out of bounds, located (``gpu[i] <uuid> <field>=<value>``).
    """
    limit = settings.WEFT_GPUS_PER_REPORT_MAX
    if len(report.gpus) > limit:
        raise ReportRejected(
            f"the report lists {len(report.gpus)} GPUs, above WEFT_GPUS_PER_REPORT_MAX={limit}"
        )
    seen: set[str] = set()
    for i, g in enumerate(report.gpus):
        if g.uuid in seen:
            raise ReportRejected(f"gpu[{i}]: UUID {g.uuid} is listed twice", where=f"gpu[{i}]")
        seen.add(g.uuid)
        _check_texts(Gpu, _GPU_TEXTS, g, f"gpu[{i}]")
        for j, m in enumerate(g.mig_devices):
            _check_texts(MigSlice, _SLICE_TEXTS, m, f"gpu[{i}] mig[{j}]")
        checks = [(Gpu, f, getattr(g, f), f"gpu[{i}] {g.uuid}") for f in _GPU_NUMBERS]
        checks += [
            (MigSlice, f, getattr(m, f), f"gpu[{i}] {g.uuid} mig[{j}]")
            for j, m in enumerate(g.mig_devices)
            for f in _SLICE_NUMBERS
        ]
        for model, name, value, where in checks:
            if value is None:
                continue
            low, high = _column_range(model, name)
            if name == "index":
                high = _TEMP_INDEX - 1
            if not isinstance(value, int) or not low <= value <= high:
                raise ReportRejected(
                    f"{where}: {name} = {value} is outside {low}..{high}", where=f"{where} {name}"
                )


def _check_texts(model, names: tuple[str, ...], record, where: str) -> None:
    """Refuse a text of ``record`` longer than its column of ``model`` (PostgreSQL: a DataError;
    SQLite stored it whole) or holding a character ``core.validators`` refuses in names (a bidi
    override makes a UUID read reversed on every page; a NUL is a 500 on PostgreSQL)."""
    for name in names:
        value = getattr(record, name) or ""
        limit = model._meta.get_field(name).max_length
        if len(value) > limit:
            raise ReportRejected(
                f"{where}: {name} {value[:40]!r}… is longer than {limit} characters", where=f"{where} {name}"
            )
        found = first_unprintable(value)
        if found is not None:
            pos, ch = found
            raise ReportRejected(
                f"{where}: {name} {value!r} holds U+{ord(ch):04X} {unicodedata.name(ch, '')} at character "
                f"{pos + 1} (control or invisible formatting characters are refused)",
                where=f"{where} {name}",
            )


def record_conflict(exc: GpuConflict, *, source: str, user=None) -> None:
    """Audit a refused report (``gpu.conflict``: the UUIDs and the hosts holding them) and write a
    ``gpu.uuid_conflict`` event on the reporting host (an alarm, see ``pools.event_types``), in a
    transaction of its own (call it after the refused report's transaction rolled back); the alarm
    is raised at once (``events.engine.process_pending_events``), not at the minute flush. A
    failure to raise it is logged: the audit entry and the event are stored."""
    host = exc.host
    with transaction.atomic():
        audit.record("gpu.conflict", host, {"source": source, "conflicts": exc.conflicts}, user=user)
        record_events(host.fabric, [EventSpec(
            code="gpu.uuid_conflict", object_type="host", object_key=host.name, object_repr=host.name,
            message=f"{host.name} reported {len(exc.conflicts)} GPU(s) of other hosts "
                    f"({', '.join(sorted({c['host'] for c in exc.conflicts}))}); the report was refused",
            details={"source": source, "conflicts": exc.conflicts[:64]},
        )])  # fmt: skip
    try:
        process_pending_events(host.fabric_id)
    except Exception:
        log.exception("could not raise the GPU conflict alarm of %s", host.name)


def _after_commit(host_id: int, fabric_id: int, summary: dict) -> None:
    inventory_committed.send(sender=HostInventory, host_id=host_id, fabric_id=fabric_id, summary=summary)
    publish(group_name("gpus", fabric_id), "inventory.changed", {"host_id": host_id, **summary})


def _gpu_values(rec: GpuRecord, rail_node_id: int | None) -> dict[str, Any]:
    return {
        "index": rec.index,
        "minor_number": rec.minor_number,
        "product_name": rec.product_name[:96],
        "architecture": rec.architecture[:32],
        "serial": rec.serial[:64],
        "memory_total_mib": rec.memory_total_mib,
        "memory_reserved_mib": rec.memory_reserved_mib,
        "pci_bus_id": rec.pci_bus_id[:16],
        "numa_node": rec.numa_node,
        "health": rec.health,
        "health_reasons": list(rec.health_reasons),
        "mig_mode_current": rec.mig_current,
        "mig_mode_pending": rec.mig_pending,
        "rail_node_id": rail_node_id,
        "rail_device": rec.rail_device[:32],
        "rail_affinity": rec.rail_affinity[:8],
    }


def _sync_slices(
    gpu: Gpu, rec: GpuRecord, host: Host, now, tally: _Tally, events: list[EventSpec], *, new_gpu: bool
) -> None:
    """Slices of one GPU: created, updated, marked missing; ``gpu.mig_changed`` when a GPU known
    before gains or loses slices (the slices of a new GPU are its inventory, not a change)."""
    stored = {
        (s.gpu_instance_id, s.compute_instance_id): s
        for s in MigSlice.objects.select_for_update().filter(gpu=gpu).order_by("pk")
    }
    reported = {(m.gpu_instance_id, m.compute_instance_id): m for m in rec.mig_devices}
    changes = {"added": [], "missing": []}
    for key, s in stored.items():
        if key not in reported and s.missing_since is None:
            s.missing_since = now
            s.save(update_fields=["missing_since"])
            tally.rows += 1
            changes["missing"].append(f"gi{key[0]}/ci{key[1]}")
    for key, m in reported.items():
        values = {f: getattr(m, f) for f in _SLICE_FIELDS}
        values["profile"] = (values["profile"] or "")[:32]
        s = stored.get(key)
        if s is None:
            MigSlice.objects.create(gpu=gpu, gpu_instance_id=key[0], compute_instance_id=key[1], **values)
            tally.rows += 1
            changes["added"].append(f"gi{key[0]}/ci{key[1]}")
            continue
        # a value the report does not carry (no -lgi this time) keeps what was known
        diffs = {k: v for k, v in values.items() if v not in (None, "") and getattr(s, k) != v}
        if s.missing_since is not None:
            diffs["missing_since"] = None
            changes["added"].append(f"gi{key[0]}/ci{key[1]}")
        if diffs:
            for k, v in diffs.items():
                setattr(s, k, v)
            s.save(update_fields=sorted(diffs))
            tally.rows += 1
    if (changes["added"] or changes["missing"]) and not new_gpu:
        events.append(_gpu_event("gpu.mig_changed", gpu, host,
                                 f"{host.name} GPU{gpu.index}: MIG slices added {changes['added'] or '-'}, "
                                 f"missing {changes['missing'] or '-'}", changes))  # fmt: skip


def _rail_nodes(host: Host, devices: set[str], hcas: list[dict[str, Any]] | None) -> dict[str, int]:
    """RDMA device name (of ``devices``) → CA node id on this host (see the module docstring)."""
    if not devices:
        return {}
    out: dict[str, int] = {}
    cas = Node.objects.filter(host=host, node_type=NodeType.CA)
    if hcas:
        guids = {}
        for h in hcas:
            try:
                if h.get("name") in devices and h.get("node_guid"):
                    guids[normalize_guid(h["node_guid"])] = h["name"]
            except ValueError:
                continue
        for node_id, guid in cas.filter(node_guid__in=list(guids)).values_list("id", "node_guid"):
            out[guids[guid]] = node_id
    for node_id, desc in cas.values_list("id", "description"):
        words = desc.split()
        if len(words) == 2 and words[1] in devices and words[1] not in out:
            out[words[1]] = node_id
    return out


def resolve_lost_rails(fabric_id: int) -> dict[str, Any]:
    """Set ``rail_node`` again on the GPUs of fabric ``fabric_id`` that lost it (NULL) but keep a
    ``rail_device``, when their host has a CA node of that device again (module docstring: the
    stored agent HCA list's node GUID, else the NodeDescription ``"<host> <device>"``).

    In one transaction (the caller's when it has one): the GPU rows are locked in pk order (the
    allocation service's order) and re-read, so a report racing this keeps its own rail; per
    host an audit entry ``gpu.rail_resolved`` (``{"gpus": [index], "devices": [name]}``) and per
    GPU an Info event ``gpu.rail_resolved``; on commit ``inventory_committed`` (``summary`` =
    ``{"host", "fabric", "rails_resolved": [index]}``) and ``inventory.changed``, as after a report
    (the scheduler's locality tree holds rails).

    Returns ``{"gpus": n resolved, "hosts": n, "unresolved": n still without a CA}``. A GPU whose
    CA is still gone writes nothing (a rediscovery with nothing to resolve costs one query).
    """
    out = {"gpus": 0, "hosts": 0, "unresolved": 0}
    lost = Gpu.objects.filter(host__fabric_id=fabric_id, rail_node__isnull=True).exclude(rail_device="")
    ids = list(lost.values_list("pk", flat=True))
    if not ids:
        return out
    now = timezone.now()
    with transaction.atomic():
        gpus = list(
            lost.select_for_update(of=("self",))
            .filter(pk__in=ids)
            .select_related("host__fabric")
            .order_by("pk")
        )
        by_host: dict[int, list[Gpu]] = {}
        for gpu in gpus:
            by_host.setdefault(gpu.host_id, []).append(gpu)
        hcas = dict(HostInventory.objects.filter(host_id__in=list(by_host)).values_list("host_id", "hcas"))
        events: list[EventSpec] = []
        fabric = None
        for host_id, host_gpus in by_host.items():
            host = host_gpus[0].host
            fabric = host.fabric
            rails = _rail_nodes(host, {g.rail_device for g in host_gpus}, hcas.get(host_id) or None)
            resolved = [g for g in host_gpus if g.rail_device in rails]
            out["unresolved"] += len(host_gpus) - len(resolved)
            if not resolved:
                continue
            for g in resolved:
                g.rail_node_id = rails[g.rail_device]
                events.append(_gpu_event("gpu.rail_resolved", g, host,
                                         f"{host.name} GPU{g.index}: rail {g.rail_device} is on the fabric again",
                                         {"rail_device": g.rail_device, "node_id": g.rail_node_id}))  # fmt: skip
            Gpu.objects.bulk_update(resolved, ["rail_node"])
            indexes = sorted(g.index for g in resolved)
            audit.record("gpu.rail_resolved", host,
                         {"gpus": indexes, "devices": sorted({g.rail_device for g in resolved})})  # fmt: skip
            summary = {"host": host.name, "fabric": fabric.name, "rails_resolved": indexes}
            transaction.on_commit(lambda h=host_id, s=summary: _after_commit(h, fabric_id, s))
            out["gpus"] += len(resolved)
            out["hosts"] += 1
        if events:
            record_events(fabric, events, at=now)
    return out


def _gpu_event(code: str, gpu: Gpu, host: Host, message: str, details: dict | None = None) -> EventSpec:
    return EventSpec(code=code, message=message, object_type="gpu", object_key=gpu.uuid,
                     object_repr=f"{host.name} GPU{gpu.index}", details=details or {})  # fmt: skip


def _health_event(gpu: Gpu, host: Host) -> EventSpec:
    return _gpu_event("gpu.unhealthy", gpu, host,
                      f"{host.name} GPU{gpu.index} ({gpu.uuid}) is unhealthy: {'; '.join(gpu.health_reasons)}",
                      {"reasons": gpu.health_reasons})  # fmt: skip


def resolve_reporting_host(name: str, fabric: str = "", hcas: list[dict[str, Any]] | None = None) -> Host:
    """The host a report comes from: the one host whose CA nodes have the node GUIDs of the
    reported HCAs (exact, whatever the machine calls itself), else by ``name`` (and ``fabric``).

    Raises:
        HostNotFound: no match (the fabric was not discovered yet), or the HCAs belong to
            several hosts.
    """
    guids = set()
    for h in hcas or []:
        try:
            if h.get("node_guid"):
                guids.add(normalize_guid(h["node_guid"]))
        except ValueError:
            continue
    if guids:
        qs = Node.objects.filter(node_type=NodeType.CA, node_guid__in=guids, host__isnull=False)
        if fabric:
            qs = qs.filter(fabric__name=fabric)
        host_ids = set(qs.values_list("host_id", flat=True))
        if len(host_ids) == 1:
            return Host.objects.select_related("fabric").get(pk=host_ids.pop())
        if len(host_ids) > 1:
            raise HostNotFound(f"the reported HCAs belong to {len(host_ids)} hosts: name the fabric")
    return find_host(name, fabric or None)

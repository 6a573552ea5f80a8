"""Poll Ethernet devices over SNMP: read many at once (asyncio), then store each in one transaction.

``poll_devices(devices)`` reads every device concurrently (``WEFT_SNMP_CONCURRENCY`` at a time,
each within its own budget ``Device.budget_s``: a dead or slow device times out without delaying
the others), then for each device, in one transaction: identification (first contact and every
``WEFT_SNMP_INVENTORY_S``: system group, ENTITY-MIB chassis model and serial, the IB switch node
of the same name), interfaces (IF-MIB/ifXTable; 64-bit ifHC* counters, else the 32-bit ones,
whose wraps ``telemetry.semantics.derive_wrapping`` counts; every poll), sensors
(ENTITY-SENSOR-MIB; every ``WEFT_SNMP_SENSORS_S``), LLDP neighbours (when the agent's
lldpStatsRemTablesLastChangeTime moved, or every poll where it lacks it) diffed into
``device.link_up``/``link_down`` events, interface state changes
(``device.interface_down``/``up``) and reachability (``device.unreachable``/``auth_failed``/
``reachable``). Then ``devices.services.rules.evaluate`` applies the events and condition rules
of each fabric touched (alarms at once, not on the minute flush).

The first successful poll of a device sets its baseline: no link or interface events for what
it found (as the first discovery of an IB fabric writes one ``fabric.discovered``, not an event
per node), only ``device.identified``; its counters are the first sample (no rates, no deltas:
``telemetry.semantics.derive_wrapping`` with no previous sample), so no discard/error/congestion
rule measures it. One exception: an interface administratively up and operationally down
(``devices.models.is_down``: not ``notPresent`` and the like, the device's baseline) raises
``device.interface_down`` at once, and only once (the next polls see no change).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from events.services import EventSpec, record_events
from fabric.choices import NodeType
from fabric.models import Node
from telemetry import semantics

from .. import crypto, mibs, parsers
from ..choices import PollStatus
from ..collectors.snmp import Session, SnmpError, close_engine, with_deadline
from ..keys import interface_key, link_key
from ..models import Device, Interface, Neighbour, Sensor, is_down
from . import history
from .rules import evaluate

log = logging.getLogger(__name__)

#: every poll: states and counters; inventory polls add ``mibs.INTERFACE_INVENTORY``
INTERFACE_COLUMNS = (*mibs.INTERFACE_STATE, *mibs.HC_COUNTERS, mibs.IF_DISCONTINUITY, *mibs.PFC)


@dataclass
class Known:
    """What the database already knows of a device, for a poll between inventories: its
    interfaces' inventory columns ``{ifIndex: {...}}`` and its sensors' static columns
    ``{index: (type, scale, precision)}`` (``devices.parsers``)."""

    interfaces: dict[int, dict] = field(default_factory=dict)
    sensors: dict[int, tuple[int, int, int]] = field(default_factory=dict)


def known_of(devices: list[Device]) -> dict[int, Known]:
    """:class:`Known` of each device (two queries)."""
    out = {d.pk: Known() for d in devices}
    for row in Interface.objects.filter(device__in=devices, present=True).values(
        "device_id", "if_index", "name", "descr", "alias", "if_type", "speed_mbps"
    ):
        out[row.pop("device_id")].interfaces[row.pop("if_index")] = row
    for dev_id, idx, t, sc, pr in Sensor.objects.filter(device__in=devices).values_list(
        "device_id", "index", "sensor_type", "scale", "precision"
    ):
        out[dev_id].sensors[idx] = (t, sc, pr)
    return out


@dataclass
class Reading:
    """What one device's poll read (parsed), or why it failed.

    ``kind``: ``ok``, ``timeout`` (no answer), ``auth`` (credentials refused or undecryptable),
    ``error``. ``t`` the interfaces' sample time (epoch s, the middle of their walk);
    ``neighbours`` None when the agent has no LLDP-MIB; ``identity``/``entity`` only on an
    inventory poll; ``requests`` SNMP requests sent; ``duration_s`` wall time."""

    kind: str = "ok"
    error: str = ""
    system: dict = field(default_factory=dict)
    identity: parsers.Identity | None = None
    interfaces: list[parsers.InterfaceRecord] = field(default_factory=list)
    sensors: list[parsers.SensorRecord] = field(default_factory=list)
    neighbours: list[parsers.NeighbourRecord] | None = None
    t: float = 0.0
    requests: int = 0
    duration_s: float = 0.0
    inventory: bool = False
    #: a poll between inventories met an interface it does not know: inventory at the next poll
    unknown_interfaces: bool = False
    #: whether this poll read the sensors (``sensors`` then holds them all)
    sensors_read: bool = False
    #: whether this poll walked the LLDP tables (else ``neighbours`` is None: unchanged or no LLDP-MIB)
    lldp_walked: bool = False
    #: the agent's lldpStatsRemTablesLastChangeTime (ticks), None when it lacks it
    lldp_changed: int | None = None


async def read_device(
    session: Session,
    *,
    inventory: bool,
    known: Known | None = None,
    sensors: bool = True,
    lldp_changed: int | None = None,
    last_uptime: int | None = None,
) -> Reading:
    """Read one device through ``session`` (see the module docstring for what): on an inventory
    poll everything, between inventories only what changes (states, counters; sensor readings
    when ``sensors``; the LLDP remote table unless the agent's lldpStatsRemTablesLastChangeTime
    still equals ``lldp_changed``, the value at the last walk, and sysUpTime did not go back below
    ``last_uptime``, the last poll's: a restarted agent counts from 0 again), the rest from ``known``.

    Every poll reads every interface's states and counters: they are the rates. The other tables
    are skipped because they did not change (LLDP) or move slowly (sensors, ``WEFT_SNMP_SENSORS_S``):
    a poll between inventories is then one GET of two scalars and one walk of the interface
    columns (~60% of the varbinds and requests of a poll that reads everything).

    Raises:
        devices.collectors.snmp.SnmpError: the agent did not answer or refused the credentials.
        devices.parsers.ParseError: no sysObjectID.
    """
    known = known or Known()
    inventory = inventory or not known.interfaces
    out = Reading(inventory=inventory)
    out.system = await session.get(
        list(mibs.SYSTEM + (mibs.LLDP_REM_CHANGED,) if inventory else mibs.POLL_SCALARS)
    )
    changed = out.system.get(mibs.LLDP_REM_CHANGED)
    out.lldp_changed = changed if isinstance(changed, int) else None
    if inventory:
        out.identity = parsers.identity(out.system)
    t0 = time.time()
    columns = [*INTERFACE_COLUMNS, *(mibs.INTERFACE_INVENTORY if inventory else ())]
    tables = await session.walk(columns)
    if parsers.needs_32bit(tables):
        tables.update(await session.walk(list(mibs.COUNTERS_32)))
    out.t = (t0 + time.time()) / 2
    out.interfaces = parsers.interfaces(tables, None if inventory else known.interfaces)
    if not inventory:
        out.unknown_interfaces = any(i.if_index not in known.interfaces for i in out.interfaces)
    out.sensors_read = sensors or inventory or not known.sensors
    sensor_cols = (
        ()
        if not out.sensors_read
        else mibs.SENSORS
        if inventory or not known.sensors
        else mibs.SENSOR_READINGS
    )
    uptime = out.system.get(mibs.SYS_UPTIME)
    restarted = isinstance(uptime, int) and last_uptime is not None and uptime < last_uptime
    out.lldp_walked = inventory or restarted or out.lldp_changed is None or out.lldp_changed != lldp_changed
    lldp_cols = (
        () if not out.lldp_walked else (*mibs.LLDP, mibs.LLDP_LOC_PORT_DESC) if inventory else mibs.LLDP
    )
    more = await session.walk([*sensor_cols, *lldp_cols]) if sensor_cols or lldp_cols else {}
    entity = None
    if inventory:
        entity = await session.walk(list(mibs.ENTITY_TREE))
        chassis = sorted(
            int(i) for i, c in entity.get(mibs.ENT_CLASS, {}).items() if c == parsers.ENT_CHASSIS
        )
        if chassis:
            got = await session.get([f"{c}.{chassis[0]}" for c in mibs.ENTITY_CHASSIS])
            for c in mibs.ENTITY_CHASSIS:
                entity.setdefault(c, {})[str(chassis[0])] = got.get(f"{c}.{chassis[0]}")
        out.identity = parsers.identity(out.system, entity)
    if out.sensors_read:
        out.sensors = parsers.sensors(more, entity, None if inventory else known.sensors)
    if out.lldp_walked and (
        more.get(mibs.LLDP_LOC_PORT_ID)
        or more.get(mibs.LLDP_LOC_PORT_DESC)
        or more.get(mibs.LLDP_REM_CHASSIS)
    ):
        out.neighbours = parsers.neighbours(more, out.interfaces)
    return out


async def _read_all(jobs: list[tuple], concurrency: int) -> dict[int, Reading]:
    """Read every ``(device id, target, error, inventory, budget_s, known, sensors, lldp_changed,
    last_uptime)`` job concurrently (as :func:`read_device` takes them); a job with no target
    failed before any request (``error`` says why)."""
    sem = asyncio.Semaphore(concurrency)
    shared = None
    results: dict[int, Reading] = {}

    async def one(pk, target, error, inventory, budget, known, sensors, lldp_changed, last_uptime):
        nonlocal shared
        if target is None:
            results[pk] = Reading(kind="auth", error=error)
            return
        async with sem:
            t0 = time.monotonic()
            if target.version == "3":
                session = Session(target)
            else:
                if shared is None:
                    shared = Session(target).engine
                session = Session(target, shared)
            try:
                reading = await with_deadline(
                    read_device(
                        session,
                        inventory=inventory,
                        known=known,
                        sensors=sensors,
                        lldp_changed=lldp_changed,
                        last_uptime=last_uptime,
                    ),
                    budget,
                )
            except SnmpError as exc:
                reading = Reading(kind=exc.kind, error=str(exc))
            except parsers.ParseError as exc:
                reading = Reading(kind="error", error=str(exc))
            except Exception as exc:  # a bad answer must not stop the other devices' polls
                log.exception("SNMP poll of %s failed", target)
                reading = Reading(kind="error", error=f"unexpected failure: {type(exc).__name__}: {exc}")
            finally:
                if target.version == "3":
                    close_engine(session.engine)
            reading.requests = session.requests
            reading.duration_s = time.monotonic() - t0
            results[pk] = reading

    try:
        await asyncio.gather(*(one(*job) for job in jobs))
    finally:
        if shared is not None:
            close_engine(shared)
    return results


def collect(
    devices: list[Device], *, concurrency: int | None = None, inventory: bool | None = None
) -> dict[int, Reading]:
    """Read ``devices`` concurrently (no database writes): ``{device id: Reading}``.

    ``inventory`` None: per device, when it was never identified or its last identification is
    older than ``WEFT_SNMP_INVENTORY_S``. Sensors are read when last read over
    ``WEFT_SNMP_SENSORS_S`` ago (or never), LLDP as :func:`read_device` says.
    """
    now = timezone.now()
    horizon = now - timedelta(seconds=settings.WEFT_SNMP_INVENTORY_S)
    sensors_horizon = now - timedelta(seconds=settings.WEFT_SNMP_SENSORS_S)
    known = known_of(devices)
    # the poll state as stored now (the instances passed may predate the last poll's store)
    state = {
        pk: (read_at, lldp, uptime)
        for pk, read_at, lldp, uptime in Device.objects.filter(pk__in=[d.pk for d in devices]).values_list(
            "pk", "sensors_read_at", "lldp_changed_ticks", "uptime_ticks"
        )
    }
    jobs = []
    for d in devices:
        read_at, lldp_changed, uptime = state.get(d.pk, (None, None, None))
        inv = inventory if inventory is not None else (d.identified_at is None or d.identified_at < horizon)
        try:
            target, error = d.target(), ""
        except crypto.CredentialError as exc:
            target, error = None, str(exc)
        sensors = read_at is None or read_at <= sensors_horizon
        jobs.append((d.pk, target, error, inv, d.budget_s, known[d.pk], sensors, lldp_changed, uptime))
    return asyncio.run(_read_all(jobs, concurrency or settings.WEFT_SNMP_CONCURRENCY))


def poll_devices(
    devices: list[Device], *, concurrency: int | None = None, inventory: bool | None = None
) -> list[dict]:
    """Poll ``devices`` (read all concurrently, then store each; see the module docstring) and
    apply the events and condition rules of their fabrics. Returns one summary per device:
    ``{"device", "status", "interfaces", "sensors", "neighbours", "requests", "duration_s",
    "error"}``. Never raises for a device's trouble (it is stored on the device)."""
    from .. import maplayer

    readings = collect(devices, concurrency=concurrency, inventory=inventory)
    drawn = maplayer.layer_states(maplayer.fabric_ids(devices))  # the maps' Ethernet layers before
    out = []
    fabrics: dict[int, list[int]] = {}
    sensors_read: dict[int, list[int]] = {}
    for d in devices:
        reading = readings[d.pk]
        try:
            stored = store(d, reading)
        except Device.DoesNotExist:  # deleted while it was read
            continue
        except Exception as exc:  # one device's bad data must not lose the others' polls
            log.exception("storing the SNMP poll of %s failed (rolled back)", d.name)
            out.append({"device": d.name, "status": "failed", "interfaces": 0, "sensors": 0, "neighbours": 0,
                        "requests": reading.requests, "duration_s": round(reading.duration_s, 4),
                        "error": f"store failed: {type(exc).__name__}"})  # fmt: skip
            continue
        fabrics.setdefault(d.fabric_id, []).append(d.pk)
        if reading.sensors_read:
            sensors_read.setdefault(d.fabric_id, []).append(d.pk)
        out.append(stored)
    from ..heatmap import publish

    for fabric_id, ids in fabrics.items():
        evaluate(fabric_id, ids, sensors_read.get(fabric_id, []))
        transaction.on_commit(lambda f=fabric_id: publish(f))  # the heatmap's Ethernet rows, live
    maplayer.announce(maplayer.changed_since(drawn))  # new or gone LLDP systems and links, live
    return out


def _status_for(kind: str) -> str:
    return {
        "ok": PollStatus.OK,
        "timeout": PollStatus.UNREACHABLE,
        "auth": PollStatus.AUTH_FAILED,
    }.get(kind, PollStatus.FAILED)


def store(device: Device, reading: Reading) -> dict:
    """Store one device's :class:`Reading` in one transaction (events inside it). Returns the
    device's summary (see :func:`poll_devices`).

    Raises:
        Device.DoesNotExist: the device was deleted meanwhile.
    """
    now = timezone.now()
    with transaction.atomic():
        dev = Device.objects.select_for_update().get(pk=device.pk)
        specs: list[EventSpec] = []
        was = dev.status
        status = _status_for(reading.kind)
        dev.status, dev.last_poll_at, dev.last_poll_s = status, now, round(reading.duration_s, 4)
        dev.requests = reading.requests
        counts = {"interfaces": 0, "sensors": 0, "neighbours": 0}
        if status != PollStatus.OK:
            dev.last_error = reading.error[:2000]
            if dev.unreachable_since is None:
                dev.unreachable_since = now
            if was != status:
                code = "device.auth_failed" if status == PollStatus.AUTH_FAILED else "device.unreachable"
                specs.append(_device_spec(dev, code, f"{dev.name}: {reading.error}"))
        else:
            first = dev.last_ok_at is None
            if was in (PollStatus.UNREACHABLE, PollStatus.AUTH_FAILED, PollStatus.FAILED):
                specs.append(_device_spec(dev, "device.reachable", f"{dev.name} answers SNMP again"))
            dev.last_error, dev.unreachable_since, dev.last_ok_at = "", None, now
            uptime = reading.system.get(mibs.SYS_UPTIME)
            restarted = isinstance(uptime, int) and dev.uptime_ticks is not None and uptime < dev.uptime_ticks
            dev.uptime_ticks = uptime if isinstance(uptime, int) else None
            if reading.identity is not None:
                specs += _identify(dev, reading.identity, now)
            if reading.unknown_interfaces:
                dev.identified_at = None  # a new interface: read names and speeds at the next poll
            specs += _store_interfaces(dev, reading, restarted=restarted, first=first)
            if reading.sensors_read:
                _store_sensors(dev, reading.sensors, now)
                dev.sensors_read_at = now
            history.record(dev, reading.t)  # the rates just stored and the last sensor readings
            if reading.neighbours is not None:
                specs += _store_neighbours(dev, reading.neighbours, now, first=first)
            elif not reading.lldp_walked:  # the remote table did not change: the same neighbours
                Neighbour.objects.filter(device=dev).update(last_seen=now)
            # the change time the neighbours stored are of (None: walk again next poll)
            dev.lldp_changed_ticks = reading.lldp_changed
            counts = {
                "interfaces": len(reading.interfaces),
                "sensors": len(reading.sensors),
                "neighbours": len(reading.neighbours or []),
            }
        dev.save()
        if specs:
            record_events(dev.fabric, specs)
    return {
        "device": dev.name,
        "status": str(dev.status),
        **counts,
        "requests": reading.requests,
        "duration_s": round(reading.duration_s, 4),
        "error": dev.last_error,
    }


def update_rows(model, rows: list, fields: list[str]) -> None:
    """``UPDATE`` ``fields`` of ``rows`` by primary key with one prepared statement run for every
    row (``executemany``): Django's ``bulk_update`` builds a CASE per field and row, ~50× slower
    for a poll's few thousand interfaces and sensors. Values go through each field's
    ``get_db_prep_save`` (JSON, datetimes), as ``save()`` would."""
    if not rows:
        return
    from django.db import connection

    meta = model._meta
    cols = [meta.get_field(f) for f in fields]
    sql = (
        f"UPDATE {connection.ops.quote_name(meta.db_table)} SET "
        + ", ".join(f"{connection.ops.quote_name(c.column)} = %s" for c in cols)
        + f" WHERE {connection.ops.quote_name(meta.pk.column)} = %s"
    )
    params = [[c.get_db_prep_save(getattr(r, c.attname), connection) for c in cols] + [r.pk] for r in rows]
    with connection.cursor() as cur:
        cur.executemany(sql, params)


def _device_spec(dev: Device, code: str, message: str, **details) -> EventSpec:
    return EventSpec(
        code, message, object_type="device", object_key=dev.name, object_repr=dev.name, details=details
    )


def interface_spec(dev: Device, iface_name: str, up: bool, why: str) -> EventSpec:
    """``device.interface_up``/``device.interface_down`` of one interface (poll and traps)."""
    code = "device.interface_up" if up else "device.interface_down"
    what = "up" if up else "down"
    key = interface_key(dev.name, iface_name)
    return EventSpec(code, f"{dev.name} {iface_name} {what} ({why})", object_type="interface", object_key=key,
                     object_repr=f"{dev.name} {iface_name}")  # fmt: skip


def _identify(dev: Device, ident: parsers.Identity, now) -> list[EventSpec]:
    before = (dev.sys_object_id, dev.model, dev.serial)
    dev.sys_descr, dev.sys_object_id, dev.sys_name = ident.sys_descr, ident.sys_object_id, ident.sys_name
    dev.vendor, dev.model, dev.serial = ident.vendor, ident.model, ident.serial
    dev.identified_at = now
    dev.engine_id = ident.engine_id
    if ident.sys_name:
        dev.node = (
            Node.objects.filter(node_type=NodeType.SWITCH, name__iexact=ident.sys_name).order_by("pk").first()
        )
    if before == (ident.sys_object_id, ident.model, ident.serial):
        return []
    what = " ".join(x for x in (ident.vendor, ident.model, ident.serial and f"serial {ident.serial}") if x)
    return [_device_spec(dev, "device.identified", f"{dev.name} is {what or ident.sys_object_id} ({ident.sys_name})",
                         sys_object_id=ident.sys_object_id, model=ident.model, serial=ident.serial)]  # fmt: skip


def _store_interfaces(dev: Device, reading: Reading, *, restarted: bool, first: bool) -> list[EventSpec]:
    specs: list[EventSpec] = []
    rows = {i.if_index: i for i in Interface.objects.filter(device=dev)}
    at = datetime.fromtimestamp(reading.t, UTC)
    new, changed = [], []
    seen = set()
    for rec in reading.interfaces:
        seen.add(rec.if_index)
        row = rows.get(rec.if_index)
        curr = semantics.Sample(rec.counters, rec.hc, reading.t)
        prev = None
        if row is not None and row.sampled_at is not None and row.counters:
            prev = semantics.Sample(
                {k: row.counters.get(k) for k in rec.counters}, row.hc, row.sampled_at.timestamp()
            )
        disc = restarted or (
            row is not None and rec.discontinuity is not None and row.discontinuity is not None
            and rec.discontinuity != row.discontinuity
        )  # fmt: skip
        d = semantics.derive_wrapping(
            prev, curr, rec.speed_mbps / 1000.0 if rec.speed_mbps else None, discontinuity=disc
        )
        if row is None:
            row = Interface(device=dev, if_index=rec.if_index)
            new.append(row)
            if first and is_down(rec.admin_status, rec.oper_status):
                # the baseline's one exception: a port meant to be up that is down is an alarm
                # now, once (later polls see down → down, no change, no second event)
                specs.append(
                    interface_spec(dev, rec.name, False, f"oper status {rec.oper_status} at first poll")
                )
        else:
            changed.append(row)
            if (
                not first
                and rec.admin_status == "up"
                and row.oper_status
                and rec.oper_status != row.oper_status
            ):
                if row.oper_status == "up" and rec.oper_status != "up":
                    specs.append(interface_spec(dev, rec.name, False, f"oper status {rec.oper_status}"))
                elif rec.oper_status == "up":
                    specs.append(interface_spec(dev, rec.name, True, "oper status up"))
            elif (
                not first
                and rec.admin_status == "down"
                and row.admin_status == "up"
                and row.oper_status != "up"
            ):
                specs.append(interface_spec(dev, rec.name, True, "shut down (admin down)"))
            if rec.oper_status != row.oper_status:
                row.last_change = at
        row.interval_s = curr.t - prev.t if prev is not None else None
        row.name, row.descr, row.alias, row.if_type = (
            rec.name[:128],
            rec.descr[:255],
            rec.alias[:255],
            rec.if_type,
        )
        row.speed_mbps, row.admin_status, row.oper_status = rec.speed_mbps, rec.admin_status, rec.oper_status
        row.hc, row.counters, row.discontinuity, row.sampled_at = rec.hc, rec.counters, rec.discontinuity, at
        row.out_bytes_per_s, row.in_bytes_per_s = d.xmit_bytes_per_s, d.rcv_bytes_per_s
        row.out_pkts_per_s, row.in_pkts_per_s = d.xmit_pkts_per_s, d.rcv_pkts_per_s
        row.utilisation, row.congestion, row.error_deltas = d.utilisation, d.congestion, d.error_deltas
        row.wrapped, row.reset, row.rate_reason, row.present = d.wrapped, d.reset, d.reason[:120], True
    gone = [r for k, r in rows.items() if k not in seen and r.present]
    for r in gone:
        r.present = False
    Interface.objects.bulk_create(new, batch_size=500)
    fields = [
        "interval_s", "name", "descr", "alias", "if_type", "speed_mbps", "admin_status", "oper_status",
        "last_change", "hc", "counters", "discontinuity", "sampled_at", "out_bytes_per_s", "in_bytes_per_s",
        "out_pkts_per_s", "in_pkts_per_s", "utilisation", "congestion", "error_deltas", "wrapped", "reset",
        "rate_reason", "present",
    ]  # fmt: skip
    update_rows(Interface, changed + gone, fields)
    return specs


def _store_sensors(dev: Device, records: list[parsers.SensorRecord], now) -> None:
    rows = {s.index: s for s in Sensor.objects.filter(device=dev)}
    new, changed = [], []
    for rec in records:
        row = rows.get(rec.index)
        if row is None:
            row = Sensor(device=dev, index=rec.index)
            new.append(row)
        else:
            changed.append(row)
        named = not rec.name.startswith("sensor ") or row.name == ""
        if named:  # a poll without the entity tables keeps the name and component it had
            row.name, row.component = rec.name[:255], rec.component
        if row.kind == "" or named:
            row.kind, row.unit = rec.kind, rec.unit
        row.sensor_type, row.scale, row.precision = rec.sensor_type, rec.scale, rec.precision
        row.raw, row.value, row.status, row.updated = rec.raw, rec.value, rec.status, now
    Sensor.objects.bulk_create(new, batch_size=500)
    update_rows(
        Sensor,
        changed,
        [
            "name",
            "component",
            "kind",
            "unit",
            "sensor_type",
            "scale",
            "precision",
            "raw",
            "value",
            "status",
            "updated",
        ],
    )
    seen = {r.index for r in records}
    Sensor.objects.filter(device=dev).exclude(index__in=seen).delete()


def _store_neighbours(
    dev: Device, records: list[parsers.NeighbourRecord], now, *, first: bool
) -> list[EventSpec]:
    specs: list[EventSpec] = []
    rows = {(n.local_port, n.chassis_id, n.port_id): n for n in Neighbour.objects.filter(device=dev)}
    ifaces = {i.if_index: i for i in Interface.objects.filter(device=dev)}
    remotes = {
        d.sys_name.lower(): d
        for d in Device.objects.filter(sys_name__in=[r.sys_name for r in records if r.sys_name])
    }
    remote_ifaces = {}
    if remotes:
        for i in Interface.objects.filter(device__in=remotes.values()):
            remote_ifaces.setdefault((i.device_id, i.name), i)
            remote_ifaces.setdefault((i.device_id, i.descr), i)
    seen = set()
    for rec in records:
        key = (rec.local_port[:128], rec.chassis_id[:128], rec.port_id[:128])
        if key in seen:  # the same neighbour listed twice (two remIndex rows): one link
            continue
        seen.add(key)
        remote = remotes.get(rec.sys_name.lower()) if rec.sys_name else None
        r_iface = None
        if remote is not None:
            r_iface = remote_ifaces.get((remote.pk, rec.port_id)) or remote_ifaces.get(
                (remote.pk, rec.port_descr)
            )
        row = rows.get(key)
        if row is None:
            row = Neighbour(device=dev, local_port=key[0], chassis_id=key[1], port_id=key[2])
            if not first:
                specs.append(
                    _link_spec(dev, rec.local_port, rec.sys_name or rec.chassis_id, rec.port_id, up=True)
                )
        row.interface = ifaces.get(rec.if_index) if rec.if_index is not None else None
        row.port_descr, row.sys_name = rec.port_descr[:255], rec.sys_name[:255]
        row.remote, row.remote_interface, row.last_seen = remote, r_iface, now
        row.save()
    for key, row in rows.items():
        if key not in seen:
            specs.append(
                _link_spec(dev, row.local_port, row.sys_name or row.chassis_id, row.port_id, up=False)
            )
            row.delete()
    return specs


def _link_spec(dev: Device, local: str, remote: str, remote_port: str, *, up: bool) -> EventSpec:
    key = link_key(dev.name, local, remote, remote_port)
    code = "device.link_up" if up else "device.link_down"
    verb = "now sees" if up else "no longer sees"
    return EventSpec(code, f"{dev.name} {local} {verb} {remote} {remote_port} (LLDP)", object_type="link",
                     object_key=key, object_repr=f"{dev.name} {local} ↔ {remote} {remote_port}",
                     details={"device": dev.name, "local_port": local, "remote": remote,
                              "remote_port": remote_port})  # fmt: skip

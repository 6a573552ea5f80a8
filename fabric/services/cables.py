"""Cables and transceivers: the one writer of ``fabric.CableInfo`` and of the ``cable.*`` events.

A reading (``fabric.parsers.cablerecord.CableReading``) of the module in a port comes from

* ``ibdiagnet --get_cable_info -o <dir>`` run once for a fabric whose ``cable_info_tool`` is
  ``"ibdiagnet"`` (its ``ibdiagnet2.db_csv`` ``CABLE_INFO`` rows name the ports by node GUID and
  port number), or ``mlxlink -d lid-<LID> -p <port> -m -c`` per linked switch port of a fabric
  whose tool is ``"mlxlink"`` (:func:`collect`; the programs at ``WEFT_IBDIAGNET`` /
  ``WEFT_MLXLINK`` or on PATH, each run in its own process group with a timeout);
* a saved output (:func:`import_text`, ``manage.py cable_info FABRIC --file``): a db_csv, or one
  mlxlink output whose port is given (``GUID:PORT``) or named by the command line at its top.

:func:`record_readings` stores them in one transaction and compares each with the port's
previous reading:

* the module's temperature at or above its own high alarm threshold (mlxlink's ``Temperature [C]
  [lo..hi]``, ibdiagnet's ``AlarmTemperatureHighThresh``), else ``WEFT_CABLE_TEMP_MAX_C``, or the
  module's ``HighTemperatureAlarm`` flag → ``cable.temperature_high`` (Minor alarm) on
  ``<port key>/cable_temperature``; ``cable.temperature_ok`` clears it;
* a lane's Rx power below the module's low threshold (else ``WEFT_CABLE_RX_POWER_MIN_DBM``), or a
  ``LowRX<n>PowerAlarm`` flag → ``cable.rx_power_low`` on ``<port key>/cable_rx_power``;
  ``cable.rx_power_ok``;
* another serial number than before → ``cable.replaced`` (Info).

A reading without a figure keeps that component's last state (no event). The last
``WEFT_CABLE_INFO_KEEP`` readings per port are kept.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import Count, OuterRef, Q, Subquery
from django.utils import timezone

from accounts import audit
from events.services import EventSpec, record_events

from ..choices import NodeType
from ..collectors.tools import ToolError, fabric_env, find_tool, run_tool, runnable
from ..guid import is_guid, normalize_guid
from ..keys import port_key
from ..models import CableInfo, Fabric, Node, Port
from ..parsers.cablerecord import CableReading
from ..parsers.db_csv import DbCsvParseError, parse_cable_info
from ..parsers.mlxlink import MlxlinkParseError, parse_mlxlink

log = logging.getLogger(__name__)

#: seconds one ``mlxlink`` run may take (a few PHY registers over in-band MADs)
MLXLINK_TIMEOUT_S = 60.0
#: switch ports read at once by :func:`collect` with mlxlink
PARALLEL = 4
#: the db_csv ibdiagnet writes in its output directory
DB_CSV_NAME = "ibdiagnet2.db_csv"
_PROGRAMS = {
    "ibdiagnet": ("WEFT_IBDIAGNET", "ibutils2 / the ibdiagnet package"),
    "mlxlink": ("WEFT_MLXLINK", "NVIDIA MFT"),
}


class CableInfoError(ValueError):
    """A reading that cannot be stored: ``str()`` names the file or port and why."""


@dataclass(frozen=True)
class Condition:
    """A component's state in one reading: ``failed`` and the words that say why."""

    failed: bool
    why: str


def _fmt(v: float) -> str:
    return f"{v:g}"


def conditions(data: dict, temp_max_c: float, rx_min_dbm: float) -> dict[str, Condition]:
    """The components a reading (``CableReading.as_dict()``) gives a state for:
    ``{"temperature", "rx_power": Condition}`` (absent when the reading has nothing on it: a
    passive copper cable has neither). Pure; the rules are the module docstring's."""
    out: dict[str, Condition] = {}
    alarms = set(data.get("alarms") or [])
    temp = data.get("temperature_c")
    if temp is not None:
        limit = data.get("temperature_high_c")
        limit = temp_max_c if limit is None else limit
        why = f"{_fmt(temp)} °C (limit {_fmt(limit)} °C)"
        flagged = "HighTemperatureAlarm" in alarms
        out["temperature"] = Condition(
            temp >= limit or flagged, why + ("; the module flags HighTemperatureAlarm" if flagged else "")
        )
    elif "HighTemperatureAlarm" in alarms:
        out["temperature"] = Condition(True, "the module flags HighTemperatureAlarm")
    lanes = data.get("rx_power_dbm") or []
    flagged = sorted(a for a in alarms if a.startswith("LowRX") and a.endswith("PowerAlarm"))
    if lanes or flagged:
        limit = data.get("rx_power_low_dbm")
        limit = rx_min_dbm if limit is None else limit
        low = [f"lane {i} at {_fmt(v)} dBm" for i, v in enumerate(lanes) if v < limit]
        why = ", ".join(low + [f"the module flags {a}" for a in flagged])
        out["rx_power"] = Condition(bool(why), f"{why} (limit {_fmt(limit)} dBm)" if why else "OK")
    return out


_CODES = {  # component -> (failed code, ok code, what)
    "temperature": ("cable.temperature_high", "cable.temperature_ok", "transceiver temperature"),
    "rx_power": ("cable.rx_power_low", "cable.rx_power_ok", "transceiver Rx power"),
}


def _limits() -> tuple[float, float]:
    return float(settings.WEFT_CABLE_TEMP_MAX_C), float(settings.WEFT_CABLE_RX_POWER_MIN_DBM)


def _chunks(items: list, size: int = 2000):
    for i in range(0, len(items), size):
        yield items[i : i + size]


def latest_by_port(port_ids: list[int]) -> dict[int, CableInfo]:
    """``{port id: its latest CableInfo}`` for the ports that have one."""
    newest = CableInfo.objects.filter(port=OuterRef("pk")).order_by("-taken", "-pk").values("pk")[:1]
    out: dict[int, CableInfo] = {}
    for chunk in _chunks(sorted(set(port_ids))):
        pks = list(Port.objects.filter(pk__in=chunk).annotate(c=Subquery(newest)).values_list("c", flat=True))
        for row in CableInfo.objects.filter(pk__in=[p for p in pks if p]):
            out[row.port_id] = row
    return out


def record_readings(
    fabric: Fabric,
    readings: list[tuple[Port, CableReading]],
    *,
    source: str,
    user=None,
    note: str = "",
) -> dict:
    """Store each ``(port, reading)`` as the port's latest and write the ``cable.*`` events of what
    changed since its previous reading (module docstring), all in one transaction; an import
    (``source="file"``) is audited once (``cable_info.import`` on the fabric, ``note`` names the
    file). Readings beyond ``WEFT_CABLE_INFO_KEEP`` per port are deleted. Returns
    ``{"stored": n, "events": n}``.

    Raises:
        CableInfoError: a port is not a port of ``fabric``.
    """
    foreign = [p for p, _ in readings if p.node.fabric_id != fabric.pk]
    if foreign:
        raise CableInfoError(f"{foreign[0]} is not a port of fabric {fabric.name}")
    temp_max, rx_min = _limits()
    now = timezone.now()
    with transaction.atomic():
        before = latest_by_port([p.pk for p, _ in readings])
        rows = [CableInfo(port=p, taken=now, source=source, data=r.as_dict()) for p, r in readings]
        CableInfo.objects.bulk_create(rows, batch_size=1000)
        specs: list[EventSpec] = []
        for port, reading in readings:
            prev = before.get(port.pk)
            data = reading.as_dict()
            specs += _changes(port, prev.data if prev else None, data, temp_max, rx_min, source)
        if specs:
            record_events(fabric, specs)
        if source == "file":
            audit.record("cable_info.import", fabric, {"file": note[:200], "ports": len(rows), "events": len(specs)},
                         user=user)  # fmt: skip
        _prune([p.pk for p, _ in readings])
    return {"stored": len(rows), "events": len(specs)}


def _changes(
    port: Port, prev: dict | None, data: dict, temp_max: float, rx_min: float, source: str
) -> list[EventSpec]:
    key = port_key(port.node.node_guid, port.port_num)
    before = conditions(prev, temp_max, rx_min) if prev else {}
    specs = []
    for comp, now in conditions(data, temp_max, rx_min).items():
        was = before.get(comp)
        if now.failed == (was.failed if was else False):
            continue  # unchanged (a first reading that is OK says nothing)
        failed_code, ok_code, what = _CODES[comp]
        specs.append(
            EventSpec(
                code=failed_code if now.failed else ok_code,
                message=f"port {port}: {what} {'out of range' if now.failed else 'OK again'}: {now.why}",
                object_type="port",
                object_key=f"{key}/cable_{comp}",
                object_repr=f"{port} {what}",
                node_id=port.node_id,
                port_id=port.pk,
                details={
                    "component": comp,
                    "why": now.why,
                    "source": source,
                    "serial_number": data.get("serial_number"),
                },  # fmt: skip
            )
        )
    old_sn, new_sn = (prev or {}).get("serial_number"), data.get("serial_number")
    if old_sn and new_sn and old_sn != new_sn:
        specs.append(
            EventSpec(
                code="cable.replaced",
                message=f"port {port}: module {old_sn} replaced by {new_sn} ({data.get('part_number') or 'part unknown'})",
                object_type="port",
                object_key=f"{key}/cable",
                object_repr=f"{port} cable",
                node_id=port.node_id,
                port_id=port.pk,
                details={"old_serial_number": old_sn, "serial_number": new_sn, "source": source},
            )
        )
    return specs


def _prune(port_ids: list[int]) -> None:
    keep = settings.WEFT_CABLE_INFO_KEEP
    for chunk in _chunks(port_ids):
        over = (
            CableInfo.objects.filter(port_id__in=chunk)
            .values("port_id")
            .annotate(n=Count("id"))
            .filter(n__gt=keep)
            .values_list("port_id", flat=True)
        )
        for pid in over:
            old = list(
                CableInfo.objects.filter(port_id=pid)
                .order_by("-taken", "-pk")
                .values_list("pk", flat=True)[keep:]
            )
            CableInfo.objects.filter(pk__in=old).delete()


def _ports_by_key(fabric: Fabric, keys: set[tuple[str, int]]) -> dict[tuple[str, int], Port]:
    guids = {g for g, _ in keys}
    out: dict[tuple[str, int], Port] = {}
    for chunk in _chunks(sorted(guids), 500):
        for port in Port.objects.filter(node__fabric=fabric, node__node_guid__in=chunk).select_related(
            "node"
        ):
            k = (port.node.node_guid, port.port_num)
            if k in keys:
                out[k] = port
    return out


def sniff_format(text: str) -> str:
    """``"db_csv"`` when a line of ``text`` starts a section (``START_``), else ``"mlxlink"``."""
    for line in text.splitlines():
        if line.strip().startswith("START_"):
            return "db_csv"
    return "mlxlink"


def _match(fabric: Fabric, readings: list[CableReading]) -> tuple[list[tuple[Port, CableReading]], list[str]]:
    """Pair db_csv readings with the fabric's ports; the others are named in the second list."""
    ports = _ports_by_key(fabric, {(r.node_guid, r.port_num) for r in readings})
    pairs, unmatched = [], []
    for r in readings:
        port = ports.get((r.node_guid, r.port_num))
        if port is None:
            unmatched.append(
                f"port {port_key(r.node_guid, r.port_num)} is not a port of fabric {fabric.name} (skipped)"
            )
        else:
            pairs.append((port, r))
    return pairs, unmatched


def _port_from_arg(fabric: Fabric, spec: str, source_name: str) -> Port:
    guid, _, num = spec.partition(":")
    if not is_guid(guid.strip()) or not num.strip().isdigit():
        raise CableInfoError(f"{source_name}: --port {spec!r}: give GUID:PORT, e.g. 0x7cfe900300aa0000:13")
    guid = normalize_guid(guid.strip())
    port = (
        Port.objects.filter(node__fabric=fabric, node__node_guid=guid, port_num=int(num))
        .select_related("node")
        .first()
    )
    if port is None:
        raise CableInfoError(
            f"{source_name}: port {port_key(guid, int(num))} is not a port of fabric {fabric.name}"
        )
    return port


def _port_from_device(fabric: Fabric, device: str, num: int | None, source_name: str) -> Port:
    """The port an ``mlxlink -d lid-<LID> [-p N]`` command line names: a switch's port N, or the
    CA port whose LID it is."""
    text = device.lower().removeprefix("lid-")
    try:
        lid = int(text, 0)
    except ValueError:
        raise CableInfoError(
            f"{source_name}: its command line names device {device!r}, not lid-<LID>: give --port GUID:PORT"
        ) from None
    switch = Node.objects.filter(fabric=fabric, node_type=NodeType.SWITCH, lid=lid).first()
    if switch is not None:
        if num is None:
            raise CableInfoError(
                f"{source_name}: lid {lid} is switch {switch}: its command line gives no -p PORT"
            )
        port = Port.objects.filter(node=switch, port_num=num).select_related("node").first()
    else:  # a CA port's own LID (and -p, when given, must be that port's number)
        ports = Port.objects.filter(node__fabric=fabric, lid=lid)
        port = (ports.filter(port_num=num) if num is not None else ports).select_related("node").first()
    if port is None:
        raise CableInfoError(
            f"{source_name}: no port of fabric {fabric.name} at lid {lid}" + (f" port {num}" if num else "")
        )
    return port


def import_text(
    fabric: Fabric, text: str, *, source_name: str, fmt: str = "", port: str = "", user=None
) -> dict:
    """Import one saved output for ``fabric``: an ibdiagnet ``db_csv`` (its CABLE_INFO rows, the
    ports by node GUID and port number) or one ``mlxlink -m [-c]`` output, its port given as
    ``port`` (``"GUID:PORT"``) or named by the command line at its top (``-d lid-<LID> -p N``).
    ``fmt`` is ``"db_csv"``, ``"mlxlink"`` or "" (guessed: :func:`sniff_format`).

    Returns ``{"file", "format", "stored", "events", "unmatched": [why], "problems": [where: why]}``.

    Raises:
        CableInfoError: not that format, no port to go by, or no row names a port of ``fabric``
            (the message names ``source_name``).
    """
    fmt = fmt or sniff_format(text)
    if fmt == "db_csv":
        try:
            info = parse_cable_info(text, source=source_name)
        except DbCsvParseError as exc:
            raise CableInfoError(str(exc)) from None
        pairs, unmatched = _match(fabric, info.readings)
        problems = info.problems + [p for r in info.readings for p in r.problems]
        if not pairs:
            raise CableInfoError(
                f"{source_name}: none of its {len(info.readings)} CABLE_INFO rows is a port of fabric {fabric.name}"
                + (f" (e.g. {unmatched[0]})" if unmatched else "")
            )
    elif fmt == "mlxlink":
        try:
            out = parse_mlxlink(text, source=source_name)
        except MlxlinkParseError as exc:
            raise CableInfoError(str(exc)) from None
        if port:
            target = _port_from_arg(fabric, port, source_name)
        elif out.device:
            target = _port_from_device(fabric, out.device, out.port, source_name)
        else:
            raise CableInfoError(
                f"{source_name}: mlxlink output does not name its port: give --port GUID:PORT "
                "(or keep the 'mlxlink -d lid-<LID> -p <port>' command line at its top)"
            )
        pairs, unmatched, problems = [(target, out.reading)], [], list(out.reading.problems)
    else:
        raise CableInfoError(f"{source_name}: unknown format {fmt!r}: db_csv or mlxlink")
    stored = record_readings(fabric, pairs, source="file", user=user, note=source_name)
    return {"file": source_name, "format": fmt, **stored, "unmatched": unmatched, "problems": problems}


def program(fabric: Fabric) -> str | None:
    """Path of the program ``fabric``'s ``cable_info_tool`` names (its ``WEFT_*`` setting, else
    PATH and the sbin directories), None when it is not installed (the setting names no
    executable file) or no tool is set."""
    tool = fabric.cable_info_tool
    if tool not in _PROGRAMS:
        return None
    configured = getattr(settings, _PROGRAMS[tool][0])
    if configured:
        return configured if runnable(configured) else None
    return find_tool(tool, fabric_env(fabric))


def not_collected_reason(fabric: Fabric) -> str:
    """Why ``fabric``'s cables are not read, or "" when they are (what the port page says)."""
    tool = fabric.cable_info_tool
    if tool not in _PROGRAMS:
        return ("set the fabric's cable info tool (ibdiagnet or mlxlink) or import a saved output "
                "with manage.py cable_info --file")  # fmt: skip
    if program(fabric) is None:
        name, package = _PROGRAMS[tool]
        return f"{tool} is not installed here (set {name} or put it on PATH; it comes with {package})"
    return ""


def _collect_ibdiagnet(fabric: Fabric, path: str) -> tuple[list[tuple[Port, CableReading]], dict]:
    out_dir = tempfile.mkdtemp(prefix="weft-ibdiagnet-")
    try:
        argv = [path, "--get_cable_info", "-o", out_dir]
        if fabric.ca_name:
            argv += ["-i", fabric.ca_name]
        if fabric.ca_port:
            argv += ["-p", str(fabric.ca_port)]
        res = run_tool(argv, env=fabric_env(fabric), timeout=float(settings.WEFT_IBDIAGNET_TIMEOUT_S))
        db = Path(out_dir) / DB_CSV_NAME
        if not db.exists():  # ibdiagnet exits non-zero when it finds fabric errors: the file decides
            raise CableInfoError(f"ibdiagnet wrote no {DB_CSV_NAME} (exit {res.returncode}: "
                                 f"{(res.stderr or res.stdout).strip()[-200:]})")  # fmt: skip
        try:
            info = parse_cable_info(db.read_text(encoding="utf-8", errors="replace"), source=DB_CSV_NAME)
        except DbCsvParseError as exc:
            raise CableInfoError(str(exc)) from None
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    pairs, unmatched = _match(fabric, info.readings)
    return pairs, {"rows": len(info.readings), "unmatched": len(unmatched), "problems": len(info.problems)}


def _collect_mlxlink(fabric: Fabric, path: str) -> tuple[list[tuple[Port, CableReading]], dict]:
    ports = list(
        Port.objects.filter(
            node__fabric=fabric, node__node_type=NodeType.SWITCH, node__lid__isnull=False, port_num__gt=0
        )  # fmt: skip
        .filter(Q(link_as_a__isnull=False) | Q(link_as_b__isnull=False))
        .select_related("node")
        .order_by("node__lid", "port_num")
    )
    env = fabric_env(fabric)

    def read(port: Port) -> tuple[Port, CableReading | None, str]:
        argv = [path, "-d", f"lid-{port.node.lid}", "-p", str(port.port_num), "-m", "-c"]
        try:
            res = run_tool(argv, env=env, timeout=MLXLINK_TIMEOUT_S)
        except ToolError as exc:
            return port, None, str(exc)
        if res.returncode != 0:
            return port, None, f"exit {res.returncode}: {(res.stderr or res.stdout).strip()[-200:]}"
        try:
            return (
                port,
                parse_mlxlink(res.stdout, source=f"mlxlink lid-{port.node.lid} -p {port.port_num}").reading,
                "",
            )
        except MlxlinkParseError as exc:
            return port, None, str(exc)

    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        results = list(pool.map(read, ports))
    failed = {str(p): why for p, r, why in results if r is None}
    if failed:
        log.warning(
            "fabric %s: cables of %d ports not read, e.g. %s",
            fabric.name,
            len(failed),
            next(iter(failed.items())),
        )
    return [(p, r) for p, r, _ in results if r is not None], {"ports": len(ports), "failed": failed}


def collect(fabric: Fabric) -> dict:
    """Read ``fabric``'s cables with its ``cable_info_tool`` now and store the readings
    (:func:`record_readings`, one transaction). Returns the tool's summary with ``stored`` and
    ``events``, ``{"skipped": why}`` (:func:`not_collected_reason`) or ``{"failed": why}`` when
    the one ibdiagnet run gave nothing. A failing mlxlink run is one port's (in ``failed``)."""
    why = not_collected_reason(fabric)
    if why:
        return {"skipped": why}
    path = program(fabric)
    try:
        if fabric.cable_info_tool == "ibdiagnet":
            pairs, summary = _collect_ibdiagnet(fabric, path)
        else:
            pairs, summary = _collect_mlxlink(fabric, path)
    except (ToolError, CableInfoError) as exc:
        log.warning("fabric %s: cable info not read: %s", fabric.name, exc)
        return {"tool": fabric.cable_info_tool, "failed": str(exc)}
    stored = (
        record_readings(fabric, pairs, source=fabric.cable_info_tool) if pairs else {"stored": 0, "events": 0}
    )
    return {"tool": fabric.cable_info_tool, **summary, **stored}


def latest(port: Port) -> CableInfo | None:
    """``port``'s latest reading, or None."""
    return CableInfo.objects.filter(port=port).order_by("-taken", "-pk").first()


def page_context(port: Port) -> dict:
    """What the port page shows: ``cable`` (the latest reading or None), ``cable_missing``
    (:func:`not_collected_reason`), ``cable_conditions`` (:func:`conditions`), ``cable_temp_limit``
    (°C) and ``cable_rx_limit`` (dBm) the alarms compare with."""
    row = latest(port)
    data = row.data if row else {}
    temp_max, rx_min = _limits()
    t_hi, rx_lo = data.get("temperature_high_c"), data.get("rx_power_low_dbm")
    return {
        "cable": row,
        "cable_missing": not_collected_reason(port.node.fabric),
        "cable_conditions": conditions(data, temp_max, rx_min) if row else {},
        "cable_temp_limit": _fmt(temp_max if t_hi is None else t_hi),
        "cable_rx_limit": _fmt(rx_min if rx_lo is None else rx_lo),
    }

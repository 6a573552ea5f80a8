"""Switch health: the one writer of ``fabric.SwitchHealth`` and of the ``switch.*`` health events.

A reading (``fabric.parsers.ibswinfo.SwitchInfo``) comes from ``ibswinfo.sh -d lid-<LID>`` run
per switch (:func:`collect`; a fabric whose ``switch_info_tool`` is ``"ibswinfo"``, the script at
``WEFT_IBSWINFO``) or from a saved output (:func:`import_text`, ``manage.py switch_health
--file``). :func:`record_reading` stores it and compares it with the switch's previous reading:

* a PSU whose status, DC power or fan is not OK → ``switch.psu_failed`` (Critical) on the key
  ``<switch GUID>/psu<n>``, ``switch.psu_ok`` when it is OK again;
* the chassis fan status not OK, or a fan at 0 rpm → ``switch.fan_failed`` (Minor) on
  ``<GUID>/fans``, ``switch.fan_ok``;
* the ASIC temperature at or above the limit → ``switch.temperature_high`` (Critical) on
  ``<GUID>/temperature``, ``switch.temperature_ok``. The limit is the switch's own high warning
  threshold when the script prints it (MTMP ``temperature_threshold_hi``), else
  ``WEFT_SWITCH_TEMP_MAX_C``. ibswinfo's ``max temp`` is not a limit: it is MTMP's
  ``max_temperature``, the highest measured since the switch's last reset (ibswinfo.sh, the
  ``temperatures`` block), shown as "peak since reset".

A component the reading does not give (a field missing or unreadable) keeps its last state: no
event. Only ``WEFT_SWITCH_HEALTH_KEEP`` readings per switch are kept.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts import audit
from events.services import EventSpec, record_events

from ..choices import NodeType
from ..collectors.tools import ToolError, fabric_env, run_tool, runnable
from ..models import Fabric, Node, SwitchHealth
from ..parsers.ibswinfo import IbswinfoParseError, SwitchInfo, is_ok, parse_ibswinfo

log = logging.getLogger(__name__)

#: seconds one ``ibswinfo.sh`` run may take (it reads a dozen registers over MADs)
TOOL_TIMEOUT_S = 60.0
#: switches read at once by :func:`collect` (each run is one process waiting on MADs)
PARALLEL = 4


class SwitchHealthError(ValueError):
    """A reading that cannot be stored: ``str()`` names the file or switch and why."""


@dataclass(frozen=True)
class Condition:
    """A component's state in one reading: ``failed`` and the words that say why."""

    failed: bool
    why: str


def conditions(data: dict, temp_limit_c: int) -> dict[str, Condition]:
    """The components a reading (``SwitchInfo.as_dict()``) gives a state for: ``{"psu<n>",
    "fans", "temperature": Condition}`` (a component absent when the reading has nothing on it).
    Pure."""
    out: dict[str, Condition] = {}
    for psu in data.get("psus") or []:
        parts = {"status": psu.get("status"), "DC power": psu.get("dc_power"), "fan": psu.get("fan_status")}
        if all(v is None for v in parts.values()):
            continue
        bad = [f"{name} {value}" for name, value in parts.items() if value is not None and not is_ok(value)]
        out[f"psu{psu['index']}"] = Condition(bool(bad), ", ".join(bad) or "OK")
    fans, status = data.get("fans") or {}, data.get("fan_status")
    if status is not None or fans:
        stopped = sorted((int(n) for n, rpm in fans.items() if rpm == 0))
        bad = ([f"fan status {status}"] if status is not None and not is_ok(status) else []) + [
            f"fan#{n} at 0 rpm" for n in stopped
        ]
        out["fans"] = Condition(bool(bad), ", ".join(bad) or "OK")
    temp = data.get("temperature_c")
    if temp is not None:
        limit = data.get("warn_high_c") or temp_limit_c
        out["temperature"] = Condition(temp >= limit, f"{temp} °C (limit {limit} °C)")
    return out


_CODES = {  # component kind -> (failed code, ok code, what)
    "psu": ("switch.psu_failed", "switch.psu_ok", "power supply"),
    "fans": ("switch.fan_failed", "switch.fan_ok", "fans"),
    "temperature": ("switch.temperature_high", "switch.temperature_ok", "temperature"),
}


def record_reading(
    fabric: Fabric, node: Node, info: SwitchInfo, *, source: str, user=None, note: str = ""
) -> SwitchHealth:
    """Store ``info`` as ``node``'s latest reading and write the ``switch.*`` events of what
    changed since its previous one (module docstring), in one transaction; an imported reading
    (``source="file"``) is audited (``switch_health.import``, ``note`` names the file). Older
    readings beyond ``WEFT_SWITCH_HEALTH_KEEP`` are deleted.

    Raises:
        SwitchHealthError: ``node`` is not a switch of ``fabric``.
    """
    if node.fabric_id != fabric.pk or node.node_type != NodeType.SWITCH:
        raise SwitchHealthError(f"{node} is not a switch of fabric {fabric.name}")
    data = info.as_dict()
    limit = settings.WEFT_SWITCH_TEMP_MAX_C
    with transaction.atomic():
        prev = SwitchHealth.objects.filter(node=node).order_by("-taken", "-pk").first()
        row = SwitchHealth.objects.create(node=node, taken=timezone.now(), source=source, data=data)
        before = conditions(prev.data, limit) if prev else {}
        specs = []
        for comp, now in conditions(data, limit).items():
            was = before.get(comp)
            if now.failed == (was.failed if was else False):
                continue  # unchanged (a first reading that is OK says nothing)
            failed_code, ok_code, what = _CODES["psu" if comp.startswith("psu") else comp]
            label = f"PSU{comp[3:]}" if comp.startswith("psu") else what
            specs.append(
                EventSpec(
                    code=failed_code if now.failed else ok_code,
                    message=f"switch {node}: {label} {'failed' if now.failed else 'OK again'}: {now.why}",
                    object_type="node",
                    object_key=f"{node.node_guid}/{comp}",
                    object_repr=f"{node} {label}",
                    node_id=node.pk,
                    details={"component": comp, "why": now.why, "source": source},
                )
            )
        if specs:
            record_events(fabric, specs)
        if source == "file":
            audit.record("switch_health.import", node, {"file": note[:200], "events": len(specs)}, user=user)
        keep = settings.WEFT_SWITCH_HEALTH_KEEP
        old = list(
            SwitchHealth.objects.filter(node=node)
            .order_by("-taken", "-pk")
            .values_list("pk", flat=True)[keep:]
        )
        if old:
            SwitchHealth.objects.filter(pk__in=old).delete()
    return row


def import_text(
    fabric: Fabric, text: str, *, source_name: str, switch_guid: str = "", user=None
) -> SwitchHealth:
    """Import one saved ``ibswinfo.sh`` output (default or ``-o vitals`` form) for a switch of
    ``fabric``: the switch is the output's ``GUID`` line, else ``switch_guid`` (the vitals form
    prints none).

    Raises:
        SwitchHealthError: not ibswinfo output, no GUID to go by, or the GUID is not a switch of
            ``fabric`` (the message names ``source_name``).
    """
    try:
        info = parse_ibswinfo(text, source=source_name)
    except IbswinfoParseError as exc:
        raise SwitchHealthError(str(exc)) from None
    guid = info.guid or switch_guid
    if not guid:
        raise SwitchHealthError(
            f"{source_name}: the output has no GUID line: name the switch (--switch GUID)"
        )
    try:
        guid = f"0x{int(guid, 16):016x}"
    except ValueError:
        raise SwitchHealthError(f"{source_name}: {guid!r} is not a GUID") from None
    node = Node.objects.filter(fabric=fabric, node_guid=guid, node_type=NodeType.SWITCH).first()
    if node is None:
        raise SwitchHealthError(f"{source_name}: switch {guid} is not a switch of fabric {fabric.name}")
    return record_reading(fabric, node, info, source="file", user=user, note=source_name)


def not_collected_reason(fabric: Fabric) -> str:
    """Why ``fabric``'s switch health is not collected, or "" when it is (what the switch page
    says beside the last reading)."""
    if fabric.switch_info_tool != "ibswinfo":
        return "the fabric reads no switch health (its switch info tool is none); import a saved output with manage.py switch_health --file"
    if not settings.WEFT_IBSWINFO:
        return "ibswinfo.sh is not installed here (WEFT_IBSWINFO is not set; it needs NVIDIA MFT)"
    if not runnable(settings.WEFT_IBSWINFO):
        return f"WEFT_IBSWINFO names {settings.WEFT_IBSWINFO}, which is not an executable file here"
    return ""


def collect(fabric: Fabric) -> dict:
    """Read every switch of ``fabric`` with ``ibswinfo.sh -d lid-<LID>`` (:data:`PARALLEL` at a
    time, each run in its own process group with :data:`TOOL_TIMEOUT_S`), store each reading
    (:func:`record_reading`). Returns ``{"switches", "read", "failed": {name: why}}`` or
    ``{"skipped": why}`` (:func:`not_collected_reason`). A switch whose run fails is logged and
    counted; it never stops the others."""
    why = not_collected_reason(fabric)
    if why:
        return {"skipped": why}
    switches = list(
        Node.objects.filter(fabric=fabric, node_type=NodeType.SWITCH, lid__isnull=False).order_by("lid")
    )
    env = fabric_env(fabric)

    def read(node: Node) -> tuple[Node, SwitchInfo | None, str]:
        try:
            res = run_tool([settings.WEFT_IBSWINFO, "-d", f"lid-{node.lid}"], env=env, timeout=TOOL_TIMEOUT_S)
        except ToolError as exc:
            return node, None, str(exc)
        if res.returncode != 0:
            return node, None, f"exit {res.returncode}: {(res.stderr or res.stdout).strip()[-200:]}"
        try:
            return node, parse_ibswinfo(res.stdout, source=f"ibswinfo lid-{node.lid}"), ""
        except IbswinfoParseError as exc:
            return node, None, str(exc)

    failed: dict[str, str] = {}
    read_ok = 0
    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        results = list(pool.map(read, switches))
    for node, info, err in results:  # stored from this thread: one database connection
        if info is None:
            failed[str(node)] = err
            continue
        record_reading(fabric, node, info, source="ibswinfo")
        read_ok += 1
    if failed:
        log.warning("fabric %s: switch health of %d switches not read, e.g. %s",
                    fabric.name, len(failed), next(iter(failed.items())))  # fmt: skip
    return {"switches": len(switches), "read": read_ok, "failed": failed}


def latest(node: Node) -> SwitchHealth | None:
    """``node``'s latest reading, or None."""
    return SwitchHealth.objects.filter(node=node).order_by("-taken", "-pk").first()


def page_context(node: Node) -> dict:
    """What the switch page shows: ``health`` (the latest reading or None), ``health_missing``
    (:func:`not_collected_reason`), ``health_conditions`` (:func:`conditions` of the reading),
    ``health_limit`` (°C), ``uptime`` (``"160d 10:38:53"``)."""
    row = latest(node)
    data = row.data if row else {}
    limit = data.get("warn_high_c") or settings.WEFT_SWITCH_TEMP_MAX_C
    up = data.get("uptime_s")
    uptime = (
        f"{up // 86400}d {up % 86400 // 3600:02d}:{up % 3600 // 60:02d}:{up % 60:02d}"
        if up is not None
        else ""
    )
    return {
        "health": row,
        "health_missing": not_collected_reason(node.fabric),
        "health_conditions": conditions(data, settings.WEFT_SWITCH_TEMP_MAX_C) if row else {},
        "health_limit": limit,
        "uptime": uptime,
    }

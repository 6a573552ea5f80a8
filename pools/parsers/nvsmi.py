"""``nvidia-smi -q -x`` (XML) and ``nvidia-smi -q`` (text) → :class:`GpuReport` (pure).

The XML follows NVIDIA's ``nvsmi_device_v*.dtd`` (``nvidia-smi(1)``: "-x, --xml-format"); it is
parsed with defusedxml: the ``<!DOCTYPE … SYSTEM "nvsmi_device_v11.dtd">`` line is read but never
fetched, and a document declaring entities is refused (a located :class:`GpuParseError`). The text
form of ``-q`` (indented ``Label : value`` lines) is turned into the same element tree, labels
lower-cased with ``_`` (``FB Memory Usage`` → ``fb_memory_usage``), so one extractor reads both.

Semantics:

* ``index`` is the position of the ``<gpu>`` element (NVML index: nvidia-smi lists GPUs by
  index, in PCI bus order), not ``minor_number`` (``/dev/nvidiaN``), which can differ (4× K80 on
  Azure: minor numbers 1, 2, 3, 0).
* memory (``fb_memory_usage``, MiB): ``used`` or ``free`` above ``total`` is impossible (a
  wrapped unsigned value, seen from inside shared-GPU containers): the reading is dropped (None)
  and a warning names it; ``total`` stays the capacity.
* ``attached_gpus`` different from the number of ``<gpu>`` elements (a report for ``-i N``) is
  a warning, not an error.
* health: :func:`derive_health`.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import defusedxml.ElementTree as DET
from defusedxml import DefusedXmlException

from .records import GpuParseError, GpuRecord, GpuReport, MigDeviceRecord, mig_mode, normalize_bus_id

_MIB = re.compile(r"^\s*(-?\d+)\s*MiB\s*$", re.IGNORECASE)
_NA = {
    "",
    "n/a",
    "[n/a]",
    "not supported",
    "[not supported]",
    "unknown error",
    "[unknown error]",
    "not found",
}


def parse_nvsmi(text: str | bytes, *, source: str = "", first_line: int = 1) -> GpuReport:
    """Parse ``nvidia-smi -q -x`` XML or ``nvidia-smi -q`` text (detected) into a report.

    Raises:
        GpuParseError: not nvidia-smi ``-q`` output, malformed XML (with its line), a DTD that
            declares entities, a GPU without a UUID, or a value that is not a number where the
            schema has one (with the element path).
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    head = text.lstrip()[:200]
    if head.startswith("<"):
        return parse_nvsmi_xml(text, source=source)
    if "NVSMI LOG" in text[:2000] or re.search(r"^Attached GPUs\s*:", text, re.MULTILINE):
        return parse_nvsmi_text(text, source=source, first_line=first_line)
    raise GpuParseError("not nvidia-smi -q output (neither XML nor an NVSMI LOG)", source=source, line=1)


def parse_nvsmi_xml(text: str, *, source: str = "") -> GpuReport:
    """Parse ``nvidia-smi -q -x`` output (see the module docstring). Raises GpuParseError."""
    try:
        root = DET.fromstring(text, forbid_dtd=False, forbid_entities=True, forbid_external=True)
    except DefusedXmlException as exc:
        raise GpuParseError(f"refused: {exc} (entities and external references are not allowed)",
                            source=source, line=_doctype_line(text)) from None  # fmt: skip
    except ET.ParseError as exc:
        line = exc.position[0] if getattr(exc, "position", None) else 0
        raise GpuParseError(f"malformed XML: {exc}", source=source, line=line) from None
    if root.tag != "nvidia_smi_log":
        raise GpuParseError(f"root element is <{root.tag}>, expected <nvidia_smi_log>", source=source,
                            line=1, element=root.tag)  # fmt: skip
    return _extract(root, source)


def parse_nvsmi_text(text: str, *, source: str = "", first_line: int = 1) -> GpuReport:
    """Parse the text form of ``nvidia-smi -q`` (see the module docstring); ``first_line`` is the
    line of ``text`` in its file (for located errors). Raises GpuParseError."""
    return _extract(_text_tree(text, source, first_line), source)


def _doctype_line(text: str) -> int:
    for n, line in enumerate(text.splitlines(), 1):
        if "<!DOCTYPE" in line or "<!ENTITY" in line:
            return n
    return 0


def _tag(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", label.strip().lower()).strip("_") or "_"


def _text_tree(text: str, source: str, first_line: int = 1) -> ET.Element:
    """Indented ``Label : value`` lines → an element tree (tag = normalised label)."""
    root = ET.Element("nvidia_smi_log")
    stack: list[tuple[int, ET.Element]] = [(-1, root)]
    seen_gpu = False
    for n, raw in enumerate(text.splitlines(), first_line):
        if not raw.strip() or raw.lstrip().startswith("=") or raw.lstrip().startswith("#"):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        line = raw.strip()
        m = re.match(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])$", line)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1] if stack else root
        if m and indent == 0:
            el = ET.SubElement(root, "gpu", id=m.group(1))
            el.set("_line", str(n))
            stack = [(-1, root), (0, el)]
            seen_gpu = True
            continue
        if ":" in line:
            label, _, value = line.partition(":")
            el = ET.SubElement(parent, _tag(label))
            el.text = value.strip()
            el.set("_line", str(n))
            stack.append((indent, el))
        else:
            el = ET.SubElement(parent, _tag(line))
            el.set("_line", str(n))
            stack.append((indent, el))
    if not seen_gpu and root.find("attached_gpus") is None:
        raise GpuParseError(
            "no 'Attached GPUs' and no 'GPU <bus id>' section", source=source, line=first_line
        )
    return root


def _where(path: str, el: ET.Element | None) -> tuple[str, int]:
    line = int(el.get("_line", "0")) if el is not None else 0
    return path, line


def _find(el: ET.Element, *paths: str) -> ET.Element | None:
    for p in paths:
        found = el.find(p)
        if found is not None:
            return found
    return None


def _text(el: ET.Element, *paths: str) -> str:
    found = _find(el, *paths)
    value = (found.text or "").strip() if found is not None else ""
    return "" if value.lower() in _NA else value


def _int(el: ET.Element, path: str, ctx: str, source: str, *alts: str) -> int | None:
    found = _find(el, path, *alts)
    if found is None:
        return None
    value = (found.text or "").strip()
    if value.lower() in _NA:
        return None
    try:
        return int(value, 0) if value.lower().startswith("0x") else int(value)
    except ValueError:
        where, line = _where(f"{ctx}/{path}", found)
        raise GpuParseError(f"{value!r} is not an integer", source=source, line=line, element=where) from None


def _mib(el: ET.Element | None, name: str, ctx: str, source: str) -> int | None:
    if el is None:
        return None
    found = el.find(name)
    if found is None:
        return None
    value = (found.text or "").strip()
    if value.lower() in _NA:
        return None
    m = _MIB.match(value)
    if not m:
        where, line = _where(f"{ctx}/{name}", found)
        raise GpuParseError(f"{value!r} is not a size in MiB", source=source, line=line, element=where)
    return int(m.group(1))


def _extract(root: ET.Element, source: str) -> GpuReport:
    report = GpuReport(source=source)
    report.driver_version = _text(root, "driver_version")
    report.cuda_version = _text(root, "cuda_version")
    report.attached_gpus = _int(root, "attached_gpus", "nvidia_smi_log", source)
    seen: dict[str, int] = {}
    for index, g in enumerate(root.findall("gpu")):
        ctx = f"gpu[{index}]"
        uuid = _text(g, "uuid", "gpu_uuid")
        if not uuid:
            _path, line = _where(ctx, g)
            raise GpuParseError("GPU without a UUID", source=source, line=line, element=f"{ctx}/uuid")
        if uuid in seen:
            _path, line = _where(ctx, g)
            raise GpuParseError(f"UUID {uuid} listed twice (gpu[{seen[uuid]}] and {ctx})", source=source,
                                line=line, element=f"{ctx}/uuid")  # fmt: skip
        seen[uuid] = index
        bus = _text(g, "pci/pci_bus_id", "pci/bus_id") or g.get("id", "")
        rec = GpuRecord(
            index=index,
            uuid=uuid,
            pci_bus_id=normalize_bus_id(bus) if bus else "",
            minor_number=_int(g, "minor_number", ctx, source),
            product_name=_text(g, "product_name"),
            architecture=_text(g, "product_architecture"),
            serial=_text(g, "serial", "serial_number"),
            mig_current=mig_mode(_text(g, "mig_mode/current_mig", "mig_mode/current")),
            mig_pending=mig_mode(_text(g, "mig_mode/pending_mig", "mig_mode/pending")),
        )
        numa = _int(g, "numa_id", ctx, source, "numa_node")
        rec.numa_node = numa
        fb = g.find("fb_memory_usage")
        _memory(rec, fb, f"{ctx}/fb_memory_usage", report, source)
        rec.health, rec.health_reasons = derive_health(g)
        for m in g.iter("mig_device"):
            mctx = f"{ctx}/mig_device[{len(rec.mig_devices)}]"
            gi = _int(m, "gpu_instance_id", mctx, source)
            ci = _int(m, "compute_instance_id", mctx, source)
            if gi is None or ci is None:
                _path, line = _where(mctx, m)
                raise GpuParseError("MIG device without GPU/compute instance id", source=source, line=line,
                                    element=mctx)  # fmt: skip
            mfb = _find(m, "fb_memory_usage", "shared_fb_memory_usage")
            total = _mib(mfb, "total", f"{mctx}/fb_memory_usage", source)
            rec.mig_devices.append(
                MigDeviceRecord(
                    gpu_instance_id=gi,
                    compute_instance_id=ci,
                    mig_index=_int(m, "index", mctx, source),
                    memory_total_mib=total,
                    sm_count=_int(m, "device_attributes/shared/multiprocessor_count", mctx, source),
                )
            )
        report.gpus.append(rec)
    if report.attached_gpus is not None and report.attached_gpus != len(report.gpus):
        # a report for some GPUs only (nvidia-smi -i N): positions are not NVML indexes; the minor
        # number is the best index there is (equal on all but unusual hosts), said in a warning
        for rec in report.gpus:
            if rec.minor_number is not None:
                rec.index = rec.minor_number
        report.warn("nvidia_smi_log/attached_gpus",
                    f"attached_gpus is {report.attached_gpus} but {len(report.gpus)} GPU(s) are listed "
                    "(a report for some GPUs only, e.g. nvidia-smi -i): the others are not reported and the "
                    "listed GPUs are indexed by their minor number")  # fmt: skip
    return report


def _memory(rec: GpuRecord, fb: ET.Element | None, ctx: str, report: GpuReport, source: str) -> None:
    total = _mib(fb, "total", ctx, source)
    reserved = _mib(fb, "reserved", ctx, source)
    used = _mib(fb, "used", ctx, source)
    free = _mib(fb, "free", ctx, source)
    rec.memory_total_mib = total if total is not None and total >= 0 else None
    rec.memory_reserved_mib = reserved if reserved is not None and reserved >= 0 else None
    for name, value in (("used", used), ("free", free)):
        if value is None:
            continue
        if value < 0 or (total is not None and value > total):
            report.warn(f"{ctx}/{name}",
                        f"GPU {rec.uuid}: memory {name} {value} MiB is impossible (total {total} MiB; a "
                        "wrapped unsigned reading): not stored")  # fmt: skip
            value = None
        setattr(rec, f"memory_{name}_mib", value)


def _flag(el: ET.Element, *paths: str) -> bool:
    return _text(el, *paths).lower() == "yes"


def _count(el: ET.Element, *paths: str) -> int:
    total = 0
    for p in paths:
        v = _text(el, p)
        if v.isdigit():
            total += int(v)
    return total


def derive_health(g: ET.Element) -> tuple[str, list[str]]:
    """Health of one ``<gpu>`` element → (``healthy``|``degraded``|``unhealthy``|``unknown``,
    reasons).

    Unhealthy: ``gpu_recovery_action`` other than None (NVML ``nvmlDeviceGetGpuRecoveryAction``:
    reset, reboot, drain), volatile uncorrectable ECC errors (``dram``/``sram_uncorrectable`` or
    ``double_bit/total``), ``remapped_row_failure`` Yes. Degraded: pages pending retirement
    (``pending_blacklist``/``pending_retirement`` Yes) or rows pending remapping. Unknown when
    none of these fields is readable (old drivers, GPUs without ECC).
    """
    reasons_bad, reasons_degraded = [], []
    readable = False
    action = _text(g, "gpu_recovery_action")
    if action:
        readable = True
        if action.lower() != "none":
            reasons_bad.append(f"recovery action: {action}")
    vol = _find(g, "ecc_errors/volatile")
    if vol is not None:
        unc_paths = ("sram_uncorrectable", "dram_uncorrectable", "double_bit/total")
        if any(_text(vol, p) for p in unc_paths):
            readable = True
        unc = _count(vol, *unc_paths)
        if unc:
            reasons_bad.append(f"{unc} volatile uncorrectable ECC error(s)")
    rp = g.find("retired_pages")
    if rp is not None:
        if _text(rp, "pending_blacklist", "pending_retirement", "pending_page_blacklist"):
            readable = True
        if (
            _flag(rp, "pending_blacklist")
            or _flag(rp, "pending_retirement")
            or _flag(rp, "pending_page_blacklist")
        ):
            reasons_degraded.append("pages pending retirement")
    rr = g.find("remapped_rows")
    if rr is not None and len(rr):
        readable = True
        if _flag(rr, "remapped_row_failure", "remapping_failure_occurred"):
            reasons_bad.append("row remapping failure")
        if _flag(rr, "remapped_row_pending", "pending"):
            reasons_degraded.append("rows pending remapping (reset needed)")
    if reasons_bad:
        return "unhealthy", reasons_bad + reasons_degraded
    if reasons_degraded:
        return "degraded", reasons_degraded
    return ("healthy" if readable else "unknown"), []

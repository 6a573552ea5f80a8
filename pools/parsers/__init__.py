"""Pure parsers of nvidia-smi outputs (no Django): ``-q -x``/``-q`` (:mod:`.nvsmi`), ``mig
-lgip/-lgipp/-lgi/-lci`` (:mod:`.mig`), ``topo -m``/``-mp`` (:mod:`.topo`), ``-L`` and
multi-command captures (:mod:`.capture`), and :func:`parse_gpu_report`, which reads any of the
``-q`` forms and merges what the other outputs add (MIG profiles and placements, MIG UUIDs, NUMA
nodes and rails)."""

from __future__ import annotations

from .capture import ListedGpu, find_section, is_capture, parse_gpu_list, split_capture
from .mig import MigListing, parse_mig
from .nvsmi import parse_nvsmi
from .records import GpuParseError, GpuRecord, GpuReport, MigDeviceRecord, ParseWarning
from .topo import TopoMatrix, parse_topo

__all__ = [
    "GpuParseError",
    "GpuRecord",
    "GpuReport",
    "MigDeviceRecord",
    "ParseWarning",
    "apply_gpu_list",
    "apply_mig",
    "apply_topo",
    "parse_gpu_report",
    "parse_gpu_list",
    "parse_mig",
    "parse_nvsmi",
    "parse_topo",
]


def parse_gpu_report(
    text: str | bytes, *, source: str = "", topo: str | None = None, mig: str | None = None
) -> GpuReport:
    """One host's GPUs from ``nvidia-smi -q -x`` XML, ``-q`` text, or a capture holding ``-q``
    (the last one), ``-L`` and ``topo -m`` sections; ``topo`` and ``mig`` are the texts of
    ``nvidia-smi topo -m`` and ``nvidia-smi mig -lgi``/``-lci`` taken separately.

    Raises:
        GpuParseError: located (file, line, element) for any malformed part.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    if is_capture(text):
        sections = split_capture(text)
        query = find_section(sections, "nvidia-smi -q -x") or find_section(sections, "nvidia-smi -q")
        if query is None:
            raise GpuParseError("capture without an nvidia-smi -q section", source=source, line=1)
        report = parse_nvsmi(query.text, source=source, first_line=query.line)
        listed = find_section(sections, "nvidia-smi -L")
        if listed is not None:
            apply_gpu_list(report, parse_gpu_list(listed.text, source=source, first_line=listed.line))
        tsec = find_section(sections, "nvidia-smi topo -m") or find_section(sections, "nvidia-smi topo -mp")
        if tsec is not None and topo is None:
            apply_topo(report, parse_topo(tsec.text, source=source, first_line=tsec.line))
    else:
        report = parse_nvsmi(text, source=source)
    if topo is not None:
        apply_topo(report, parse_topo(topo, source=f"{source} (topo)"))
    if mig is not None:
        apply_mig(report, parse_mig(mig, source=f"{source} (mig)"))
    return report


def apply_topo(report: GpuReport, matrix: TopoMatrix) -> None:
    """Set ``numa_node`` and the rail of each GPU from a ``topo -m`` matrix (matched by index);
    GPUs of the matrix absent from the report, and the reverse, are warnings."""
    rails = matrix.rails()
    by_index = {g.index: g for g in report.gpus}
    for idx, row in matrix.gpus.items():
        gpu = by_index.get(idx)
        if gpu is None:
            report.warn(f"topo/GPU{idx}", f"topo -m lists GPU{idx}, the report does not")
            continue
        if row.numa_node is not None:
            gpu.numa_node = row.numa_node
        rail = rails.get(idx)
        if rail is not None:
            gpu.rail_device, gpu.rail_affinity = rail.device, rail.affinity


def apply_mig(report: GpuReport, listing: MigListing) -> None:
    """Name the MIG devices of each GPU after ``-lgi`` (profile, profile id, placement) by GPU
    index and GPU-instance id; ``-lgi``/``-lci`` instances the ``-q`` report does not list are
    added (a report without MIG devices, e.g. from inside a container)."""
    by_index = {g.index: g for g in report.gpus}
    gis = {(gi.gpu, gi.instance_id): gi for gi in listing.gpu_instances}
    for ci in listing.compute_instances:
        gpu = by_index.get(ci.gpu)
        if gpu is None:
            report.warn(f"mig/GPU{ci.gpu}", f"-lci lists GPU {ci.gpu}, the report does not")
            continue
        if not any(
            m.gpu_instance_id == ci.gpu_instance_id and m.compute_instance_id == ci.instance_id
            for m in gpu.mig_devices
        ):
            gpu.mig_devices.append(MigDeviceRecord(ci.gpu_instance_id, ci.instance_id))
    for (gpu_idx, gi_id), gi in gis.items():
        gpu = by_index.get(gpu_idx)
        if gpu is None:
            report.warn(f"mig/GPU{gpu_idx}", f"-lgi lists GPU {gpu_idx}, the report does not")
            continue
        devices = [m for m in gpu.mig_devices if m.gpu_instance_id == gi_id]
        if not devices:
            devices = [MigDeviceRecord(gi_id, 0)]
            gpu.mig_devices.append(devices[0])
        for m in devices:
            m.profile, m.profile_id = gi.profile, gi.profile_id
            m.placement_start, m.placement_size = gi.placement_start, gi.placement_size
    for gpu in report.gpus:
        gpu.mig_devices.sort(key=lambda m: (m.gpu_instance_id, m.compute_instance_id))


def apply_gpu_list(report: GpuReport, listed: list[ListedGpu]) -> None:
    """MIG device UUIDs and profiles from ``nvidia-smi -L`` (GPU by UUID, MIG device by index)."""
    by_uuid = {g.uuid: g for g in report.gpus}
    for lg in listed:
        gpu = by_uuid.get(lg.uuid)
        if gpu is None:
            report.warn(f"-L/GPU{lg.index}", f"-L lists {lg.uuid}, the report does not")
            continue
        by_mig_index = {m.mig_index: m for m in gpu.mig_devices}
        for mig_index, profile, uuid in lg.mig:
            m = by_mig_index.get(mig_index)
            if m is None:
                report.warn(
                    f"-L/GPU{lg.index}/MIG{mig_index}", f"-L lists MIG device {mig_index}, -q does not"
                )
                continue
            m.uuid = uuid
            if not m.profile:
                m.profile = profile

"""Plain records the GPU parsers return (no Django): a host's GPUs, MIG devices, warnings.

Units: memory in MiB (nvidia-smi prints ``"40960 MiB"``); ids and indexes are NVML's. A
:class:`GpuParseError` names where the input is wrong (``source``, ``line`` and/or ``element``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


class GpuParseError(ValueError):
    """Malformed nvidia-smi output: ``source`` (file name), ``line`` (1-based, 0 when unknown),
    ``element`` (an XML path like ``gpu[2]/fb_memory_usage/total``, or a table field)."""

    def __init__(self, message: str, *, source: str = "", line: int = 0, element: str = ""):
        self.message, self.source, self.line, self.element = message, source, line, element
        where = ":".join(p for p in (source or "<input>", str(line) if line else "") if p)
        if element:
            where += f" ({element})"
        super().__init__(f"{where}: {message}")


@dataclass
class ParseWarning:
    """A reading that was not taken (``where`` names the element or line)."""

    where: str
    message: str

    def as_dict(self) -> dict:
        return {"where": self.where, "message": self.message}


@dataclass
class MigDeviceRecord:
    """One MIG device of a GPU (XML ``mig_device``; ``-lgi``/``-lci``/``-L`` fill the rest)."""

    gpu_instance_id: int
    compute_instance_id: int
    mig_index: int | None = None
    profile: str = ""  # "1g.10gb" (no "MIG " prefix)
    profile_id: int | None = None
    placement_start: int | None = None
    placement_size: int | None = None
    uuid: str = ""
    memory_total_mib: int | None = None
    sm_count: int | None = None


@dataclass
class GpuRecord:
    """One GPU of a report. ``index`` is the NVML index (order of the GPUs in the report);
    ``memory_used_mib``/``memory_free_mib`` are None when absent or impossible (see
    ``warnings`` of the report). ``mig_current``/``mig_pending``: ``enabled``, ``disabled`` or
    ``unsupported``. ``health`` and ``health_reasons`` from :func:`derive_health`."""

    index: int
    uuid: str
    pci_bus_id: str = ""
    minor_number: int | None = None
    product_name: str = ""
    architecture: str = ""
    serial: str = ""
    memory_total_mib: int | None = None
    memory_reserved_mib: int | None = None
    memory_used_mib: int | None = None
    memory_free_mib: int | None = None
    numa_node: int | None = None
    mig_current: str = "unsupported"
    mig_pending: str = "unsupported"
    health: str = "unknown"
    health_reasons: list[str] = field(default_factory=list)
    rail_device: str = ""  # closest RDMA device (topo -m), e.g. "mlx5_3"
    rail_affinity: str = ""  # its matrix entry, e.g. "PXB"
    mig_devices: list[MigDeviceRecord] = field(default_factory=list)


@dataclass
class GpuReport:
    """What one ``nvidia-smi -q`` (XML or text) says about a host."""

    source: str = ""
    driver_version: str = ""
    cuda_version: str = ""
    attached_gpus: int | None = None
    gpus: list[GpuRecord] = field(default_factory=list)
    warnings: list[ParseWarning] = field(default_factory=list)

    def warn(self, where: str, message: str) -> None:
        self.warnings.append(ParseWarning(where, message))

    def as_dict(self) -> dict:
        return asdict(self)


def normalize_bus_id(value: str) -> str:
    """``"00000000:00:04.0"`` → ``"00000000:00:04.0"`` lower case; the short form nvidia-smi
    prints in some places (``"0000:07:00.0"``, 4-digit domain) is widened to 8 digits, so both
    spellings of one device compare equal."""
    value = value.strip().lower()
    if ":" not in value:
        return value
    domain, rest = value.split(":", 1)
    if rest.count(":") == 1 and len(domain) <= 8:
        return f"{int(domain, 16):08x}:{rest}" if domain else value
    return value


def mig_mode(value: str | None) -> str:
    """nvidia-smi ``Enabled``/``Disabled``/``N/A`` → ``enabled``/``disabled``/``unsupported``."""
    v = (value or "").strip().lower()
    return v if v in ("enabled", "disabled") else "unsupported"

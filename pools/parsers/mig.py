"""``nvidia-smi mig -lgip / -lgipp / -lgi / -lci`` text → records (pure).

Tables as ``nvidia-smi mig`` prints them (NVIDIA MIG User Guide, "Device Enumeration"): each row
starts ``|  <gpu>  MIG <profile> …``; the two-line ``-lgip`` rows carry a second line with CE,
JPEG, OFA. Several tables may be in one text (a shell transcript): :func:`parse_mig` finds each by
its title (``GPU instance profiles:``, ``GPU instances:``, ``Compute instances:``) and reads the
``-lgipp`` lines (``GPU  0 Profile ID 19 Placements: {0,1,2,3,4,5,6}:1``) anywhere.
Memory of ``-lgip`` is GiB as printed (``4.75``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .records import GpuParseError

_PROFILE_ROW = re.compile(
    r"^\|\s*(?P<gpu>\d+)\s+MIG\s+(?P<name>\S+)\s+(?P<id>\d+)\s+(?P<free>\d+)/(?P<total>\d+)\s+"
    r"(?P<mem>[\d.]+)\s+(?P<p2p>\S+)\s+(?P<sm>\d+)\s+(?P<dec>\d+)\s+(?P<enc>\d+)\s*\|\s*$"
)
_PROFILE_ROW2 = re.compile(r"^\|\s+(?P<ce>\d+)\s+(?P<jpeg>\d+)\s+(?P<ofa>\d+)\s*\|\s*$")
_GI_ROW = re.compile(
    r"^\|\s*(?P<gpu>\d+)\s+MIG\s+(?P<name>\S+)\s+(?P<pid>\d+)\s+(?P<gi>\d+)\s+(?P<start>\d+):(?P<size>\d+)\s*\|\s*$"
)
_CI_ROW = re.compile(
    r"^\|\s*(?P<gpu>\d+)\s+(?P<gi>\d+)\s+MIG\s+(?P<name>\S+)\s+(?P<pid>\d+)\s+(?P<ci>\d+)\s*\|\s*$"
)
_PLACEMENTS = re.compile(
    r"^\s*GPU\s+(?P<gpu>\d+)\s+Profile ID\s+(?P<id>\d+)\s+Placements?\s*:\s*\{(?P<starts>[\d,\s]*)\}:(?P<size>\d+)\s*$"
)
_TITLES = {"gpu instance profiles:": "lgip", "gpu instances:": "lgi", "compute instances:": "lci"}


@dataclass
class MigProfile:
    """A GPU-instance profile (``-lgip``): ``name`` ``1g.5gb`` (no ``MIG``), ``profile_id``,
    ``free``/``total`` instances, ``memory_gib``, ``sm`` count, decoders, encoders, copy engines,
    JPEG and OFA units."""

    gpu: int
    name: str
    profile_id: int
    free: int
    total: int
    memory_gib: float
    p2p: bool
    sm: int
    dec: int
    enc: int
    ce: int | None = None
    jpeg: int | None = None
    ofa: int | None = None


@dataclass
class GpuInstance:
    """A GPU instance (``-lgi``): profile name and id, instance id, placement start:size."""

    gpu: int
    profile: str
    profile_id: int
    instance_id: int
    placement_start: int
    placement_size: int


@dataclass
class ComputeInstance:
    """A compute instance (``-lci``): GPU instance id, CI profile name (``1c.3g.20gb``), id."""

    gpu: int
    gpu_instance_id: int
    profile: str
    profile_id: int
    instance_id: int


@dataclass
class MigListing:
    """Everything found in one text; ``placements`` = ``{(gpu, profile_id): ([starts], size)}``."""

    profiles: list[MigProfile] = field(default_factory=list)
    placements: dict[tuple[int, int], tuple[list[int], int]] = field(default_factory=dict)
    gpu_instances: list[GpuInstance] = field(default_factory=list)
    compute_instances: list[ComputeInstance] = field(default_factory=list)


def parse_mig(text: str, *, source: str = "") -> MigListing:
    """Parse any mix of ``nvidia-smi mig -lgip/-lgipp/-lgi/-lci`` outputs.

    Raises:
        GpuParseError: a data row of a table that does not match its columns (with its line), or a
            ``-lgip`` second line without its first.
    """
    out = MigListing()
    table = None
    in_body = False
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        inner = line.strip("|+ ").strip().lower()
        if line.lstrip().startswith("|") and inner in _TITLES:
            table, in_body = _TITLES[inner], False
            continue
        m = _PLACEMENTS.match(line)
        if m:
            starts = [int(s) for s in m.group("starts").replace(" ", "").split(",") if s]
            out.placements[(int(m.group("gpu")), int(m.group("id")))] = (starts, int(m.group("size")))
            continue
        if table is None:
            continue
        if line.lstrip().startswith("|="):
            in_body = True
            continue
        if not line.lstrip().startswith("|"):
            if not line.lstrip().startswith("+"):
                table, in_body = None, False
            continue
        if not in_body:
            continue
        if inner.startswith("no ") or "not found" in inner:
            continue
        if table == "lgip":
            r = _PROFILE_ROW.match(line)
            if r:
                out.profiles.append(MigProfile(
                    int(r["gpu"]), r["name"], int(r["id"]), int(r["free"]), int(r["total"]), float(r["mem"]),
                    r["p2p"].lower() == "yes", int(r["sm"]), int(r["dec"]), int(r["enc"])))  # fmt: skip
                continue
            r2 = _PROFILE_ROW2.match(line)
            if r2:
                if not out.profiles or out.profiles[-1].ce is not None:
                    raise GpuParseError(
                        "profile continuation line without its profile", source=source, line=n
                    )
                p = out.profiles[-1]
                p.ce, p.jpeg, p.ofa = int(r2["ce"]), int(r2["jpeg"]), int(r2["ofa"])
                continue
        elif table == "lgi":
            r = _GI_ROW.match(line)
            if r:
                out.gpu_instances.append(GpuInstance(
                    int(r["gpu"]), r["name"], int(r["pid"]), int(r["gi"]), int(r["start"]), int(r["size"])))  # fmt: skip
                continue
        elif table == "lci":
            r = _CI_ROW.match(line)
            if r:
                out.compute_instances.append(ComputeInstance(
                    int(r["gpu"]), int(r["gi"]), r["name"], int(r["pid"]), int(r["ci"])))  # fmt: skip
                continue
        raise GpuParseError(f"unreadable {table_name(table)} row: {line.strip()!r}", source=source, line=n,
                            element=f"-{table}")  # fmt: skip
    return out


def table_name(table: str) -> str:
    return {"lgip": "GPU instance profile", "lgi": "GPU instance", "lci": "compute instance"}[table]

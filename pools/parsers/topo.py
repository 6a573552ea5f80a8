"""``nvidia-smi topo -m`` / ``topo -mp`` matrices → GPU↔NIC affinity and each GPU's rail (pure).

Entries (the matrix legend, ``nvidia-smi topo -h``), closest first: ``PIX`` (at most one PCIe
bridge), ``PXB`` (several bridges, no host bridge), ``PHB`` (through a PCIe host bridge),
``NODE`` (between host bridges of one NUMA node), ``SYS`` (across the SMP interconnect). ``NV#``
(bonded NVLinks) only joins GPUs. NIC columns are RDMA devices (``mlx5_0``) or ``NIC0``… with a
``NIC Legend`` naming them; ANSI escapes (underlined header of newer drivers) are removed.

Rail: a GPU's rail is the NIC closest to it; when several are equally close (DGX A100: GPU0 and
GPU1 both PXB to mlx5_0 and mlx5_1), the GPUs sharing that candidate set take them in order
(GPU0 → mlx5_0, GPU1 → mlx5_1), which is how rail-optimised hosts are cabled.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .records import GpuParseError

#: matrix entries between a GPU and a NIC, closest first
AFFINITY_RANK = {"PIX": 0, "PXB": 1, "PHB": 2, "NODE": 3, "SOC": 4, "SYS": 4}
_ANSI = re.compile(r"\x1b\[[0-9;]*m|\[[0-9;]*m(?=\S)")
_TRAILING = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_LEGEND = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
_ENTRY = re.compile(r"^(X|PIX|PXB|PHB|NODE|SOC|SYS|NV\d+|N/A)$")


@dataclass
class TopoGpu:
    """One GPU row: ``index`` (from ``GPU<n>``), ``cpu_affinity`` (``"48-63,176-191"``),
    ``numa_node`` (None when N/A), ``nics`` = ``{device: entry}``, ``gpus`` = ``{index: entry}``."""

    index: int
    cpu_affinity: str = ""
    numa_node: int | None = None
    nics: dict[str, str] = field(default_factory=dict)
    gpus: dict[int, str] = field(default_factory=dict)


@dataclass
class Rail:
    """The rail of a GPU: ``device`` (``mlx5_3``) and its ``affinity`` entry (``PXB``)."""

    device: str
    affinity: str


@dataclass
class TopoMatrix:
    """``gpus`` by index; ``nics`` the NIC devices in column order (legend names applied)."""

    gpus: dict[int, TopoGpu] = field(default_factory=dict)
    nics: list[str] = field(default_factory=list)

    def rails(self) -> dict[int, Rail]:
        """GPU index → its rail (see the module docstring); GPUs with no NIC column are absent."""
        groups: dict[tuple[str, ...], list[int]] = {}
        best: dict[int, str] = {}
        for idx in sorted(self.gpus):
            g = self.gpus[idx]
            ranked = [(AFFINITY_RANK[e], nic) for nic, e in g.nics.items() if e in AFFINITY_RANK]
            if not ranked:
                continue
            top = min(r for r, _ in ranked)
            cands = tuple(n for n in self.nics if (AFFINITY_RANK.get(g.nics.get(n, ""), 99)) == top)
            groups.setdefault(cands, []).append(idx)
            best[idx] = g.nics[cands[0]]
        out: dict[int, Rail] = {}
        for cands, members in groups.items():
            for pos, idx in enumerate(members):
                out[idx] = Rail(cands[pos % len(cands)], best[idx])
        return out


def _split_header(line: str) -> list[str]:
    if "\t" in line:
        return [c.strip() for c in line.split("\t") if c.strip()]
    return [c.strip() for c in re.split(r"\s{2,}", line.strip()) if c.strip()]


def parse_topo(text: str, *, source: str = "", first_line: int = 1) -> TopoMatrix:
    """Parse ``nvidia-smi topo -m`` or ``-mp``.

    Raises:
        GpuParseError: no header row with ``GPU0``; a row whose cells are not matrix entries or
            whose count does not match the header (with its line).
    """
    lines = [_ANSI.sub("", ln).rstrip("\n") for ln in text.splitlines()]
    legend = {}
    for ln in lines:
        m = _LEGEND.match(ln)
        if m:
            legend[m.group(1)] = m.group(2)
    header_at = next((i for i, ln in enumerate(lines) if re.match(r"^\s+GPU0\b", ln)), None)
    if header_at is None:
        raise GpuParseError("no matrix header (a line starting with GPU0)", source=source, line=first_line)
    columns = [c for c in _split_header(lines[header_at]) if c not in _TRAILING]
    out = TopoMatrix(nics=[legend.get(c, c) for c in columns if not c.startswith("GPU")])
    for i in range(header_at + 1, len(lines)):
        ln = lines[i]
        if not ln.strip():
            break
        cells = ln.split()
        name, entries = cells[0], cells[1 : 1 + len(columns)]
        n = first_line + i
        if len(entries) < len(columns) or not all(_ENTRY.match(e) for e in entries):
            raise GpuParseError(f"row {name!r} does not have {len(columns)} matrix entries", source=source,
                                line=n, element=name)  # fmt: skip
        if not name.startswith("GPU"):
            continue
        try:
            idx = int(name[3:])
        except ValueError:
            raise GpuParseError(f"bad GPU row name {name!r}", source=source, line=n, element=name) from None
        rest = cells[1 + len(columns) :]
        g = TopoGpu(index=idx)
        if rest:
            g.cpu_affinity = rest[0]
        if len(rest) > 1 and rest[1].isdigit():
            g.numa_node = int(rest[1])
        for col, entry in zip(columns, entries, strict=True):
            if col.startswith("GPU"):
                if entry != "X":
                    g.gpus[int(col[3:])] = entry
            else:
                g.nics[legend.get(col, col)] = entry
        out.gpus[idx] = g
    if not out.gpus:
        raise GpuParseError("matrix without GPU rows", source=source, line=first_line + header_at)
    return out

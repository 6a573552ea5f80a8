"""Multi-command captures and ``nvidia-smi -L`` (pure).

A *capture* is a text file holding several nvidia-smi outputs, each under a banner::

    ####...
    # <phase> :: <name>
    # $ nvidia-smi <args>
    ####...

(the layout of nvidia_gpu_exporter's ``internal/captures``). :func:`split_capture` returns the
sections in order; :func:`parse_gpu_list` reads ``nvidia-smi -L`` (GPU and MIG device UUIDs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .records import GpuParseError

_BANNER = re.compile(r"^#{20,}\s*$")
_NAME = re.compile(r"^#\s*(?P<phase>[^:]+?)\s*::\s*(?P<name>.+?)\s*$")
_CMD = re.compile(r"^#\s*\$\s*(?P<cmd>.+?)\s*$")
_GPU_LINE = re.compile(r"^GPU (?P<index>\d+): (?P<name>.+?) \(UUID: (?P<uuid>GPU-[0-9A-Fa-f-]+)\)\s*$")
_MIG_LINE = re.compile(
    r"^\s+MIG (?P<profile>\S+)\s+Device\s+(?P<index>\d+): \(UUID: (?P<uuid>MIG-[0-9A-Fa-f/-]+)\)\s*$"
)


@dataclass
class Section:
    """One output of a capture: ``phase`` (``idle``), ``name`` (``query (-q)``), ``command``
    (``nvidia-smi -q``), ``text`` and ``line`` (1-based line of its first text line)."""

    phase: str
    name: str
    command: str
    text: str
    line: int


def is_capture(text: str) -> bool:
    """True when ``text`` has at least one capture banner with a ``# phase :: name`` line."""
    lines = text[:4000].splitlines()
    return any(_BANNER.match(a) and _NAME.match(b) for a, b in zip(lines, lines[1:], strict=False))


def split_capture(text: str) -> list[Section]:
    """Sections of a capture, in file order (a banner without a ``$`` command line has command "")."""
    lines = text.splitlines()
    out: list[Section] = []
    i = 0
    current: Section | None = None
    body: list[str] = []
    while i < len(lines):
        if _BANNER.match(lines[i]) and i + 1 < len(lines) and _NAME.match(lines[i + 1]):
            if current is not None:
                current.text = "\n".join(body).strip("\n") + "\n"
                out.append(current)
            m = _NAME.match(lines[i + 1])
            j = i + 2
            command = ""
            while j < len(lines) and not _BANNER.match(lines[j]):
                c = _CMD.match(lines[j])
                if c:
                    command = c.group("cmd")
                j += 1
            current = Section(m.group("phase"), m.group("name"), command, "", j + 2)
            body = []
            i = j + 1
            continue
        if current is not None:
            body.append(lines[i])
        i += 1
    if current is not None:
        current.text = "\n".join(body).strip("\n") + "\n"
        out.append(current)
    return out


def find_section(sections: list[Section], command: str, *, last: bool = True) -> Section | None:
    """The last (or first) section whose command is ``command`` (whitespace-insensitive)."""
    want = " ".join(command.split())
    hits = [s for s in sections if " ".join(s.command.split()) == want]
    if not hits:
        return None
    return hits[-1] if last else hits[0]


@dataclass
class ListedGpu:
    """A GPU of ``nvidia-smi -L`` with its MIG devices ``[(mig_index, profile, uuid)]``."""

    index: int
    name: str
    uuid: str
    mig: list[tuple[int, str, str]]


def parse_gpu_list(text: str, *, source: str = "", first_line: int = 1) -> list[ListedGpu]:
    """Parse ``nvidia-smi -L``. Raises GpuParseError for a MIG line before any GPU line."""
    out: list[ListedGpu] = []
    for n, line in enumerate(text.splitlines(), first_line):
        g = _GPU_LINE.match(line)
        if g:
            out.append(ListedGpu(int(g.group("index")), g.group("name"), g.group("uuid"), []))
            continue
        m = _MIG_LINE.match(line)
        if m:
            if not out:
                raise GpuParseError("MIG device listed before its GPU", source=source, line=n)
            out[-1].mig.append((int(m.group("index")), m.group("profile"), m.group("uuid")))
    return out

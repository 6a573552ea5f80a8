"""Node-name maps (pure, no Django): the GUID → name files of OpenSM and infiniband-diags.

Format (``ibnetdiscover(8)`` "NODE NAME MAP FILE FORMAT", OpenSM's ``node-name-map``; read by
``open_node_name_map`` in opensm's complib / rdma-core's ``util/node_name_map.c``)::

    # comment
    0x0008f104003f125c "IB1 (Rack 11 slot 1   ) ISR9288/ISR9096 Voltaire sLB-24D"

One entry per line: leading blanks, a node GUID, blanks, then the name in double quotes (inner
spaces kept); blank lines and lines starting with ``#`` are skipped; a ``#`` after the name starts
a comment. The tools look names up by *node* GUID.

Where Weft is stricter than the tools, on purpose (a map names nodes on every page, a typo should
be seen, not silently change a name):

* the tools give up on the whole map at the first line they cannot read (``WARNING failed to
  parse node name map``, every node keeps its description): Weft also refuses the whole map, but
  lists *every* bad line (:class:`NodeNameMapError`) so it can be fixed in one go;
* the GUID must be ``0x`` + 1..16 hex digits (the tools' ``strtoull(.., 0)`` would also read
  decimal and octal, and would read an unprefixed hex GUID of digits only as decimal);
* an entry without a name, an unterminated quote, text after the closing quote other than a
  comment, control characters, a name longer than :data:`MAX_NAME` characters, and one GUID given
  two different names are errors (the tools skip the first, keep the first of the last);
* an unquoted name (``0x... switch-7``) is accepted as the tools do: up to a ``#``, trimmed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: longest name accepted (the ``Node.name`` column holds 128 characters).
MAX_NAME = 128
#: at most this many located errors are listed (the count is always complete).
MAX_ERRORS = 100

_GUID = re.compile(r"0[xX]([0-9a-fA-F]{1,16})(?=[\s#]|$)")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True, slots=True)
class MapLineError:
    """One bad line: ``line`` is 1-based; ``text`` the line as read (trimmed, at most 80 chars)."""

    line: int
    message: str
    text: str = ""

    def as_dict(self, source: str) -> dict:
        return {"source": source, "line": self.line, "message": self.message, "text": self.text}


class NodeNameMapError(ValueError):
    """The text is not a usable node-name map. ``errors`` lists every bad line (the first
    :data:`MAX_ERRORS`; ``total`` counts them all); ``str()`` is one ``source:line: message`` per line."""

    def __init__(self, source: str, errors: list[MapLineError], total: int | None = None):
        self.source = source
        self.errors = errors
        self.total = total if total is not None else len(errors)
        lines = [f"{source}:{e.line}: {e.message}" for e in errors]
        if self.total > len(errors):
            lines.append(f"{source}: ... {self.total - len(errors)} more bad lines")
        super().__init__("\n".join(lines))

    def as_dicts(self) -> list[dict]:
        """``[{"source", "line", "message", "text"}]`` for API answers and pages."""
        return [e.as_dict(self.source) for e in self.errors]


@dataclass
class NodeNameMap:
    """A parsed map: ``names`` canonical node GUID (``0x%016x``) → name; ``lines`` GUID → the
    1-based line it was named on; ``source`` the file name errors cite."""

    names: dict[str, str] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)
    source: str = "<text>"

    def __len__(self) -> int:
        return len(self.names)


def parse_node_name_map(text: str, source: str = "<text>") -> NodeNameMap:
    """Parse a node-name map (format in the module docstring) into a :class:`NodeNameMap`.

    An empty text (or only comments and blank lines) is an empty map. CR/LF/CRLF line ends and a
    leading BOM are accepted.

    Raises:
        NodeNameMapError: one or more lines are bad; it lists each (line, what is wrong) and
            nothing of the map is returned.
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    out = NodeNameMap(source=source)
    errors: list[MapLineError] = []
    for number, line in enumerate(text.splitlines(), start=1):
        body = line.strip()
        if not body or body.startswith("#"):
            continue
        problem, guid, name = _parse_line(body)
        if problem is None:
            first = out.names.get(guid)
            if first is not None and first != name:
                problem = f"GUID {guid} already named {first!r} on line {out.lines[guid]}"
            elif first is None:
                out.names[guid] = name
                out.lines[guid] = number
        if problem is not None:
            errors.append(MapLineError(number, problem, body[:80]))
    if errors:
        raise NodeNameMapError(source, errors[:MAX_ERRORS], total=len(errors))
    return out


def _parse_line(body: str) -> tuple[str | None, str, str]:
    """``(problem or None, canonical GUID, name)`` of one non-blank, non-comment line."""
    m = _GUID.match(body)
    if not m:
        token = body.split(None, 1)[0]
        return f"{token[:40]!r} is not a node GUID (0x and 1 to 16 hex digits)", "", ""
    guid = f"0x{int(m.group(1), 16):016x}"
    rest = body[m.end() :].lstrip()
    if rest.startswith('"'):
        end = rest.find('"', 1)
        if end < 0:
            return "the name's closing quote is missing", guid, ""
        name = rest[1:end]
        after = rest[end + 1 :].strip()
        if after and not after.startswith("#"):
            return f"text after the quoted name: {after[:40]!r} (start a comment with #)", guid, ""
    else:
        name = rest.split("#", 1)[0]
    name = name.strip()
    if not name:
        return f"GUID {guid} has no name", guid, ""
    if _CONTROL.search(name):
        return "the name holds control characters", guid, ""
    if len(name) > MAX_NAME:
        return f"the name is {len(name)} characters long (at most {MAX_NAME})", guid, ""
    return None, guid, name

"""Parsers of ``ibnetdiscover`` output (pure, no Django).

Reads the default topology format of ``ibnetdiscover(8)`` (infiniband-diags / rdma-core), which
ibdiagnet2 also writes (``ibdiagnet2.ibnetdiscover``) and ``ibsim`` reads as a netfile, so hand-made
ibsim netfiles (``Switch 8 "sw1"`` / ``Hca 1 "node1"`` / ``[1] "sw1"[2] 4xDDR``, no GUIDs) parse too.
Variants handled: tabs, spaces or none between fields (``Switch41``), CRLF/CR line ends, a BOM,
stray stderr or shell-prompt lines (warned and skipped), ``-g`` grouping headers, ``[p](label)``
and ``[p][ext n]`` port labels, base/enhanced port 0, descriptions holding ``#``, spaces or quotes,
widths 1x..12x and speeds SDR..XDR (FDR10), routers (``Rt``), CAs with no port lines, and LIDs that
are empty, negative, 0 (unassigned) or 0xFFFF (permissive, i.e. none assigned).

Also :func:`parse_ports` for ``ibnetdiscover -p`` (``--ports``): one line per port.

Node identity: the GUID from ``switchguid=``/``caguid=``/``routerguid=``, else the hex in the
``"S-<guid>"``/``"H-<guid>"`` name; a node with neither (ibsim netfiles, anonymised dumps) gets a
stable GUID derived from its name (:func:`derived_guid`), with a warning when the file gave a GUID
that is not hex.
"""

from __future__ import annotations

import hashlib
import re

from fabric import rates
from fabric.guid import guid_to_int
from fabric.keys import link_ends

from .records import (
    CA,
    MAX_UNICAST_LID,
    PHYS_LINKUP,
    ROUTER,
    STATE_ACTIVE,
    STATE_DOWN,
    STATE_INIT,
    SWITCH,
    LinkRecord,
    NodeRecord,
    PortRecord,
    Topology,
    TopologyParseError,
    gc_paused,
    split_lines,
)

_TYPES = {"switch": SWITCH, "ca": CA, "hca": CA, "rt": ROUTER, "router": ROUTER}

_HEADER = re.compile(r'^(Switch|Ca|Hca|Rt|Router)\s*(\d+)\s*"([^"]*)"\s*(.*)$', re.IGNORECASE)
_ATTR = re.compile(r"^(vendid|devid|sysimgguid|switchguid|caguid|routerguid)\s*=\s*(\S*)", re.IGNORECASE)
_EXTRAS = r"((?:\[ext\s*\d+\]|\([^)]*\))*)"
_PORT = re.compile(r"^\[(\d+)\]" + _EXTRAS + r'\s*"([^"]*)"\s*\[(\d+)\]' + _EXTRAS + r"\s*(.*)$")
_EXTRA_ITEM = re.compile(r"\[ext\s*(\d+)\]|\(([^)]*)\)")
_SW_HEAD_TAIL = re.compile(r'^"(.*)"\s+(base|enhanced)\s+port\s+0\s+lid\s+(\S*)\s+lmc\s+(\S*)')
_CA_PORT_TAIL = re.compile(r'^lid\s+(\S*)\s+lmc\s+(\S*)\s+"(.*)"\s+lid\s+(\S*)\s+(\S+)')
_SW_PORT_TAIL = re.compile(r'^"(.*)"\s+lid\s+(\S*)\s+(\S+)')
_GROUP_HEADER = re.compile(
    r"^(?:Non-Chassis Nodes|Chassis\b.*|(?:Spine|Line|Fabric|Leaf) Nodes)\s*$", re.IGNORECASE
)
_NAME_GUID = re.compile(r"^[SHR]-(?:0x)?([0-9a-fA-F]{1,16})$")
_HEXISH = re.compile(r"^(?:0x)?[0-9a-fA-F]{1,16}$")

_WIDTH_FROM_W = {"1": "1x", "2": "2x", "4": "4x", "8": "8x", "12": "12x"}


#: Port numbers are 8 bits (NodeInfo:NumPorts, IBTA Vol 1 14.2.5.3); a switch has at most 254 ports.
MAX_PORT = 255


def _port_number(text: str, source: str, line: int, what: str) -> int:
    """``text`` as a port number (or port count) 0..255.

    Raises:
        TopologyParseError: a number above 255 (the file is corrupt; it would not fit the database).
    """
    value = int(text)
    if value > MAX_PORT:
        raise TopologyParseError(f"{what} {text[:24]} is not a port number (0-255)", source, line)
    return value


def derived_guid(name: str) -> str:
    """A stable GUID for a node the file names but gives no valid GUID (ibsim netfiles).

    The top byte is 0x02 (an EUI-64 with the locally-administered bit set), the rest from SHA-1.
    """
    digest = hashlib.sha1(name.encode("utf-8", "replace")).hexdigest()
    return "0x02" + digest[:14]


_CANON_FAST = re.compile(r"(?:0x)?([0-9a-f]{16})")


def _canon(text: str) -> str | None:
    """Canonical GUID of hex ``text`` (with or without ``0x``), None when not a GUID."""
    fast = _CANON_FAST.fullmatch(text) if text else None
    if fast:  # 16 lowercase digits, as ibnetdiscover prints most: already canonical
        return "0x" + fast.group(1)
    if not text or not _HEXISH.match(text):
        return None
    return f"0x{guid_to_int(text):016x}"


class _Raw:
    __slots__ = ("attrs", "body", "desc", "line", "lid", "lmc", "enhanced", "name", "nports", "ports", "type")

    def __init__(self, node_type, nports, name, line, attrs):
        self.type = node_type
        self.nports = nports
        self.name = name
        self.line = line
        self.attrs = attrs
        self.desc = ""
        self.lid: int | None = None
        self.lmc = 0
        self.enhanced = False
        self.ports: list[tuple] = []


class _Ctx:
    """Per-parse helpers that record warnings."""

    def __init__(self, topo: Topology):
        self.topo = topo
        self.port_links: dict[tuple[str, int], tuple[str, int]] = {}
        self.listed: set[tuple[str, int]] = set()  # (guid, port) listed in the node's own record
        self.skipped: dict[str, int] = {}  # name → line of node records skipped (a GUID that is not hex)

    def lid(self, text: str, line: int, what: str) -> int | None:
        """A LID from text; None (with a warning) when empty, not a number or not unicast."""
        if text is None:
            return None
        if text == "":
            self.topo.warn(line, f"{what}: LID is empty; LID left unset")
            return None
        try:
            value = int(text, 0)
        except ValueError:
            self.topo.warn(line, f"{what}: LID {text!r} is not a number; LID left unset")
            return None
        if value == 0:
            return None  # unassigned (SM has not configured it)
        if value == 0xFFFF:
            self.topo.warn(line, f"{what}: LID 65535 is the permissive LID (none assigned); LID left unset")
            return None
        if value < 0 or value > MAX_UNICAST_LID:
            self.topo.warn(line, f"{what}: LID {value} is outside the unicast range 1-49151; LID left unset")
            return None
        return value

    def port_lid(self, text: str, line: int, port: int, name: str) -> int | None:
        """:meth:`lid` of port ``port`` of ``name``; the warning text is built only when needed
        (plain decimal LIDs, nearly all, are taken as they are)."""
        if text and text[0] != "0" and text.isdigit() and text.isascii():
            value = int(text)
            if value <= MAX_UNICAST_LID:
                return value
        return self.lid(text, line, f"port {port} of {name!r}")

    def small_int(self, text: str, line: int, what: str, default: int = 0) -> int:
        try:
            value = int(text, 0)
        except (TypeError, ValueError):
            self.topo.warn(line, f"{what}: {text!r} is not a number; using {default}")
            return default
        return value if 0 <= value <= 7 else default


_LINK_TOKENS: dict[str, tuple[str, str]] = {}


def _link_token(text: str) -> tuple[str, str]:
    """Width and speed from ``4xHDR`` (or ibsim's ``w=4``); ("", "") when absent (memoised)."""
    hit = _LINK_TOKENS.get(text)
    if hit is not None:
        return hit
    result = ("", "")
    for tok in text.split():
        parsed = rates.split_link(tok)
        if parsed:
            result = parsed
            break
        if tok.startswith("w=") and tok[2:] in _WIDTH_FROM_W:
            result = (_WIDTH_FROM_W[tok[2:]], "")
            break
    if len(_LINK_TOKENS) < 4096:
        _LINK_TOKENS[text] = result
    return result


def parse_ibnetdiscover(text: str, source: str = "<text>") -> Topology:
    """Parse ``ibnetdiscover`` (default format) or an ibsim netfile into a :class:`Topology`.

    Returns nodes, ports (one per connected port, both ends) and unique links (a cable listed from
    both ends, or looping back to the same switch, is one link). Ports listed get phys state LinkUp
    and port state Active when they have a unicast LID, else Initialize (up, no LID from the SM).

    Bad records (a GUID that is not hex, a LID of -1/65535/empty, a port pointing at a node the text
    does not define, a duplicated GUID, stray non-topology lines) are kept with the value unset or
    skipped, each with a :class:`~fabric.parsers.records.ParseWarning` giving its line.

    Raises:
        TopologyParseError: no Switch/Ca/Rt record at all (the error points at the first line that
            is not topology), or the text is empty.
    """
    with gc_paused():
        return _parse_ibnetdiscover(text, source)


def _parse_ibnetdiscover(text: str, source: str) -> Topology:
    topo = Topology(format="ibnetdiscover", source=source)
    ctx = _Ctx(topo)
    lines = split_lines(text)
    raws: list[_Raw] = []
    attrs: dict[str, tuple[str, int]] = {}
    current: _Raw | None = None
    first_junk = 0
    saw_guid_attrs = False

    for idx, raw_line in enumerate(lines, 1):
        line = raw_line.strip()
        if not line or line[0] == "#":
            continue
        c0 = line[0]
        if c0 == "[":
            m = _PORT.match(line)
            if m and current is not None:
                current.ports.append((idx, m.groups()))
                continue
            if m:
                topo.warn(idx, "port line outside a node record; skipped")
                continue
        elif c0 in "SCHRschr":
            m = _HEADER.match(line)
            if m:
                current = _Raw(
                    _TYPES[m.group(1).lower()],
                    _port_number(m.group(2), source, idx, "port count"),
                    m.group(3),
                    idx,
                    attrs,
                )
                attrs = {}
                _parse_header_tail(ctx, current, m.group(4), idx)
                raws.append(current)
                continue
        if c0 in "vdscrVDSCR":
            m = _ATTR.match(line)
            if m:
                key = m.group(1).lower()
                if key in ("switchguid", "caguid", "routerguid"):
                    saw_guid_attrs = True
                attrs[key] = (m.group(2), idx)
                current = None
                continue
        if _GROUP_HEADER.match(line):
            current = None
            continue
        if not first_junk:
            first_junk = idx
        shown = line if len(line) <= 60 else line[:57] + "..."
        if "\x00" in line or any(ord(ch) < 9 for ch in line[:200]):
            topo.warn(idx, "binary data, not topology; line skipped")
        else:
            topo.warn(idx, f"not a topology line, skipped: {shown!r}")

    if not raws:
        if not any(line.strip() for line in lines):
            raise TopologyParseError("empty input: no topology records", source, 1 if lines else 0)
        raise TopologyParseError(
            "not an ibnetdiscover topology: no Switch/Ca/Rt node record found", source, first_junk or 1
        )
    _build(ctx, raws, saw_guid_attrs)
    topo.truncated = _truncation(ctx, text, lines, raws, attrs)
    return topo


_RECORD_START = re.compile(
    r"^(?:\[\d|(?:Switch|Ca|Hca|Rt|Router)\b|(?:vendid|devid|sysimgguid|switchguid|caguid|routerguid)\b)",
    re.I,
)


def _truncation(
    ctx: _Ctx, text: str, lines: list[str], raws: list[_Raw], pending_attrs: dict
) -> tuple[int, str] | None:
    """Why ``text`` looks cut short, as ``(line, reason)``, or None.

    A complete ``ibnetdiscover`` report (infiniband-diags ``ibnetdiscover.c``) ends its last line,
    defines every node a port line points at, and lists each link from both of its ends. So, in
    this order: the text ends mid-line (no final newline and a last line that starts a record but
    does not parse whole); attributes (``vendid=`` ...) with no node record after them; a port line
    pointing at a node the text never defines (a cut at a record boundary); the last record lacks
    port lines that other records point at (a cut inside it) while the text otherwise lists links
    from both ends. Hand-made ibsim netfiles list links from one end and end without a newline;
    they pass.
    """
    last_idx, last = 0, ""
    for idx in range(len(lines), 0, -1):
        if lines[idx - 1].strip():
            last_idx, last = idx, lines[idx - 1].strip()
            break
    if last and not text.endswith(("\n", "\r")) and _RECORD_START.match(last):
        whole = (
            (last[0] == "[" and _PORT.match(last) and last.count('"') % 2 == 0
             and (bool(_link_token(last.rsplit("#", 1)[-1])[0]) or not any(k.width for k in ctx.topo.links.values())))
            or (last[0] != "[" and _HEADER.match(last) and last.count('"') % 2 == 0)
            or (last[0] != "[" and _ATTR.match(last) and "=" in last)
        )  # fmt: skip
        if not whole:
            return last_idx, f"the text ends mid-line ({last[:60]!r}): the file looks cut short"
    if pending_attrs:
        line = min(n for _, n in pending_attrs.values())
        return line, "node attributes with no node record after them: the file looks cut short"
    for w in ctx.topo.warnings:
        if "which has no record; link skipped" in w.message:
            return w.line, f"{w.message.split('; ')[0]}: the file looks cut short (a node record is missing)"
    if raws and ctx.topo.links:
        last_raw = raws[-1]
        guid = next((n.guid for n in ctx.topo.nodes.values() if n.line == last_raw.line), None)
        others = [link for link in ctx.topo.links.values() if guid not in (link.a_guid, link.b_guid)]
        both = sum(1 for link in others
                   if (link.a_guid, link.a_port) in ctx.listed and (link.b_guid, link.b_port) in ctx.listed)  # fmt: skip
        if others and both >= 0.9 * len(others):
            missing = sorted(
                port
                for (g, port), _peer in ctx.port_links.items()
                if g == guid and (g, port) not in ctx.listed
            )
            if missing:
                return last_raw.line, (
                    f"the last node record {last_raw.name!r} lacks its port line(s) {missing[:8]} that other "
                    "records point at: the file looks cut short"
                )
    return None


def _parse_header_tail(ctx: _Ctx, raw: _Raw, tail: str, line: int) -> None:
    tail = tail.strip()
    if not tail.startswith("#"):
        raw.desc = raw.name  # ibsim netfile: the id is the NodeDescription
        return
    comment = tail[1:].strip()
    m = _SW_HEAD_TAIL.match(comment)
    if m:
        raw.desc = m.group(1)
        raw.enhanced = m.group(2) == "enhanced"
        raw.lid = ctx.lid(m.group(3), line, f'switch "{raw.name}" port 0')
        raw.lmc = ctx.small_int(m.group(4), line, "lmc")
        return
    if comment.startswith('"'):
        end = comment.rfind('"')
        raw.desc = comment[1:end] if end > 0 else comment[1:]
    else:
        raw.desc = comment or raw.name


def _node_guid(ctx: _Ctx, raw: _Raw, saw_guid_attrs: bool) -> str | None:
    """The node GUID: the hex of the ``"S-<guid>"`` name (ibnetdiscover always names nodes so; ibdiagnet2
    writes ``switchguid=<system image GUID>(<node GUID>)`` for chassis cards, so the name is the
    reliable source), else ``switchguid=``/``caguid=``; a node the file gives no GUID at all (an ibsim
    netfile) gets one derived from its name. None (with a warning) when the file gives a GUID that
    is not hex (a hand-edited ``b8cef60300xxxxxx``): Weft never invents a GUID for such a node, which
    could collide with a real one later."""
    m = _NAME_GUID.match(raw.name)
    if m:
        return _canon(m.group(1))
    key = {SWITCH: "switchguid", CA: "caguid", ROUTER: "routerguid"}[raw.type]
    value = raw.attrs.get(key)
    if value:
        text, line = value
        text = text.split("(", 1)[0]
        guid = _canon(text)
        if guid:
            return guid
        ctx.topo.warn(line, f"{key} {text!r} of node {raw.name!r} is not a hex GUID; node record skipped")
        return None
    if saw_guid_attrs:
        ctx.topo.warn(raw.line, f"node {raw.name!r} has no GUID; GUID derived from its name")
    return derived_guid(raw.name)


def _warn_duplicate_port_guids(topo) -> None:
    """Warn when one CA/router port GUID is on two different nodes (a cloned or misflashed HCA).

    Switch ports all share the switch's port GUID (IBTA Vol 1, 14.2.5.3: only port 0 has a GUID),
    so only non-switch ports are compared. The ports are kept: GUIDs identify nodes in Weft.
    """
    first: dict[str, PortRecord] = {}
    for port in topo.ports.values():
        if not port.port_guid or topo.nodes[port.node_guid].node_type == SWITCH:
            continue
        seen = first.setdefault(port.port_guid, port)
        if seen is not port and seen.node_guid != port.node_guid:
            topo.warn(
                port.line,
                f"duplicated port GUID {port.port_guid}: on {port.node_guid}[{port.port_num}] and on "
                f"{seen.node_guid}[{seen.port_num}] (line {seen.line})",
            )


def _build(ctx: _Ctx, raws: list[_Raw], saw_guid_attrs: bool) -> None:
    topo = ctx.topo
    by_name: dict[str, NodeRecord] = {}
    kept: list[tuple[_Raw, NodeRecord]] = []
    for raw in raws:
        if raw.name in by_name:
            topo.warn(
                raw.line,
                f"node {raw.name!r} is defined twice (first at line "
                f"{by_name[raw.name].line}); second record skipped",
            )
            continue
        guid = _node_guid(ctx, raw, saw_guid_attrs)
        if guid is None:
            ctx.skipped[raw.name] = raw.line
            continue
        if guid in topo.nodes:
            topo.warn(
                raw.line,
                f"duplicated node GUID {guid} ({raw.name!r}, first at line "
                f"{topo.nodes[guid].line}); second record skipped",
            )
            continue
        sysimg = raw.attrs.get("sysimgguid")
        vendor = raw.attrs.get("vendid")
        device = raw.attrs.get("devid")
        node = NodeRecord(
            guid=guid,
            node_type=raw.type,
            description=raw.desc,
            num_ports=raw.nports,
            system_image_guid=(_canon(sysimg[0]) or "") if sysimg else "",
            vendor_id=_hex_int(vendor[0]) if vendor else None,
            device_id=_hex_int(device[0]) if device else None,
            lid=raw.lid,
            lmc=raw.lmc,
            enhanced_port0=raw.enhanced,
            name=raw.name,
            line=raw.line,
        )
        topo.nodes[guid] = node
        by_name[raw.name] = node
        kept.append((raw, node))

    for raw, node in kept:
        for idx, groups in raw.ports:
            _port_line(ctx, node, by_name, idx, groups)

    _warn_duplicate_port_guids(topo)

    # switch ports carry the switch's port-0 LID; state from LID presence (see docstring)
    nodes = topo.nodes
    for port in topo.ports.values():
        owner = nodes[port.node_guid]
        if owner.node_type == SWITCH:
            port.lid = owner.lid
            port.lmc = owner.lmc
        if port.state == 0:
            port.state = STATE_ACTIVE if port.lid else STATE_INIT
            port.phys_state = PHYS_LINKUP


def _hex_int(text: str) -> int | None:
    try:
        return int(text, 16)
    except ValueError:
        return None


def _extras(text: str) -> tuple[str, str]:
    """(ext label, parenthesised value) of a ``[ext n]``/``(x)`` suffix."""
    if not text:
        return "", ""
    ext = paren = ""
    for m in _EXTRA_ITEM.finditer(text):
        if m.group(1) is not None:
            ext = m.group(1)
        else:
            paren = m.group(2).strip()
    return ext, paren


def _port_line(ctx: _Ctx, node: NodeRecord, by_name: dict[str, NodeRecord], idx: int, groups: tuple) -> None:
    """One ``[p](x) "remote"[q](y) # ...`` line of ``node`` (``groups``: the ``_PORT`` groups)."""
    topo = ctx.topo
    lport_text, l_extra, rname, rport_text, r_extra, tail = groups
    # up to two digits cannot exceed 255: skip the checking call for them (most lines)
    lport = (
        int(lport_text) if len(lport_text) < 3 else _port_number(lport_text, topo.source, idx, "local port")
    )
    rport = (
        int(rport_text) if len(rport_text) < 3 else _port_number(rport_text, topo.source, idx, "remote port")
    )
    remote = by_name.get(rname)
    if remote is None:
        if rname in ctx.skipped:
            topo.warn(
                idx,
                f"port {lport} of {node.name!r} points at {rname!r}, skipped at line {ctx.skipped[rname]}; link skipped",
            )
        else:
            topo.warn(
                idx, f"port {lport} of {node.name!r} points at {rname!r}, which has no record; link skipped"
            )
        return
    if node.num_ports and lport > node.num_ports:
        topo.warn(idx, f"port {lport} of {node.name!r} exceeds its {node.num_ports} ports")
    if lport == 0 or rport == 0:
        topo.warn(idx, "port 0 cannot carry a link; line skipped")
        return
    l_ext, l_paren = _extras(l_extra) if l_extra else ("", "")
    r_ext, r_paren = _extras(r_extra) if r_extra else ("", "")
    pre, hash_, comment = tail.partition("#")
    comment = comment.strip() if hash_ else ""
    width = speed = ""
    local_lid = remote_lid = None
    local_lmc = 0
    has_local_lid = has_remote_lid = False
    is_switch = node.node_type == SWITCH
    if comment:
        if not is_switch:
            cm = _CA_PORT_TAIL.match(comment)
            if cm:
                lid_text, lmc_text, _, remote_lid, token = cm.groups()
                local_lid = ctx.port_lid(lid_text, idx, lport, node.name)
                local_lmc = 0 if lmc_text == "0" else ctx.small_int(lmc_text, idx, "lmc")
                has_local_lid = has_remote_lid = True
                width, speed = _link_token(token)
        else:
            sm = _SW_PORT_TAIL.match(comment)
            if sm:
                _, remote_lid, token = sm.groups()
                has_remote_lid = True
                width, speed = _link_token(token)
    if not width:
        width, speed = _link_token(pre)

    guid, rguid = node.guid, remote.guid
    local_key = (guid, lport)
    remote_key = (rguid, rport)
    ctx.listed.add(local_key)
    # canonical GUIDs (0x + 16 lowercase hex digits): string order is numeric order (fabric.keys)
    key = (local_key, remote_key) if local_key <= remote_key else (remote_key, local_key)
    links = topo.links
    link = links.get(key)
    if link is not None:
        if width and not link.width:
            link.width, link.speed = width, speed
    else:
        port_links = ctx.port_links
        for end in (local_key, remote_key):
            other = port_links.get(end)
            if other is not None:
                topo.warn(
                    idx, f"port {end[1]} of {end[0]} is already linked to {other[0]}/{other[1]}; line skipped"
                )
                return
        a, b = key
        links[key] = LinkRecord(a[0], a[1], b[0], b[1], width, speed, idx)
        port_links[local_key] = remote_key
        port_links[remote_key] = local_key

    ports = topo.ports
    lp = ports.get(local_key)
    if lp is None:
        lp = ports[local_key] = PortRecord(guid, lport, line=idx)
    if l_ext:
        lp.label = l_ext
    if is_switch:
        if l_paren:
            lp.label = l_paren
    elif l_paren:
        pguid = _canon(l_paren)
        if pguid:
            lp.port_guid = pguid
        else:
            topo.warn(idx, f"port GUID {l_paren!r} of {node.name!r} port {lport} is not hex; left unset")
    if has_local_lid:
        lp.lid = local_lid
        lp.lmc = local_lmc
    if width:
        lp.width, lp.speed = width, speed

    rp = ports.get(remote_key)
    if rp is None:
        rp = ports[remote_key] = PortRecord(rguid, rport, line=idx)
        if remote.node_type != SWITCH and has_remote_lid:
            rp.lid = ctx.port_lid(remote_lid, idx, rport, rname)
    if r_ext:
        rp.label = r_ext
    if r_paren:
        if remote.node_type == SWITCH:
            rp.label = r_paren
        elif not rp.port_guid:
            pguid = _canon(r_paren)
            if pguid:
                rp.port_guid = pguid
    if width and not rp.width:
        rp.width, rp.speed = width, speed


_PORTS_LINE = re.compile(
    r"^(CA|SW|RT)\s+(-?\d+)\s+(\d+)\s+(0x[0-9a-fA-F]+)\s+(\d+x|\?+)\s+(\S+)\s*(.*)$", re.IGNORECASE
)
_PORTS_REMOTE = re.compile(
    r"^-\s+(CA|SW|RT)\s+(-?\d+)\s+(\d+)\s+(0x[0-9a-fA-F]+)\s+\(\s*'(.*)'\s+-\s+'(.*)'\s*\)\s*$", re.IGNORECASE
)
_PTYPE = {"CA": CA, "SW": SWITCH, "RT": ROUTER}


def parse_ports(text: str, source: str = "<text>") -> Topology:
    """Parse ``ibnetdiscover -p`` (``--ports``): one line per port, linked ports followed by their peer.

    Line shape (infiniband-diags ``ibnetdiscover.c`` ports report)::

        SW  1719 10 0x7cfe9003009ce5b0 4x EDR - CA   134  1 0x7cfe9003003b4bde ( 'sw desc' - 'ca desc' )
        SW  2052 37 0x506b4b03005c2740 4x ???                                    'sw desc'

    The GUID printed is the port GUID; a switch's ports share its node GUID, but a CA's node GUID
    is not in this format, so each CA port becomes a CA node keyed by its port GUID. A line with no
    peer is an unconnected port, stored with state Down and no width/speed.

    Raises:
        TopologyParseError: no port line at all (pointing at the first line that is not one).
    """
    topo = Topology(format="ports", source=source)
    ctx = _Ctx(topo)
    first_junk = 0
    parsed = 0

    def node_for(ntype: str, lid_text: str, port: int, guid_text: str, desc: str, idx: int) -> NodeRecord:
        guid = _canon(guid_text)
        node_type = _PTYPE[ntype.upper()]
        node = topo.nodes.get(guid)
        if node is None:
            node = topo.nodes[guid] = NodeRecord(
                guid=guid, node_type=node_type, description=desc, name=guid, line=idx
            )
            if node_type == SWITCH:
                node.lid = ctx.lid(lid_text, idx, f"switch {guid}")
        node.num_ports = max(node.num_ports, port)
        return node

    for idx, raw_line in enumerate(split_lines(text), 1):
        line = raw_line.strip()
        if not line or line[0] == "#":
            continue
        m = _PORTS_LINE.match(line)
        if not m:
            if not first_junk:
                first_junk = idx
            topo.warn(idx, f"not an ibnetdiscover -p line, skipped: {line[:60]!r}")
            continue
        parsed += 1
        ltype, llid, lport, lguid, width, speed, rest = m.groups()
        lport = _port_number(lport, source, idx, "port")
        rm = _PORTS_REMOTE.match(rest.strip())
        if rm:
            rtype, rlid, rport, rguid, ldesc, rdesc = rm.groups()
        else:
            ldesc = rest.strip()
            if len(ldesc) >= 2 and ldesc[0] == ldesc[-1] == "'":
                ldesc = ldesc[1:-1]
        local = node_for(ltype, llid, lport, lguid, ldesc, idx)
        lkey = (local.guid, lport)
        lp = topo.ports.get(lkey) or PortRecord(local.guid, lport, line=idx)
        topo.ports[lkey] = lp
        if local.node_type != SWITCH:
            lp.port_guid = local.guid
            lp.lid = ctx.lid(llid, idx, f"port {lport} of {local.guid}")
        if not rm:
            if lkey not in ctx.port_links:
                lp.state, lp.phys_state = STATE_DOWN, 0
            continue
        w, s = (width.lower(), speed.upper()) if rates.split_link(width + speed) else ("", "")
        rport = _port_number(rport, source, idx, "remote port")
        remote = node_for(rtype, rlid, rport, rguid, rdesc, idx)
        rkey = (remote.guid, rport)
        rp = topo.ports.get(rkey) or PortRecord(remote.guid, rport, line=idx)
        topo.ports[rkey] = rp
        if remote.node_type != SWITCH:
            rp.port_guid = remote.guid
            rp.lid = ctx.lid(rlid, idx, f"port {rport} of {remote.guid}")
        for p in (lp, rp):
            p.width, p.speed = w, s
            p.state = 0
        key = link_ends(local.guid, lport, remote.guid, rport)
        if key not in topo.links:
            clash = [e for e in (lkey, rkey) if e in ctx.port_links]
            if clash:
                topo.warn(idx, f"port {clash[0][1]} of {clash[0][0]} is already linked; line skipped")
                continue
            a, b = key
            topo.links[key] = LinkRecord(a[0], a[1], b[0], b[1], w, s, idx)
            ctx.port_links[lkey] = rkey
            ctx.port_links[rkey] = lkey

    if not parsed:
        raise TopologyParseError("not ibnetdiscover -p output: no port line found", source, first_junk or 1)
    for port in topo.ports.values():
        owner = topo.nodes[port.node_guid]
        if owner.node_type == SWITCH:
            port.lid = owner.lid
        if port.state == 0:
            port.state = STATE_ACTIVE if port.lid else STATE_INIT
            port.phys_state = PHYS_LINKUP
    return topo

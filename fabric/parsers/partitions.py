"""OpenSM ``partitions.conf``: parser and generator (pure, no Django).

Semantics are OpenSM's, from ``man opensm`` ("PARTITION CONFIGURATION") and the behaviour of its
parser (``opensm/osm_prtn_config.c``, ``osm_prtn.c``), restated here:

* ``#`` starts a comment to the end of the line. A definition ends at ``;`` and may span lines:
  ``<header> : <members> ;`` where the header (``Name[=PKey][,flag[=value]]*``) and its ``:``
  must be on one line; member lines follow until the ``;``.
* The PKey is read like C's ``strtoul(.., 0)`` (``0x`` hex, leading ``0`` octal, else decimal)
  and only its low 15 bits are used: the high bit of a PKey is *membership* (full = 1), which
  the file gives per port (``=full``, ``=limited``, ``=both``; default from ``defmember``, else
  limited). A name that starts with a digit and has no ``=`` is the PKey.
* Header flags: ``ipoib``, ``defmember=full|limited|both``, ``indx0``, and the multicast-group
  flags ``mtu``, ``rate``, ``sl``, ``scope`` (may repeat), ``Q_Key``, ``TClass``, ``FlowLabel``,
  all IBTA codes (``mtu=4`` is 2048 bytes, ``rate=7`` is 40 Gb/s; IBTA Vol 1 15.2.5.16
  PathRecord). OpenSM matches flag names by prefix (``defmem`` is ``defmember``); so does this
  parser. Unknown flags are ignored by OpenSM with a warning: here a :class:`ParseWarning`.
* Members: port GUIDs (``strtoull(.., 0)``, 0 is an error) or the keywords ``ALL``,
  ``ALL_CAS``, ``ALL_SWITCHES``, ``ALL_ROUTERS``, ``SELF`` (the SM's port); ``NONE`` and
  empty items are nothing. ``mgid=<IPv6 multicast GID>[,flag=value]*`` defines a multicast
  group and consumes the rest of its line.
* Definitions with the same PKey are merged (the first name is kept). Without
  ``allow_both_pkeys`` a port listed full in one and limited in another is full.
* OpenSM reads the file with ``fgets`` into a 4,096-byte buffer: a line longer than
  :data:`MAX_LINE` (4,094) characters is cut, the cut GUID is a parse error, and OpenSM then
  drops the whole file and runs with only the default partition. :func:`generate` therefore
  wraps member lists (continuation lines of the same definition) well below that.
* OpenSM always creates ``Default`` (PKey 0x7fff); with a file but no rule for it, ports get
  limited membership there (``ALL=limited, SELF=full``). :func:`generate` writes a default
  partition when none is given.

Errors are located: :class:`PartitionsParseError` ``"<source>:<line>: <message>"``.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from core.errors import LocatedError
from fabric.guid import normalize_guid

from .records import ParseWarning

#: longest line OpenSM reads whole (``fgets`` into ``char line[4096]`` with size ``4096 - 1``)
MAX_LINE = 4094
#: the default partition's PKey (IBTA Vol 1 10.9.1.2: 0x7fff/0xffff)
DEFAULT_PKEY = 0x7FFF
#: PKeys Weft hands out to its own partitions (0x0000 is invalid, 0x7fff the default)
MIN_PKEY, MAX_PKEY = 0x0001, 0x7FFE
FULL, LIMITED, BOTH = "full", "limited", "both"
MEMBERSHIPS = (FULL, LIMITED, BOTH)
#: member keywords (``man opensm``)
KEYWORDS = ("ALL", "ALL_CAS", "ALL_SWITCHES", "ALL_ROUTERS", "SELF")
#: IBTA MTU codes (PathRecord/MCMemberRecord MTU): code -> bytes
MTU_CODES = {1: 256, 2: 512, 3: 1024, 4: 2048, 5: 4096}
#: IBTA rate codes (PathRecord Rate): code -> Gb/s
RATE_CODES = {
    2: 2.5, 3: 10, 4: 30, 5: 5, 6: 20, 7: 40, 8: 60, 9: 80, 10: 120, 11: 14, 12: 56, 13: 112,
    14: 168, 15: 25, 16: 100, 17: 200, 18: 300, 19: 28, 20: 50, 21: 400, 22: 600, 23: 800, 24: 1200,
}  # fmt: skip
#: MGID scope nibbles (IBTA Vol 1 4.1.1): 2 link-local, 5 site-local, 8 organization-local, 14 global
SCOPE_RANGE = range(1, 16)
#: partition names Weft writes: no delimiter of the format, no space, no comment sign
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,63}$")


class PartitionsParseError(LocatedError):
    """A partitions file OpenSM would reject (it would fall back to the default partition only).

    ``str()`` is ``"<source>:<line>: <message>"``; ``line`` is 1-based (0 when not located).
    """


@dataclass
class MemberRecord:
    """One member: ``guid`` canonical (``0x`` + 16 hex digits) or a keyword of :data:`KEYWORDS`;
    ``membership`` one of :data:`MEMBERSHIPS`; ``line`` where it was (first) given."""

    guid: str
    membership: str = LIMITED
    line: int = 0

    @property
    def is_keyword(self) -> bool:
        return self.guid in KEYWORDS


@dataclass
class McastGroupRecord:
    """A ``mgid=`` line: the GID as written (normalised IPv6 text) and its flags (``"sl=1,mtu=4"``)."""

    mgid: str
    flags: str = ""
    line: int = 0


@dataclass
class PartitionRecord:
    """One partition (definitions with one PKey merged).

    ``pkey`` the 15-bit PKey, None when the file gives none (OpenSM would generate one);
    ``pkey_text`` as written; ``mtu``/``rate``/``sl``/``q_key``/``tclass``/``flow_label`` IBTA
    codes or None when not given; ``scope`` the scope nibbles given (OpenSM creates the IPoIB
    broadcast group once per scope); ``members`` in file order, one per GUID/keyword.
    """

    name: str
    pkey: int | None
    pkey_text: str = ""
    ipoib: bool = False
    indx0: bool = False
    mtu: int | None = None
    rate: int | None = None
    sl: int | None = None
    scope: list[int] = field(default_factory=list)
    q_key: int | None = None
    tclass: int | None = None
    flow_label: int | None = None
    members: list[MemberRecord] = field(default_factory=list)
    mcast_groups: list[McastGroupRecord] = field(default_factory=list)
    line: int = 0

    @property
    def is_default(self) -> bool:
        return self.pkey == DEFAULT_PKEY

    def semantics(self) -> dict:
        """What OpenSM makes of this partition, for comparing two files (round trips)."""
        return {
            "name": self.name,
            "pkey": self.pkey,
            "ipoib": self.ipoib,
            "indx0": self.indx0,
            "mtu": self.mtu,
            "rate": self.rate,
            "sl": self.sl,
            "scope": sorted(set(self.scope)),
            "q_key": self.q_key,
            "tclass": self.tclass,
            "flow_label": self.flow_label,
            "members": {m.guid: m.membership for m in self.members},
            "mcast_groups": sorted((g.mgid, g.flags) for g in self.mcast_groups),
        }


@dataclass
class PartitionsConf:
    """A parsed file: partitions by first appearance, warnings (what OpenSM would skip or log)."""

    partitions: list[PartitionRecord] = field(default_factory=list)
    warnings: list[ParseWarning] = field(default_factory=list)
    source: str = "<text>"

    def by_pkey(self) -> dict[int | None, PartitionRecord]:
        return {p.pkey: p for p in self.partitions}

    def semantics(self) -> dict:
        """``{pkey: PartitionRecord.semantics()}``: equal for files OpenSM reads the same."""
        return {p.pkey: p.semantics() for p in self.partitions}


def c_strtoul(text: str) -> int:
    """``strtoul(text, &end, 0)`` with ``*end`` required to be the end: ``0x`` hex, leading ``0``
    octal, else decimal. Raises ``ValueError`` otherwise."""
    t = text.strip()
    if re.fullmatch(r"0[xX][0-9a-fA-F]+", t):
        return int(t, 16)
    if re.fullmatch(r"0[0-7]*", t):
        return int(t, 8)
    if re.fullmatch(r"[1-9][0-9]*", t):
        return int(t)
    raise ValueError(f"{text!r} is not a number")


def _prefix_of(word: str, full: str) -> bool:
    # OpenSM compares with strncmp(word, full, strlen(word)): any prefix matches
    return bool(word) and full.startswith(word)


_MEMBERSHIP_WORDS = ((FULL, FULL), (BOTH, BOTH), (LIMITED, LIMITED))
_GROUP_FLAGS = ("mtu", "rate", "scope", "Q_Key", "TClass", "sl", "FlowLabel")


def _membership(word: str) -> str | None:
    for name, value in _MEMBERSHIP_WORDS:
        if _prefix_of(word, name):
            return value
    return None


def _split_token(token: str) -> tuple[str, str | None]:
    name, eq, value = token.partition("=")
    return name.strip(), (value.strip() if eq else None)


class _Parser:
    def __init__(self, source: str, strict: bool = False):
        self.source = source
        self.strict = strict
        self.conf = PartitionsConf(source=source)
        self._by_pkey: dict[int | None, PartitionRecord] = {}
        self._members: dict[int, dict[str, MemberRecord]] = {}

    def error(self, line: int, message: str) -> PartitionsParseError:
        return PartitionsParseError(message, self.source, line)

    def warn(self, line: int, message: str) -> None:
        self.conf.warnings.append(ParseWarning(line, message))

    # -- header -----------------------------------------------------------------------------------

    def header(self, text: str, lineno: int) -> tuple[PartitionRecord, str]:
        tokens = text.split(",")
        name, pkey_text = _split_token(tokens[0])
        if pkey_text is None and name[:1].isdigit():
            name, pkey_text = "", name
        pkey: int | None = None
        if pkey_text is not None:
            try:
                raw = c_strtoul(pkey_text)
            except ValueError:
                raise self.error(
                    lineno, f"bad partition definition: PKey {pkey_text!r} is not a number"
                ) from None
            if raw > 0xFFFF:
                raise self.error(lineno, f"bad partition definition: PKey {pkey_text} is wider than 16 bits")
            if self.strict and raw & 0x8000 and raw & 0x7FFF == DEFAULT_PKEY:
                raise self.error(
                    lineno,
                    f"PKey {pkey_text} is the default partition's PKey 0x7fff with the membership bit set: "
                    "OpenSM would read this definition as the default partition; write 0x7fff if the "
                    "default partition is meant, else choose a PKey in 0x0001-0x7ffe",
                )
            if raw & 0x8000:
                self.warn(
                    lineno,
                    f"PKey {pkey_text} has the membership bit set: OpenSM uses its low 15 bits "
                    f"(0x{raw & 0x7FFF:04x}); membership is given per port",
                )
            pkey = raw & 0x7FFF or None
        if pkey is None:
            self.warn(lineno, f"partition {name!r} has no PKey: OpenSM would generate one")
        rec = PartitionRecord(name=name, pkey=pkey, pkey_text=pkey_text or "", line=lineno)
        defmember = LIMITED
        for token in tokens[1:]:
            flag, value = _split_token(token)
            if not flag:
                raise self.error(lineno, "bad partition flags: empty flag")
            defmember = self.flag(rec, flag, value, lineno, defmember)
        return rec, defmember

    def flag(self, rec: PartitionRecord, flag: str, value: str | None, lineno: int, defmember: str) -> str:
        for name in _GROUP_FLAGS:
            if _prefix_of(flag, name):
                self.group_flag(rec, name, value, lineno)
                return defmember
        if _prefix_of(flag, "ipoib"):
            rec.ipoib = True
        elif _prefix_of(flag, "defmember"):
            got = _membership(value or "")
            if got is None:
                self.warn(lineno, f"defmember={value!r} is not full, limited or both: skipped")
            else:
                defmember = got
        elif flag == "indx0":
            rec.indx0 = True
        else:
            self.warn(lineno, f"unrecognized partition flag {flag!r}: ignored (as OpenSM does)")
        return defmember

    def group_flag(self, rec: PartitionRecord, name: str, value: str | None, lineno: int) -> None:
        try:
            number = c_strtoul(value or "")
        except ValueError:
            self.warn(lineno, f"{name}={value!r} is not a number: skipped (as OpenSM does)")
            return
        if name == "mtu" and number not in MTU_CODES:
            self.warn(lineno, f"mtu={value} is not an IBTA MTU code (1-5): skipped")
        elif name == "rate" and number not in RATE_CODES:
            self.warn(lineno, f"rate={value} is not an IBTA rate code: skipped")
        elif name == "sl" and number > 15:
            self.warn(lineno, f"sl={value} is above 15: skipped")
        elif name == "scope" and number not in SCOPE_RANGE:
            self.warn(lineno, f"scope={value} is not a scope nibble (1-15): skipped")
        elif name == "FlowLabel" and number > 0xFFFFF:
            self.warn(lineno, f"FlowLabel={value} is wider than 20 bits: skipped")
        elif name == "scope":
            if number not in rec.scope:
                rec.scope.append(number)
        else:
            attr = {"mtu": "mtu", "rate": "rate", "sl": "sl", "Q_Key": "q_key", "TClass": "tclass",
                    "FlowLabel": "flow_label"}[name]  # fmt: skip
            setattr(rec, attr, number)

    # -- merge ------------------------------------------------------------------------------------

    def open(self, rec: PartitionRecord) -> PartitionRecord:
        """The partition a definition adds to: an earlier one with the same PKey, or ``rec``."""
        if rec.pkey is None:
            self.conf.partitions.append(rec)
            self._members[id(rec)] = {}
            return rec
        known = self._by_pkey.get(rec.pkey)
        if known is None:
            self._by_pkey[rec.pkey] = rec
            self.conf.partitions.append(rec)
            self._members[id(rec)] = {}
            return rec
        if self.strict and rec.name and known.name and rec.name != known.name:
            raise self.error(
                rec.line,
                f"PKey 0x{rec.pkey:04x} is already partition {known.name!r} (line {known.line}): OpenSM "
                f"would merge {rec.name!r} into it; give each partition its own PKey",
            )
        if rec.name and known.name and rec.name != known.name:
            self.warn(
                rec.line, f"PKey 0x{rec.pkey:04x} defined again as {rec.name!r}: merged into {known.name!r}"
            )
        known.ipoib = known.ipoib or rec.ipoib
        known.indx0 = known.indx0 or rec.indx0
        for attr in ("mtu", "rate", "sl", "q_key", "tclass", "flow_label"):
            new = getattr(rec, attr)
            if new is None:
                continue
            old = getattr(known, attr)
            if old is not None and old != new:
                self.warn(
                    rec.line,
                    f"PKey 0x{rec.pkey:04x}: {attr}={new} differs from {old} given earlier: kept {old}",
                )
            elif old is None:
                setattr(known, attr, new)
        for s in rec.scope:
            if s not in known.scope:
                known.scope.append(s)
        return known

    # -- members ----------------------------------------------------------------------------------

    def member(self, rec: PartitionRecord, token: str, defmember: str, lineno: int) -> None:
        name, flag = _split_token(token)
        if not name or _prefix_of(name, "NONE"):
            return
        membership = defmember
        if flag is not None:
            membership = _membership(flag) or LIMITED
            if _membership(flag) is None:
                self.warn(lineno, f"unrecognized port flag {flag!r}: limited assumed (as OpenSM does)")
        if name in KEYWORDS:
            key = name
        else:
            try:
                number = c_strtoul(name)
            except ValueError:
                raise self.error(lineno, f"bad PortGUID {name!r}") from None
            if not 0 < number < 1 << 64:
                raise self.error(lineno, f"bad PortGUID {name!r}")
            key = normalize_guid(number)
        members = self._members[id(rec)]
        known = members.get(key)
        if known is None:
            members[key] = m = MemberRecord(key, membership, lineno)
            rec.members.append(m)
        elif known.membership != membership:
            # without allow_both_pkeys, full stays full (osm_prtn_add_port)
            order = {LIMITED: 0, FULL: 1, BOTH: 2}
            known.membership = max(known.membership, membership, key=order.__getitem__)

    def mgid(self, rec: PartitionRecord, rest: str, lineno: int) -> None:
        """``rest`` = ``<gid>[,flag=value]*`` (the remainder of the line after ``mgid=``)."""
        gid_text, _, flags = rest.partition(",")
        gid_text = gid_text.strip()
        try:
            gid = ipaddress.IPv6Address(gid_text)
        except ValueError:
            gid = None
        if gid is None or gid.packed[0] != 0xFF:
            self.warn(lineno, f"mgid {gid_text!r} is not a multicast GID: skipped (as OpenSM does)")
            return
        norm_flags = ",".join(t.strip().replace(" ", "") for t in flags.split(",") if t.strip())
        rec.mcast_groups.append(McastGroupRecord(str(gid), norm_flags, lineno))

    # -- file -------------------------------------------------------------------------------------

    def parse(self, text: str) -> PartitionsConf:
        current: PartitionRecord | None = None
        defmember = LIMITED
        for lineno, raw in enumerate(text.split("\n"), 1):
            size = len(raw.encode("utf-8", "replace"))
            if size > MAX_LINE:
                raise self.error(
                    lineno,
                    f"line of {size} characters: OpenSM reads at most {MAX_LINE} per line and would "
                    "drop the whole file (only the default partition would remain)",
                )
            if "\r" in raw.split("#", 1)[0]:
                # OpenSM skips only space, tab and newline: a CR is read as text ("bad PortGUID",
                # "no partition definition found" after the ';') and the file is dropped
                raise self.error(lineno, "carriage return (CRLF line end): OpenSM would reject the file")
            line = raw.split("#", 1)[0]
            while line.strip():
                body, semi, line = line.partition(";")
                if semi and not body.strip(" \t"):
                    # osm_prtn_config_parse_file skips blanks then hands parse_part_conf the empty
                    # text before this ';', which steps over its terminating NUL and reads past the
                    # line: "no partition definition found", and the whole file is dropped
                    raise self.error(
                        lineno,
                        "';' with nothing before it on its line (or after the previous ';'): OpenSM "
                        "misreads it and would reject the file; end the definition on its last member "
                        "or header line",
                    )
                if current is None:
                    head, colon, rest = body.partition(":")
                    if not colon:
                        raise self.error(
                            lineno, "no partition definition found (a header needs its ':' on its line)"
                        )
                    rec, defmember = self.header(head, lineno)
                    current = self.open(rec)
                    body = rest
                tokens = body.split(",")
                for i, token in enumerate(tokens):
                    if _split_token(token)[0] == "mgid":
                        # an mgid consumes the rest of its definition's text on this line
                        self.mgid(current, ",".join(tokens[i:]).split("=", 1)[1], lineno)
                        break
                    self.member(current, token, defmember, lineno)
                if semi:
                    current = None
        if current is not None:
            self.warn(
                current.line, f"partition {current.name!r} has no closing ';' before the end of the file"
            )
        if not self.conf.partitions:
            raise self.error(0, "no partition definition: OpenSM would run with only the default partition")
        if self.strict:
            default = self._by_pkey.get(DEFAULT_PKEY)
            if default is not None:
                self.check_default(default)
        return self.conf

    def check_default(self, rec: PartitionRecord) -> None:
        """Strict mode: the default partition must keep every port a member (``ALL``, or both
        ``ALL_CAS`` and ``ALL_SWITCHES``): a default listing only some ports cuts the others off
        the management partition (IBTA Vol 1 10.9.1.2), and the SM and the diags can no longer
        reach them. OpenSM's own default, with no rule, is ``ALL=limited, SELF=full``."""
        given = {m.guid for m in rec.members if m.guid in KEYWORDS}
        if "ALL" not in given and not {"ALL_CAS", "ALL_SWITCHES"} <= given:
            raise self.error(
                rec.line,
                "the default partition (0x7fff) must keep every port a member (ALL, or ALL_CAS and "
                "ALL_SWITCHES): this definition would replace it and cut the other ports off the "
                "management partition; keep 'ALL=limited, SELF=full' (OpenSM's own default) or 'ALL=full'",
            )


def parse_partitions(text: str, source: str = "<text>", *, strict: bool = False) -> PartitionsConf:
    """Parse an OpenSM ``partitions.conf`` (see the module docstring for the rules).

    Returns a :class:`PartitionsConf` (partitions merged by PKey, members as canonical GUIDs or
    keywords with effective membership; warnings for what OpenSM skips or logs).

    Raises:
        PartitionsParseError: what makes OpenSM drop the file (a header without ``:``, a bad PKey,
            a bad PortGUID, an empty flag, a line over :data:`MAX_LINE` characters, a ``;`` that
            is the first non-blank character of its line or follows another ``;`` with only blanks
            between, no partition),
            located ``source:line``.

    ``strict`` (what an import into Weft takes, ``fabric.services.partitions.import_partitions``):
    also refuse, located, what OpenSM accepts but rewrites without a word: a PKey whose low 15
    bits are the default's (``0xffff``), two names given one PKey (OpenSM merges them), and a
    default partition that leaves ports out (:meth:`_Parser.check_default`).

    A byte order mark at the start (an editor's, ``\ufeff``) is dropped: it would otherwise become
    part of the first partition's name.
    """
    return _Parser(source, strict).parse(text.removeprefix("\ufeff"))


# -- generator ------------------------------------------------------------------------------------


def _header(rec: PartitionRecord) -> str:
    parts = [f"{rec.name}=0x{rec.pkey:04x}" if rec.name else f"0x{rec.pkey:04x}"]
    if rec.ipoib:
        parts.append("ipoib")
    if rec.indx0:
        parts.append("indx0")
    for attr, word in (("mtu", "mtu"), ("rate", "rate"), ("sl", "sl")):
        value = getattr(rec, attr)
        if value is not None:
            parts.append(f"{word}={value}")
    parts += [f"scope={s}" for s in rec.scope]
    if rec.q_key is not None:
        parts.append(f"Q_Key=0x{rec.q_key:x}")
    if rec.tclass is not None:
        parts.append(f"TClass={rec.tclass}")
    if rec.flow_label is not None:
        parts.append(f"FlowLabel={rec.flow_label}")
    return ", ".join(parts)


def default_partition() -> PartitionRecord:
    """What :func:`generate` writes when no partition has PKey 0x7fff: ``Default=0x7fff, ipoib :
    ALL=full, SELF=full ;`` (every port a full member, as OpenSM without a partitions file)."""
    return PartitionRecord(
        name="Default",
        pkey=DEFAULT_PKEY,
        ipoib=True,
        members=[MemberRecord("ALL", FULL), MemberRecord("SELF", FULL)],
    )


def generate(
    partitions: list[PartitionRecord],
    *,
    width: int = 100,
    ensure_default: bool = True,
    comment: str = "",
) -> str:
    """The ``partitions.conf`` text for ``partitions`` (each needs a ``pkey`` and a name matching
    :data:`NAME_RE` or empty).

    One definition per partition: the header on its own line ending in ``:``, then ``mgid=`` lines
    (one group each), then members (``<guid>=<membership>``) wrapped onto continuation lines of at
    most ``width`` characters (capped at :data:`MAX_LINE`), the last ending in ``;``. A partition
    without members is one line, ``<header> : ;`` (a ``;`` alone on a line makes OpenSM reject
    the file); with mgid lines only, the last mgid line ends in ``;``. The default
    partition comes first (:func:`default_partition` when ``ensure_default`` and none is given).
    ``comment`` lines are written first as ``#`` comments. Every line is at most :data:`MAX_LINE`
    characters, so OpenSM never drops the file for length.

    Raises:
        ValueError: a partition without PKey, a PKey outside 0x0001-0x7fff, two partitions with one
            PKey, a name OpenSM would misread, a member that is neither a GUID nor a keyword, or an
            mgid line longer than :data:`MAX_LINE`.
    """
    width = max(40, min(width, MAX_LINE))
    recs = list(partitions)
    seen: set[int] = set()
    for rec in recs:
        if rec.pkey is None or not 0 < rec.pkey <= DEFAULT_PKEY:
            raise ValueError(f"partition {rec.name!r}: PKey {rec.pkey!r} is not in 0x0001-0x7fff")
        if rec.pkey in seen:
            raise ValueError(f"PKey 0x{rec.pkey:04x} is given twice")
        seen.add(rec.pkey)
        if rec.name and not NAME_RE.match(rec.name):
            raise ValueError(
                f"partition name {rec.name!r}: letters, digits, '_', '.', '-' only, not first a digit"
            )
    if ensure_default and DEFAULT_PKEY not in seen:
        recs.insert(0, default_partition())
    recs.sort(key=lambda r: (r.pkey != DEFAULT_PKEY,))  # stable: default first, others as given
    out: list[str] = [f"# {line}".rstrip() for line in comment.splitlines()]
    for rec in recs:
        if not rec.members and not rec.mcast_groups:
            # one line: OpenSM misreads a ';' that opens a line (see _Parser.parse) and drops the file
            out.append(_header(rec) + " : ;")
            out.append("")
            continue
        out.append(_header(rec) + " :")
        for group in rec.mcast_groups:
            line = f"\tmgid={group.mgid}" + (f",{group.flags}" if group.flags else "")
            if len(line) > MAX_LINE:
                raise ValueError(f"partition {rec.name!r}: mgid line longer than {MAX_LINE} characters")
            out.append(line)
        items = []
        for m in rec.members:
            if m.membership not in MEMBERSHIPS:
                raise ValueError(f"member {m.guid}: membership {m.membership!r} is not one of {MEMBERSHIPS}")
            guid = m.guid if m.guid in KEYWORDS else normalize_guid(m.guid)
            items.append(f"{guid}={m.membership}")
        if not items:
            # mgid lines only: close on the last of them, never with a ';' opening a line
            out[-1] += " ;"
            out.append("")
            continue
        line = "\t"
        for i, item in enumerate(items):
            piece = item + ("," if i < len(items) - 1 else "")
            if line.strip() and len(line) + 1 + len(piece) + 2 > width:  # room for " ;"
                out.append(line.rstrip())
                line = "\t"
            line += (" " if line.strip() else "") + piece
        out.append(line.rstrip() + " ;")
        out.append("")
    text = "\n".join(out).rstrip("\n") + "\n"
    assert max(map(len, text.splitlines()), default=0) <= MAX_LINE
    return text


# -- smpquery pkeys -------------------------------------------------------------------------------

_PKEY_ROW = re.compile(r"^\s*(\d+):((?:\s+0x[0-9a-fA-F]{1,4})+)\s*$")
_CAPACITY = re.compile(r"^\s*(\d+) pkeys capacity for this port", re.MULTILINE)


@dataclass
class PKeyTable:
    """A port's P_Key table (IBTA Vol 1 14.2.5.7 P_KeyTable) as ``smpquery pkeys`` prints it:
    ``entries`` the non-zero 16-bit entries in table order (bit 15 = full membership),
    ``capacity`` the port's table size (PartitionCap) when printed."""

    entries: list[int] = field(default_factory=list)
    capacity: int | None = None

    def membership(self, pkey: int) -> str | None:
        """``"full"``, ``"limited"``, ``"both"`` or None for the 15-bit ``pkey`` in this table."""
        low = pkey & 0x7FFF
        full = any(e == low | 0x8000 for e in self.entries)
        limited = any(e == low for e in self.entries)
        if full and limited:
            return BOTH
        return FULL if full else LIMITED if limited else None


def parse_smpquery_pkeys(text: str, source: str = "smpquery pkeys") -> PKeyTable:
    """Parse ``smpquery pkeys`` output (rows ``"   0: 0xffff 0x8001 0x0000 ..."`` then
    ``"64 pkeys capacity for this port"``; infiniband-diags ``smpquery.c``).

    Raises:
        PartitionsParseError: no table row in the text (located at the first unreadable line).
    """
    table = PKeyTable()
    rows = 0
    for lineno, line in enumerate(text.splitlines(), 1):
        match = _PKEY_ROW.match(line)
        if match:
            rows += 1
            table.entries += [v for v in (int(x, 16) for x in match.group(2).split()) if v & 0x7FFF]
        elif line.strip() and not _CAPACITY.match(line) and rows == 0:
            raise PartitionsParseError(f"not a P_Key table row: {line.strip()[:80]!r}", source, lineno)
    if rows == 0:
        raise PartitionsParseError("no P_Key table in the output", source, 0)
    cap = _CAPACITY.search(text)
    table.capacity = int(cap.group(1)) if cap else None
    return table

"""Slurm host-list expressions (pure): :func:`expand` reads them, :func:`fold` writes them.

Semantics are those of Slurm's hostlist parser (``src/common/hostlist.c``, read to learn the
rules; ``topology.conf(5)``: "Slurm's hostlist expression parser is used"), for one-dimensional
clusters:

- an expression is a list of tokens separated by commas, spaces or tabs; a comma inside brackets
  does not separate (``gpu[1,3]`` is one token);
- a token without ``[`` is one host name as written;
- in a token with brackets, each ``[list]`` is a comma list of ``N`` or ``LO-HI`` (decimal), every
  number of an item printed zero-padded to the *width of that item's low bound as written*:
  ``[08-10]`` is 08, 09, 10 and ``[8-10]`` is 8, 9, 10; items of one bracket keep their own
  widths, so ``login[01,2]`` is ``login01`` and ``login2``;
- text after the last ``]`` is a suffix (Slurm ≥ 23.02.5; ``node[1-2]-ib``), and a bracket
  inside the prefix multiplies out (``rack[1-2]-n[1-2]`` is four names), left to right;
- one ``[LO-HI]`` range holds at most 65,536 names (Slurm's ``MAX_RANGE``).

:func:`expand` is stricter than Slurm only on malformed input (an unclosed ``[``, an empty item,
a sign or space inside brackets): Slurm would guess or fail later, this raises
:class:`HostlistError` with the position. On well-formed input it gives Slurm's names, in Slurm's
order, duplicates kept.

:func:`fold` is the inverse: ``expand(fold(S))`` is exactly the set ``S``, each name once
(property-tested with hypothesis). It ranges the trailing number of each name (``gpu[001-004]``),
keeps differently padded numbers apart or in their own items (``gpu[001,01]``, ``login[01,2]``),
and with ``suffix=True`` also ranges the last number before a non-numeric tail.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Iterator

#: Slurm's MAX_RANGE (MAX_SLURM_NODES): names in one LO-HI item
MAX_RANGE = 64 * 1024
#: names one expression may expand to before :func:`expand` refuses it (a guard, not Slurm's)
MAX_NAMES = 1_000_000
#: characters a host name cannot have in a host list (separators and brackets), and which Slurm's
#: configuration files also refuse in names (``#`` starts a comment, ``=`` separates a key)
FORBIDDEN = frozenset(" \t\n\r,[]=#")
_SEPARATORS = ", \t\n\r"
_ITEM = re.compile(r"(\d+)(?:-(\d+))?")
#: digits in a number Slurm parses with strtoul (an unsigned long) without overflow
_MAX_DIGITS = 19


class HostlistError(ValueError):
    """A host-list expression that cannot be read, or a name that cannot be written in one.
    ``position`` is the 0-based offset in the expression (None for a name)."""

    def __init__(self, message: str, position: int | None = None):
        super().__init__(message if position is None else f"{message} (at character {position + 1})")
        self.position = position


def _tokens(expr: str) -> Iterator[tuple[int, str]]:
    """(offset, token) of every top-level token."""
    start, depth, opened = None, 0, 0
    for i, ch in enumerate(expr):
        if ch == "[":
            if not depth:
                opened = i
            depth += 1
        elif ch == "]" and depth:
            depth -= 1
        if ch in _SEPARATORS and depth == 0:
            if start is not None:
                yield start, expr[start:i]
                start = None
        elif start is None:
            start = i
    if depth:
        raise HostlistError(f"unclosed '[' in {expr!r}", opened)
    if start is not None:
        yield start, expr[start:]


def _items(body: str, offset: int) -> list[str]:
    """The names of one bracket body (``01-04,7``) as digit strings."""
    out: list[str] = []
    pos = offset
    for item in body.split(","):
        m = _ITEM.fullmatch(item)
        if not m:
            raise HostlistError(f"bad range {item!r}: use N or LO-HI with decimal numbers", pos)
        lo_text, hi_text = m.group(1), m.group(2)
        lo = int(lo_text)
        hi = int(hi_text) if hi_text is not None else lo
        if hi < lo:
            raise HostlistError(f"bad range {item!r}: {hi} is below {lo}", pos)
        if hi - lo + 1 > MAX_RANGE:
            raise HostlistError(f"range {item!r} has more than {MAX_RANGE} names", pos)
        width = len(lo_text)
        out.extend(str(v).zfill(width) for v in range(lo, hi + 1))
        pos += len(item) + 1
    return out


def _expand_token(token: str, offset: int) -> list[str]:
    if "[" not in token:
        return [token]
    parts: list[list[str]] = []
    i = 0
    while True:
        j = token.find("[", i)
        if j < 0:
            parts.append([token[i:]])
            break
        parts.append([token[i:j]])
        k = token.find("]", j)
        if k < 0:
            raise HostlistError(f"unclosed '[' in {token!r}", offset + j)
        if "[" in token[j + 1 : k]:
            raise HostlistError(f"nested '[' in {token!r}", offset + j)
        parts.append(_items(token[j + 1 : k], offset + j + 1))
        i = k + 1
    names = [""]
    for options in parts:
        if len(names) * len(options) > MAX_NAMES:
            raise HostlistError(f"{token!r} expands to more than {MAX_NAMES} names", offset)
        names = [n + o for n in names for o in options]
    return names


def expand(expr: str) -> list[str]:
    """The host names of a Slurm host-list expression, in Slurm's order (duplicates kept).

    ``expand("gpu[01-03,7],login1")`` → ``["gpu01", "gpu02", "gpu03", "gpu7", "login1"]``.
    Raises :class:`HostlistError` (a ValueError) naming the position of what cannot be read.
    """
    out: list[str] = []
    for offset, token in _tokens(expr):
        out.extend(_expand_token(token, offset))
        if len(out) > MAX_NAMES:
            raise HostlistError(f"the expression expands to more than {MAX_NAMES} names", offset)
    return out


def check_name(name: str) -> str | None:
    """Why ``name`` cannot be written in a host list or a Slurm configuration line, or None."""
    if not name:
        return "empty name"
    bad = sorted({c for c in name if c in FORBIDDEN or not c.isprintable()})
    if bad:
        return f"{name!r} has {' '.join(repr(c) for c in bad)}"
    return None


def _split(name: str, suffix: bool) -> tuple[str, str, str] | None:
    """(prefix, digits, tail) of the number to range, or None to keep the name literal."""
    m = re.search(r"(\d+)(\D*)$", name) if suffix else re.search(r"(\d+)()$", name)
    if not m or m.start() == 0 or len(m.group(1)) > _MAX_DIGITS:
        return None
    return name[: m.start()], m.group(1), m.group(2)


def _runs(values: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for v in sorted(values):
        if out and v == out[-1][1] + 1:
            out[-1] = (out[-1][0], v)
        else:
            out.append((v, v))
    return out


def _fold_numbers(numbers: Iterable[str]) -> list[tuple[int, int, int]]:
    """(lo, hi, width) items covering exactly the digit strings ``numbers``."""
    padded: dict[int, set[int]] = defaultdict(set)  # width -> values written with leading zeros
    plain: set[int] = set()  # values written without (any width up to their length fits them)
    for s in numbers:
        if len(s) > 1 and s[0] == "0":
            padded[len(s)].add(int(s))
        else:
            plain.add(int(s))
    items: list[tuple[int, int, int]] = []
    for width in sorted(padded):
        # plain numbers of at least `width` digits print the same at this width: they may extend
        # a padded run (098, 099, 100); runs of plain numbers alone are left to the plain pass
        floor = 10 ** (width - 1)
        pool = padded[width] | {v for v in plain if v >= floor}
        for lo, hi in _runs(list(pool)):
            if lo < floor:  # the run starts with a padded number (plain ones are >= floor)
                items.append((lo, hi, width))
                plain.difference_update(range(max(lo, floor), hi + 1))
    items.extend((lo, hi, 1) for lo, hi in _runs(list(plain)))
    return sorted(items)


def _item_text(lo: int, hi: int, width: int) -> str:
    return str(lo).zfill(width) if lo == hi else f"{str(lo).zfill(width)}-{str(hi).zfill(width)}"


def fold(names: Iterable[str], *, suffix: bool = False) -> str:
    """The shortest-ish Slurm host-list expression of the set ``names``: ``expand(fold(S))`` has
    every name of ``S`` exactly once and nothing else.

    ``fold(["gpu001", "gpu002", "gpu004", "gpu01", "login01", "login2"])`` →
    ``"gpu[001-002,004,01],login[01,2]"``. ``suffix=True`` also ranges ``node[1-2]-ib`` (Slurm ≥
    23.02.5 reads it; leave it off for older Slurm). Groups are in natural order of their prefix.
    Raises :class:`HostlistError` for a name :func:`check_name` refuses.
    """
    unique = set(names)
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    literal: list[str] = []
    for name in unique:
        why = check_name(name)
        if why:
            raise HostlistError(f"cannot write {why} in a host list")
        parts = _split(name, suffix)
        if parts is None:
            literal.append(name)
        else:
            groups[(parts[0], parts[2])].append(parts[1])
    out: list[tuple[tuple, str]] = [((_natural(n), ""), n) for n in literal]
    for (prefix, tail), numbers in groups.items():
        items = _fold_numbers(numbers)
        if len(items) == 1 and items[0][0] == items[0][1]:
            text = f"{prefix}{_item_text(*items[0])}{tail}"
        else:
            text = f"{prefix}[{','.join(_item_text(*i) for i in items)}]{tail}"
        out.append(((_natural(prefix), tail), text))
    return ",".join(text for _, text in sorted(out))


def _natural(text: str) -> tuple:
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", text) if p)

"""``ibportstate`` output (pure, no Django): the port's state after a ``disable``/``enable``.

``ibportstate <lid> <port> disable|enable`` (infiniband-diags) prints the port's PortInfo, sends a
PortInfo Set with PortPhysicalState Disabled (3) or Polling (2, "enable"), and prints the PortInfo
the port answered under ``After PortInfo set:`` (lines ``LinkState:....Active`` and
``PhysLinkState:....Disabled``). Semantics: IBTA Vol 1 14.2.5.6 (PortInfo), the ``ibportstate(8)``
man page. A port whose physical link is not up is Down whatever its LinkState field says (the
logical link needs the physical one; ibsim keeps the old LinkState).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from core.errors import LocatedError

from ..choices import PhysState, PortState

_FIELD = re.compile(r"^(LinkState|PhysLinkState):\.*\s*(.+?)\s*$")
_STATES = {"down": PortState.DOWN, "initialize": PortState.INIT, "init": PortState.INIT,
           "armed": PortState.ARMED, "active": PortState.ACTIVE}  # fmt: skip
_PHYS = {
    "sleep": PhysState.SLEEP, "polling": PhysState.POLLING, "disabled": PhysState.DISABLED,
    "portconfigurationtraining": PhysState.TRAINING, "linkup": PhysState.LINKUP,
    "linkerrorrecovery": PhysState.ERROR_RECOVERY, "phytest": PhysState.PHY_TEST,
}  # fmt: skip


class PortStateParseError(LocatedError):
    """``ibportstate`` printed no port state after its Set (``"<source>:<line>: <message>"``)."""


@dataclass(frozen=True)
class PortStateReading:
    """What the port answered after the Set: ``state`` (PortState, Down when the physical link
    is not up) and ``phys_state`` (PortPhysicalState)."""

    state: int
    phys_state: int


def parse_ibportstate_set(text: str, *, source: str = "ibportstate") -> PortStateReading:
    """The port's state in ``text``, the output of ``ibportstate ... disable|enable``: the
    ``LinkState``/``PhysLinkState`` lines after ``After PortInfo set:`` (the last ones printed
    when that header is missing).

    Raises:
        PortStateParseError: no ``PhysLinkState`` line, or a state word ``ibportstate`` does not print.
    """
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip().startswith("After PortInfo set")), 0)
    found: dict[str, tuple[int, str]] = {}
    for lineno, line in enumerate(lines[start:], start + 1):
        m = _FIELD.match(line.strip())
        if m and m.group(1) not in found:
            found[m.group(1)] = (lineno, m.group(2))
    if "PhysLinkState" not in found:
        raise PortStateParseError("no PhysLinkState in the output", source, 0)
    line, word = found["PhysLinkState"]
    phys = _PHYS.get(re.sub(r"[^a-z]", "", word.lower()))
    if phys is None:
        raise PortStateParseError(f"PhysLinkState {word!r} is not a physical port state", source, line)
    state = PortState.DOWN
    if phys == PhysState.LINKUP and "LinkState" in found:
        line, word = found["LinkState"]
        state = _STATES.get(word.split()[0].lower()) if word.split() else None
        if state is None:
            raise PortStateParseError(f"LinkState {word!r} is not a port state", source, line)
    return PortStateReading(state=int(state), phys_state=int(phys))

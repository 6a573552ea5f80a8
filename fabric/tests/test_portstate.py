"""``ibportstate`` set output (``fabric.parsers.portstate``): the state after ``disable`` and
``enable``, as infiniband-diags printed it against the lab (ibsim)."""

from __future__ import annotations

import pytest

from fabric.choices import PhysState, PortState
from fabric.parsers.portstate import PortStateParseError, parse_ibportstate_set

HEAD = """Switch PortInfo:
# Port info: Lid 4 port 1
LinkState:.......................Active
PhysLinkState:...................LinkUp
Lid:.............................4660
LinkWidthActive:.................4X
# MLNX ext Port info: Lid 4 port 1
StateChangeEnable:...............0x00
"""


def _after(link: str, phys: str) -> str:
    return HEAD + (
        "Disable may be irreversible\n\nAfter PortInfo set:\n# Port info: Lid 4 port 1\n"
        f"LinkState:.......................{link}\nPhysLinkState:...................{phys}\n"
        "Lid:.............................4660\n"
    )


def test_disable_reads_the_state_after_the_set_and_is_down():
    # ibsim keeps LinkState Active on a disabled port: without a physical link the port is Down
    reading = parse_ibportstate_set(_after("Active", "Disabled"))
    assert (reading.state, reading.phys_state) == (PortState.DOWN, PhysState.DISABLED)


def test_enable_polls_and_a_trained_link_keeps_its_state():
    assert parse_ibportstate_set(_after("Down", "Polling")).phys_state == PhysState.POLLING
    reading = parse_ibportstate_set(_after("Initialize", "LinkUp"))
    assert (reading.state, reading.phys_state) == (PortState.INIT, PhysState.LINKUP)
    training = parse_ibportstate_set(_after("Down", "PortConfigurationTraining"))
    assert training.phys_state == PhysState.TRAINING


def test_no_state_is_a_located_error():
    with pytest.raises(PortStateParseError, match="no PhysLinkState"):
        parse_ibportstate_set("ibwarn: something\n", source="ibportstate 4 1 disable")
    with pytest.raises(PortStateParseError, match=r"ibportstate:\d+: PhysLinkState 'Exploded'"):
        parse_ibportstate_set(_after("Down", "Exploded"))

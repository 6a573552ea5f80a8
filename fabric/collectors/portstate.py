"""Disable or enable a switch port with ``ibportstate <lid> <port> disable|enable``
(infiniband-diags), through ``fabric.collectors.tools.run_tool`` with the fabric's environment and
HCA port like every collector (own process group, timeout). Parser:
``fabric.parsers.portstate``. Used by the UFM-compatible API's port isolation
(``ufm.isolation``); the port's new state is stored by ``fabric.services.ingest.apply_port_states``.
"""

from __future__ import annotations

from ..parsers.portstate import PortStateParseError, PortStateReading, parse_ibportstate_set
from .tools import ToolError, fabric_ca_args, fabric_env, run_tool

ACTIONS = ("disable", "enable")


def set_port_state(fabric, lid: int, port: int, action: str, *, timeout: float = 30.0) -> PortStateReading:
    """Send ``action`` (``disable``: PortPhysicalState Disabled; ``enable``: Polling, the link
    then trains) to port ``port`` of the switch at ``lid`` on ``fabric``; return the state the
    port answered. ``timeout`` seconds for the one run.

    Raises:
        ValueError: an action other than disable/enable, a LID or port out of range.
        ToolError: the tool is missing, timed out, exited non-zero, or printed no state.
    """
    if action not in ACTIONS:
        raise ValueError(f"action {action!r} is not one of {ACTIONS}")
    if not 0 < lid < 0xC000 or not 0 < port < 255:
        raise ValueError(f"LID {lid} port {port} is not a switch port (unicast LID, port 1-254)")
    argv = ["ibportstate", *fabric_ca_args(fabric), str(lid), str(port), action]
    res = run_tool(argv, env=fabric_env(fabric), timeout=timeout)
    if res.returncode != 0:
        said = (res.stderr or res.stdout).strip()[-300:]
        raise ToolError(f"ibportstate {lid} {port} {action} failed (exit {res.returncode}): {said}")
    try:
        return parse_ibportstate_set(res.stdout, source=f"ibportstate {lid} {port} {action}")
    except PortStateParseError as exc:
        raise ToolError(str(exc)) from None

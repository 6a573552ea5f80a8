"""Disable, enable or reset a switch port with ``ibportstate <lid> <port> disable|enable|reset``,
and clear its PortCounters with ``perfquery -R <lid> <port>`` (infiniband-diags), through ``fabric.collectors.tools.run_tool`` with the fabric's environment and
HCA port like every collector (own process group, timeout). Parser:
``fabric.parsers.portstate``. Used by the UFM-compatible API's port isolation
(``ufm.isolation``) and the port actions (``fabric.services.portactions``); the port's new state is stored by ``fabric.services.ingest.apply_port_states``.
"""

from __future__ import annotations

from ..parsers.portstate import PortStateParseError, PortStateReading, parse_ibportstate_set
from .tools import ToolError, fabric_ca_args, fabric_env, run_tool

ACTIONS = ("disable", "enable", "reset")


def set_port_state(fabric, lid: int, port: int, action: str, *, timeout: float = 30.0) -> PortStateReading:
    """Send ``action`` (``disable``: PortPhysicalState Disabled; ``enable``: Polling, the link
    then trains; ``reset``: LinkState Down, the SM brings it back up — ``ibportstate(8)``) to port ``port`` of the switch at ``lid`` on ``fabric``; return the state the
    port answered. ``timeout`` seconds for the one run.

    Raises:
        ValueError: an action other than disable/enable, a LID or port out of range.
        ToolError: the tool is missing, timed out, exited non-zero, or printed no state.
    """
    if action not in ACTIONS:
        raise ValueError(f"action {action!r} is not one of {ACTIONS}")
    _check_switch_port(lid, port)
    argv = ["ibportstate", *fabric_ca_args(fabric), str(lid), str(port), action]
    res = run_tool(argv, env=fabric_env(fabric), timeout=timeout)
    if res.returncode != 0:
        said = (res.stderr or res.stdout).strip()[-300:]
        raise ToolError(f"ibportstate {lid} {port} {action} failed (exit {res.returncode}): {said}")
    try:
        return parse_ibportstate_set(res.stdout, source=f"ibportstate {lid} {port} {action}")
    except PortStateParseError as exc:
        raise ToolError(str(exc)) from None


def _check_switch_port(lid: int, port: int) -> None:
    if not 0 < lid < 0xC000 or not 0 < port < 255:
        raise ValueError(f"LID {lid} port {port} is not a switch port (unicast LID, port 1-254)")


def reset_port_counters(fabric, lid: int, port: int, *, timeout: float = 30.0) -> None:
    """Clear the PortCounters of port ``port`` of the switch at ``lid`` (``perfquery -R``: a
    PortCounters Set with every counter select bit, IBTA Vol 1 16.1.3.5). The next sweep sees the
    counters go down and flags the port ``reset`` (no rate that interval, ``telemetry.semantics``).

    Raises:
        ValueError: a LID or port out of range.
        ToolError: the tool is missing, timed out or exited non-zero.
    """
    _check_switch_port(lid, port)
    argv = ["perfquery", *fabric_ca_args(fabric), "-R", str(lid), str(port)]
    res = run_tool(argv, env=fabric_env(fabric), timeout=timeout)
    if res.returncode != 0:
        said = (res.stderr or res.stdout).strip()[-300:]
        raise ToolError(f"perfquery -R {lid} {port} failed (exit {res.returncode}): {said}")

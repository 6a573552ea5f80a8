"""The local port and LID routes, for the port actions' SM-path rule (``fabric.services.portactions``):
``ibaddr`` (the local port the fabric's diags use) and ``ibtracert <src> <dst>`` (the route the
switches' forwarding tables give), through ``run_tool`` (own process group, timeout) with the
fabric's environment and HCA port. Parsers: ``fabric.parsers.route``.
"""

from __future__ import annotations

from ..parsers.route import LocalPort, RouteParseError, parse_ibaddr, parse_ibtracert
from .tools import ToolError, fabric_ca_args, fabric_env, run_tool


def _run(fabric, argv: list[str], timeout: float) -> str:
    res = run_tool([argv[0], *fabric_ca_args(fabric), *argv[1:]], env=fabric_env(fabric), timeout=timeout)
    if res.returncode != 0:
        said = (res.stderr or res.stdout).strip()[-300:]
        raise ToolError(f"{' '.join(argv)} failed (exit {res.returncode}): {said}")
    return res.stdout


def local_port(fabric, *, timeout: float = 15.0) -> LocalPort:
    """The port GUID and LID of the local HCA port the fabric's diags use.

    Raises:
        ToolError: ``ibaddr`` missing, timed out, failed, or printed no address."""
    try:
        return parse_ibaddr(_run(fabric, ["ibaddr"], timeout))
    except RouteParseError as exc:
        raise ToolError(str(exc)) from None


def route_ports(fabric, src_lid: int, dst_lid: int, *, timeout: float = 15.0) -> list[tuple[str, int]]:
    """The switch ports ``(switch GUID, port)`` on the LID route from ``src_lid`` to ``dst_lid``.

    Raises:
        ToolError: ``ibtracert`` missing, timed out, failed (no route), or printed no route."""
    try:
        return parse_ibtracert(_run(fabric, ["ibtracert", str(src_lid), str(dst_lid)], timeout))
    except RouteParseError as exc:
        raise ToolError(str(exc)) from None

"""P_Key tables of ports, read with ``smpquery pkeys -G <port GUID>`` (infiniband-diags; the
destination is resolved through the SA), run through ``fabric.collectors.tools.run_tool`` with the
fabric's environment and HCA port like every collector. Parser:
``fabric.parsers.partitions.parse_smpquery_pkeys``. The reader is ``fabric.services.partitions``.
"""

from __future__ import annotations

from ..parsers.partitions import PKeyTable, parse_smpquery_pkeys
from .tools import ToolError, fabric_ca_args, fabric_env, run_tool


def read_pkeys(fabric, guid: str, *, timeout: float = 15.0, env: dict[str, str] | None = None) -> PKeyTable:
    """The P_Key table of the port with GUID ``guid`` (canonical) on ``fabric``.

    ``timeout`` seconds for the one ``smpquery`` run.

    Raises:
        ToolError: the tool is missing, timed out, or exited non-zero (its words in the message).
        PartitionsParseError: the output is not a P_Key table.
    """
    env = fabric_env(fabric) if env is None else env
    res = run_tool(["smpquery", *fabric_ca_args(fabric), "pkeys", "-G", guid], env=env, timeout=timeout)
    if res.returncode != 0:
        said = (res.stderr or res.stdout).strip()[-300:]
        raise ToolError(f"smpquery pkeys -G {guid} failed (exit {res.returncode}): {said}")
    return parse_smpquery_pkeys(res.stdout, source=f"smpquery pkeys -G {guid}")

"""SM collector: which SM is master (``sminfo``) and which SMs exist (``saquery -s`` + ``sminfo <lid>``).

``sminfo(8)`` asks the SM at the local port's MasterSMLID for its SMInfo (IBTA Vol 1 14.2.5.13)
and prints its port GUID, LID, ActCount, priority and SMState. ``saquery -s`` lists the ports
whose PortInfo:CapabilityMask has IsSM set; ``sminfo <lid>`` reads each one's SMInfo (state,
priority, ActCount), which finds the standby SMs. Tools run through
``fabric.collectors.tools.run_tool`` (own process group, timeout). Parsers:
``fabric.parsers.sminfo``. The one writer of what these return is ``fabric.services.sm``.
"""

from __future__ import annotations

from ..parsers.records import SMRecord
from ..parsers.sminfo import parse_saquery_sm_ports, parse_sminfo
from .tools import ToolError, fabric_ca_args, fabric_env, run_tool


def read_master(
    fabric, *, timeout: float = 15.0, env: dict[str, str] | None = None, ca_args: list[str] | None = None
) -> tuple[SMRecord | None, str]:
    """Run ``sminfo`` for ``fabric`` and return ``(master record, "")`` or ``(None, error text)``.

    ``env``/``ca_args`` default to the fabric's (``fabric_env``/``fabric_ca_args``). A missing
    tool, a timeout (``timeout`` seconds), a non-zero exit, unparsable output or an answer from an
    SM that is not MASTER is returned as the error text (at most 500 characters), never raised.
    """
    env = fabric_env(fabric) if env is None else env
    ca_args = fabric_ca_args(fabric) if ca_args is None else ca_args
    try:
        res = run_tool(["sminfo", *ca_args], env=env, timeout=timeout)
    except ToolError as exc:
        return None, str(exc)[:500]
    if res.returncode != 0:
        return None, f"sminfo failed (exit {res.returncode}): {(res.stderr or res.stdout).strip()[-300:]}"
    try:
        records = parse_sminfo(res.stdout, source="sminfo")
    except ValueError as exc:
        return None, str(exc)[:500]
    masters = [r for r in records if r.is_master]
    if not masters:
        return None, f"sminfo answered from {records[0].guid} in state {records[0].state_name}, not MASTER"
    return masters[0], ""


def read_all_sms(fabric, *, timeout: float = 15.0) -> tuple[list[SMRecord], str]:
    """Every SM of the subnet: the SA's IsSM ports (``saquery -s``), then ``sminfo <lid>`` of each.

    Returns ``(records, "")`` or ``(records read so far, error text)``; an SM that does not
    answer is left out (its error is in the text). Never raises for a tool or parse failure.
    """
    env, ca = fabric_env(fabric), fabric_ca_args(fabric)
    try:
        out = run_tool(["saquery", *ca, "-s"], env=env, timeout=timeout)
        lids = parse_saquery_sm_ports(out.stdout, source="saquery -s")
    except (ToolError, ValueError) as exc:
        return [], f"saquery -s: {str(exc)[:300]}"
    records: list[SMRecord] = []
    errors = []
    for lid in lids:
        try:
            res = run_tool(["sminfo", *ca, str(lid)], env=env, timeout=timeout)
            records += parse_sminfo(res.stdout, source=f"sminfo {lid}")
        except (ToolError, ValueError) as exc:
            errors.append(f"sminfo {lid}: {str(exc)[:200]}")
    return records, "; ".join(errors)

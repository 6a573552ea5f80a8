"""SM collector: which SM is master (``sminfo``) and which SMs exist (``saquery -s`` + ``sminfo <lid>``).

``sminfo(8)`` asks the SM at the local port's MasterSMLID for its SMInfo (IBTA Vol 1 14.2.5.13)
and prints its port GUID, LID, ActCount, priority and SMState. ``saquery -s`` lists the ports
whose PortInfo:CapabilityMask has IsSM set; ``sminfo <lid>`` reads each one's SMInfo (state,
priority, ActCount), which finds the standby SMs. Tools run through
``fabric.collectors.tools.run_tool`` (own process group, timeout). Parsers:
``fabric.parsers.sminfo``. The one writer of what these return is ``fabric.services.sm``.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass

from ..parsers.records import SMRecord
from ..parsers.sminfo import parse_saquery_sm_ports, parse_sminfo
from .tools import ToolAborted, ToolError, ToolNotFound, ToolTimeout, fabric_ca_args, fabric_env, run_tool

#: sminfo's words when the local port itself cannot be used (libibmad ``mad_rpc_open_port``,
#: libibumad ``umad_init``): nothing was asked of any SM.
_LOCAL_PORT_FAILURE = re.compile(
    r"can't open UMAD port|Failed to open|umad_init|can't init UMAD|No such device|"
    r"can't resolve|no (IB|InfiniBand) device",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class MasterProbe:
    """One ``sminfo`` run: the ``master`` record, or why there is none.

    ``reached`` says whether the question got to the subnet: True when an SM answered (as master or
    not) or when the MAD to the port's MasterSMLID went unanswered (``iberror: failed: query``, what
    a dead SM looks like); False when the tool never got that far: it timed out as a process (a hung
    fabric or simulator), is not installed, could not open the local port, or was stopped by a
    worker shutdown (``aborted``). Only a reached probe without a master says "no master SM";
    an unreached one says "the SM cannot be seen from this host".
    """

    master: SMRecord | None
    error: str = ""
    reached: bool = True
    aborted: bool = False


def probe_master(
    fabric, *, timeout: float = 15.0, env: dict[str, str] | None = None, ca_args: list[str] | None = None
) -> MasterProbe:
    """Run ``sminfo`` for ``fabric`` (``timeout`` seconds) and classify the outcome (:class:`MasterProbe`).

    ``env``/``ca_args`` default to the fabric's (``fabric_env``/``fabric_ca_args``). Errors are
    returned as the probe's ``error`` (at most 500 characters), never raised.
    """
    env = fabric_env(fabric) if env is None else env
    ca_args = fabric_ca_args(fabric) if ca_args is None else ca_args
    try:
        res = run_tool(["sminfo", *ca_args], env=env, timeout=timeout)
    except ToolAborted as exc:
        return MasterProbe(None, str(exc)[:500], reached=False, aborted=True)
    except ToolTimeout as exc:
        said = (exc.stderr or exc.stdout).strip()[-200:]
        return MasterProbe(
            None,
            f"sminfo did not finish within {timeout:g} s (killed){': ' + said if said else ', no output'}",
            reached=False,
        )
    except ToolNotFound as exc:
        return MasterProbe(None, str(exc)[:500], reached=False)
    except ToolError as exc:
        return MasterProbe(None, str(exc)[:500], reached=False)
    said = (res.stderr or res.stdout).strip()[-300:]
    if res.returncode < 0:
        name = signal.Signals(-res.returncode).name if -res.returncode in signal.valid_signals() else "?"
        return MasterProbe(None, f"sminfo was killed ({name}): {said or 'no output'}", reached=False)
    if res.returncode != 0:
        text = f"sminfo failed (exit {res.returncode}): {said}"
        return MasterProbe(None, text, reached=not _LOCAL_PORT_FAILURE.search(res.stdout + res.stderr))
    try:
        records = parse_sminfo(res.stdout, source="sminfo")
    except ValueError as exc:
        return MasterProbe(None, str(exc)[:500], reached=False)
    masters = [r for r in records if r.is_master]
    if not masters:
        return MasterProbe(
            None, f"sminfo answered from {records[0].guid} in state {records[0].state_name}, not MASTER"
        )
    return MasterProbe(masters[0])


def read_master(
    fabric, *, timeout: float = 15.0, env: dict[str, str] | None = None, ca_args: list[str] | None = None
) -> tuple[SMRecord | None, str]:
    """Run ``sminfo`` for ``fabric`` and return ``(master record, "")`` or ``(None, error text)``
    (:func:`probe_master` without the classification). Never raises."""
    probe = probe_master(fabric, timeout=timeout, env=env, ca_args=ca_args)
    return probe.master, probe.error


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

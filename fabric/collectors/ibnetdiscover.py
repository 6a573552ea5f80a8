"""Live topology collector: runs ``ibnetdiscover`` (and ``sminfo``) for a fabric.

Facts of the tools designed for (infiniband-diags ``ibnetdiscover.c``/``ibdiag_common.c``):

* ``ibnetdiscover`` exits 0 when part of the fabric timed out: it prints what it reached and the
  MAD failures on stderr (``ibwarn: ... _do_madrpc failed``, ``bad status 110; Connection timed
  out``). Such a run is *partial*: ingest must not delete the nodes it missed.
* fatal errors (``iberror: failed: ...``, ``ibpanic: ...``) exit non-zero (255), the reason on
  stdout or stderr: the run fails and the stored fabric is left untouched.
* on a host whose RDMA ports are all Ethernet (RoCE) there is no subnet to discover: the run
  fails with that reason (read from ``/sys/class/infiniband/*/ports/*/link_layer``).
"""

from __future__ import annotations

import glob
import re
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from ..parsers.records import SMRecord
from .sm import read_master
from .tools import ToolAborted, ToolNotFound, ToolTimeout, fabric_ca_args, fabric_env, run_tool

_PARTIAL = re.compile(
    r"timed out|timeout|_do_madrpc failed|bad status|query_node_info failed|discover failed"
    r"|ibwarn",
    re.IGNORECASE,
)
_FATAL = re.compile(r"(iberror|ibpanic|ibexit)[^\n]*", re.IGNORECASE)


class DiscoveryError(RuntimeError):
    """Live discovery failed; ``reason`` says why in an operator's terms (nothing was stored)."""

    def __init__(self, reason: str, *, stdout: str = "", stderr: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.stdout = stdout
        self.stderr = stderr


@dataclass
class CollectedTopology:
    """Raw output of one live run: ``text`` (ibnetdiscover stdout), ``partial`` and why, SM seen."""

    text: str
    stderr: str
    duration_s: float
    partial: bool = False
    partial_reasons: list[str] = field(default_factory=list)
    sm: SMRecord | None = None
    sm_error: str = ""


def ethernet_only_reason(sys_root: str = "/sys/class/infiniband") -> str | None:
    """A reason string when every RDMA port on this host is Ethernet (RoCE), else None.

    None also when there is no RDMA device at all (the tool's own error says so then).
    """
    layers = {}
    for path in glob.glob(f"{sys_root}/*/ports/*/link_layer"):
        try:
            layers[path] = Path(path).read_text().strip()
        except OSError:
            continue
    if layers and all(v.lower() == "ethernet" for v in layers.values()):
        devs = sorted({p.split("/")[-4] for p in layers})
        return (
            f"all RDMA ports on this host are Ethernet (RoCE: {', '.join(devs)}); InfiniBand discovery "
            "needs a port whose link layer is InfiniBand"
        )
    return None


def collect_topology(
    fabric, *, timeout: float | None = None, program: str = "ibnetdiscover"
) -> CollectedTopology:
    """Run ``ibnetdiscover [-C ca -P port]`` for ``fabric`` and return its output.

    ``timeout`` defaults to ``fabric.discovery_timeout_s``. Also runs ``sminfo`` (bounded by
    ``settings.WEFT_TOOL_TIMEOUT_S``) for the master SM; its failure is recorded, not fatal.

    Raises:
        DiscoveryError: the tool is missing, timed out, was killed (a worker shutdown stops it:
            ``tools.abort_all``), exited non-zero, printed nothing, or the host has only Ethernet
            RDMA ports.
    """
    env = fabric_env(fabric)
    timeout = timeout or fabric.discovery_timeout_s
    argv = [program, *fabric_ca_args(fabric)]
    try:
        res = run_tool(argv, env=env, timeout=timeout)
    except (ToolNotFound, ToolAborted) as exc:
        raise DiscoveryError(f"{exc}; the stored fabric is unchanged") from exc
    except ToolTimeout as exc:
        raise DiscoveryError(
            f"{program} timed out after {timeout:g} s; the stored fabric is unchanged",
            stdout=exc.stdout,
            stderr=exc.stderr,
        ) from exc
    if res.returncode < 0:
        raise DiscoveryError(
            f"{program} was killed (signal {-res.returncode}); the stored fabric is unchanged",
            stdout=res.stdout,
            stderr=res.stderr,
        )
    if res.returncode != 0:
        if "LD_PRELOAD" not in env or "umad2sim" not in env.get("LD_PRELOAD", ""):
            roce = ethernet_only_reason()
            if roce:
                raise DiscoveryError(roce, stdout=res.stdout, stderr=res.stderr)
        fatal = _FATAL.search(res.stdout) or _FATAL.search(res.stderr)
        detail = fatal.group(0).strip() if fatal else (res.stderr.strip() or res.stdout.strip())[-300:]
        raise DiscoveryError(
            f"{program} failed (exit {res.returncode}): {detail or 'no output'}",
            stdout=res.stdout,
            stderr=res.stderr,
        )
    if not res.stdout.strip():
        raise DiscoveryError(
            f"{program} printed no topology: {res.stderr.strip()[-300:] or 'no output'}",
            stdout=res.stdout,
            stderr=res.stderr,
        )
    reasons = [line.strip() for line in res.stderr.splitlines() if _PARTIAL.search(line)]
    collected = CollectedTopology(
        text=res.stdout,
        stderr=res.stderr,
        duration_s=res.duration_s,
        partial=bool(reasons),
        partial_reasons=reasons[:50],
    )
    collected.sm, collected.sm_error = read_master(
        fabric, timeout=min(timeout, settings.WEFT_TOOL_TIMEOUT_S), env=env
    )
    return collected

"""Live topology collector: runs ``ibnetdiscover`` (and ``sminfo``) for a fabric.

Facts of the tools designed for (infiniband-diags ``ibnetdiscover.c``/``ibdiag_common.c``):

* ``ibnetdiscover`` exits 0 when part of the fabric timed out: it prints what it reached and the
  MAD failures on stderr. Such a run is *partial*: ingest must not delete the nodes it missed.
  The message decides, not its prefix or the source path rdma-core prints before it (one build
  says ``src/query_smp.c:195; umad (DR path slid 0; dlid 0; 0,1,7,2 Attr 0x11:0) bad status 110;
  Connection timed out``, another ``./libibnetdisc/query_smp.c:186; ...``, older libibmad
  ``ibwarn: [pid] mad_rpc: _do_madrpc failed; dport (DR path slid 0; dlid 0; 0,1,3)``): only a
  line saying a node or port was not reached (:data:`_PARTIAL`) makes the run partial. Any other
  stderr line, e.g. umad2sim's ``ibwarn: [pid] sim_connect: attached as client 0 at node "h1"``
  (printed when ``SIM_HOST`` is unset or names the node otherwise than ibsim does), is logged
  and ignored.
* the failed MADs name the directed route they took (``0,1,7,2``: out of port 1 of the node the
  run started from, port 7 of the next node, port 2 of the next); :func:`failed_paths` reads them
  and :func:`resolve_failed_ports` turns them into the ports, of nodes the run reached, behind
  which something did not answer, so ingest withholds only what lies behind those ports.
* fatal errors (``iberror: failed: ...``, ``ibpanic: ...``) exit non-zero (255), the reason on
  stdout or stderr: the run fails and the stored fabric is left untouched.
* on a host whose RDMA ports are all Ethernet (RoCE) there is no subnet to discover: the run
  fails with that reason (read from ``/sys/class/infiniband/*/ports/*/link_layer``).
"""

from __future__ import annotations

import glob
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from ..parsers.records import SMRecord
from .sm import read_master
from .tools import ToolAborted, ToolNotFound, ToolTimeout, fabric_ca_args, fabric_env, run_tool

log = logging.getLogger(__name__)

#: A stderr line that says a node or port was not reached (MAD timeout, error status, a failed
#: query or discovery step). The ``ibwarn``/source-path prefix plays no part.
_PARTIAL = re.compile(
    r"timed out|timeout|_do_madrpc failed|mad_rpc failed|bad status|query_\w+ failed"
    r"|discover(?:y)? failed|failed to (?:query|get|reach)|no response|unreachable",
    re.IGNORECASE,
)
#: The directed route of a failed MAD (``DR path slid 0; dlid 0; 0,1,7,2``) and its attribute.
_DR_PATH = re.compile(r"DR path[^;]*;[^;]*;\s*(\d+(?:,\d+)*)")
_ATTR = re.compile(r"Attr 0x([0-9a-fA-F]+)(?::(\d+))?")
#: ``# Initiated from node 0002c903000a1234 port 0002c903000a1235`` (ibnetdiscover's header).
_ORIGIN = re.compile(r"^#\s*Initiated from node ([0-9a-fA-F]+) port ([0-9a-fA-F]+)", re.MULTILINE)
ATTR_NODE_INFO, ATTR_PORT_INFO = 0x11, 0x15
_FATAL = re.compile(r"(iberror|ibpanic|ibexit)[^\n]*", re.IGNORECASE)


class DiscoveryError(RuntimeError):
    """Live discovery failed; ``reason`` says why in an operator's terms (nothing was stored)."""

    def __init__(self, reason: str, *, stdout: str = "", stderr: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.stdout = stdout
        self.stderr = stderr


@dataclass(frozen=True)
class FailedMad:
    """One failed MAD of a run: its directed route (``(0, 1, 7, 2)``: the origin, then the port out
    of each node), the attribute (``0x11`` NodeInfo, ``0x15`` PortInfo...) and modifier."""

    path: tuple[int, ...]
    attr: int = 0
    mod: int = 0


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
    #: the failed MADs of a partial run (:func:`failed_paths`); None when a reason line names no
    #: route (what lies behind it is unknown)
    failed: list[FailedMad] | None = field(default_factory=list)
    #: node GUID the run started from (canonical ``0x...``), from the header; "" when absent
    origin: str = ""
    #: stderr lines that did not make the run partial (logged, kept for the record)
    ignored: list[str] = field(default_factory=list)


def partial_lines(stderr: str) -> tuple[list[str], list[str]]:
    """Split ``stderr`` into ``(lines that say a node/port was not reached, other non-empty lines)``."""
    partial: list[str] = []
    other: list[str] = []
    for line in stderr.splitlines():
        line = line.strip()
        if not line:
            continue
        (partial if _PARTIAL.search(line) else other).append(line)
    return partial, other


def failed_paths(lines: list[str]) -> list[FailedMad] | None:
    """The directed routes of the failed MADs in ``lines`` (from :func:`partial_lines`).

    Returns None when a line says something was not reached without naming its route (then no
    one can tell what lies behind it), else one :class:`FailedMad` per line (duplicates merged).
    A ``recv failed`` line of old libibmad that is followed by its ``_do_madrpc failed; dport
    (DR path ...)`` line does not count on its own.
    """
    out: list[FailedMad] = []
    unnamed = 0
    for line in lines:
        m = _DR_PATH.search(line)
        if m is None:
            if "recv failed" in line or "send failed" in line:
                continue  # old libibmad: the next line names the route
            unnamed += 1
            continue
        a = _ATTR.search(line)
        mad = FailedMad(
            tuple(int(x) for x in m.group(1).split(",")),
            int(a.group(1), 16) if a else 0,
            int(a.group(2) or 0) if a else 0,
        )
        if mad not in out:
            out.append(mad)
    if unnamed or (lines and not out):
        return None
    return out


def resolve_failed_ports(
    topology, origin: str, failed: list[FailedMad] | None
) -> set[tuple[str, int]] | None:
    """The ports of reached nodes behind which a MAD of the run failed: ``{(node GUID, port)}``.

    A failed NodeInfo (or any attribute but PortInfo) at route ``0,p1,..,pn`` leaves the port
    ``pn`` of the node reached by ``0,p1,..,p(n-1)`` unknown; a failed PortInfo (``Attr
    0x15:k``) leaves port ``k`` of the node at the route's end unknown. The route is followed
    through ``topology.links`` from ``origin`` (the node GUID the run started from). Returns None
    when ``failed`` is None or a route cannot be followed (ingest then treats every node the run
    missed as unreached).
    """
    if failed is None:
        return None
    if not failed:
        return set()
    if not origin or origin not in topology.nodes:
        return None
    peer: dict[tuple[str, int], tuple[str, int]] = {}
    for a, b in topology.links:
        peer[a] = b
        peer[b] = a
    out: set[tuple[str, int]] = set()
    for mad in failed:
        hops = list(mad.path[1:])
        if mad.attr == ATTR_PORT_INFO:
            target = hops
            last = mad.mod
        else:
            if not hops:
                return None  # the origin itself did not answer
            target, last = hops[:-1], hops[-1]
        node = origin
        for port in target:
            nxt = peer.get((node, port))
            if nxt is None:
                return None
            node = nxt[0]
        out.add((node, last))
    return out


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
    reasons, ignored = partial_lines(res.stderr)
    for line in ignored[:20]:
        log.info("%s on %s: %s (not a reachability problem; ignored)", program, fabric.name, line)
    origin = _ORIGIN.search(res.stdout)
    collected = CollectedTopology(
        text=res.stdout,
        stderr=res.stderr,
        duration_s=res.duration_s,
        partial=bool(reasons),
        partial_reasons=reasons[:50],
        failed=failed_paths(reasons),
        origin=f"0x{int(origin.group(1), 16):016x}" if origin else "",
        ignored=ignored[:50],
    )
    collected.sm, collected.sm_error = read_master(
        fabric, timeout=min(timeout, settings.WEFT_TOOL_TIMEOUT_S), env=env
    )
    return collected

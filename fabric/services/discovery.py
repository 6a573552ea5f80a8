"""Live discovery of a fabric: collector → parser → ingest (see ``fabric.collectors.ibnetdiscover``)."""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from events.services import EventSpec, record_events

from ..choices import DiscoverySource, DiscoveryStatus
from ..collectors.ibnetdiscover import DiscoveryError, collect_topology, resolve_failed_ports
from ..models import Discovery, Fabric, Link
from ..parsers import parse_ibnetdiscover
from ..parsers.records import TopologyParseError
from .ingest import ingest_topology, ingest_unchanged, source_digest

log = logging.getLogger(__name__)


def discover(fabric: Fabric, *, timeout: float | None = None) -> Discovery:
    """Discover ``fabric`` live with ``ibnetdiscover`` and ingest the result; return the Discovery.

    A run with MAD timeouts on stderr (exit 0) is ingested as *partial* (status ``partial``): what
    lies behind the failed MADs is kept (nodes marked unreachable), what answered is applied
    (``fabric.services.ingest.Reach``). When the run fails (tool missing, timeout, non-zero exit, unparsable output,
    Ethernet-only host, or no link at all seen while the fabric has stored links: the tools' own
    HCA port is down) the stored topology is untouched: a ``failed`` Discovery and a
    ``system.discovery_failing`` event are recorded, then the error is raised. After a failure, the
    next successful discovery writes ``system.discovery_recovered``.

    Raises:
        DiscoveryError: the live run failed (``reason`` explains; ``discovery`` is the failed row).
    """
    started = timezone.now()
    try:
        collected = collect_topology(fabric, timeout=timeout)
    except DiscoveryError as exc:
        failed = _record_failure(fabric, exc.reason, started)
        exc.discovery = failed  # type: ignore[attr-defined]
        raise
    recovered = _recovered(fabric)
    # a partial run or an sminfo failure (a warning of its own) never takes the shortcut
    digest = (
        ""
        if collected.partial or collected.sm is None and collected.sm_error
        else source_digest(collected.text, fabric)
    )
    sms = [collected.sm] if collected.sm is not None else []
    same = ingest_unchanged(
        fabric, digest, source=DiscoverySource.LIVE, started=started, events=recovered, sms=sms
    )
    if same is not None:  # the same text as the last complete discovery: nothing to parse or diff
        return same
    try:
        topology = parse_ibnetdiscover(collected.text, source=f"ibnetdiscover@{fabric.name}")
    except TopologyParseError as exc:
        reason = f"ibnetdiscover output unreadable: {exc}"
        err = DiscoveryError(reason)
        err.discovery = _record_failure(fabric, reason, started)  # type: ignore[attr-defined]
        raise err from exc
    if not topology.links and Link.objects.filter(fabric=fabric).exists():
        # ibnetdiscover from a host whose own HCA port is down (its cable pulled, the port
        # disabled) sees that HCA alone and exits 0: not an empty fabric, a blind host. Ingesting
        # it would remove every switch and host (node.removed, link.down for every cable).
        nodes = ", ".join(n.description or guid for guid, n in list(topology.nodes.items())[:2])
        reason = (
            f"ibnetdiscover saw no link at all ({len(topology.nodes)} node(s): {nodes}): the port of "
            "the HCA the tools use is down or unplugged, so nothing beyond this host can be seen; "
            "the stored fabric is kept"
        )
        err = DiscoveryError(reason)
        err.discovery = _record_failure(fabric, reason, started)  # type: ignore[attr-defined]
        raise err
    unknown_ports: set[tuple[str, int]] | None = set()
    if collected.partial:
        topology.partial = True
        for reason in collected.partial_reasons[:20]:
            topology.warn(0, f"ibnetdiscover: {reason}")
        unknown_ports = resolve_failed_ports(topology, collected.origin, collected.failed)
    topology.sms.extend(sms)
    if collected.sm is None and collected.sm_error:
        topology.warn(0, f"sminfo: {collected.sm_error}")
    return ingest_topology(
        fabric, topology, source=DiscoverySource.LIVE, started=started, partial=collected.partial,
        events=recovered, unknown_ports=unknown_ports, source_digest=digest,
    )  # fmt: skip


def _recovered(fabric: Fabric) -> list[EventSpec]:
    """``system.discovery_recovered`` when the fabric's previous live discovery failed, else []."""
    previous = (
        Discovery.objects.filter(fabric=fabric, source=DiscoverySource.LIVE)
        .order_by("-started", "-id")
        .first()
    )
    if previous is None or previous.status != DiscoveryStatus.FAILED:
        return []
    return [
        _system_event(fabric, "system.discovery_recovered", f"live discovery of {fabric.name} works again")
    ]


def _system_event(fabric: Fabric, code: str, message: str, details: dict | None = None) -> EventSpec:
    return EventSpec(
        code=code,
        message=message,
        object_type="fabric",
        object_key=fabric.name,
        object_repr=fabric.name,
        details=details or {},
    )


def record_failure(fabric: Fabric, reason: str, started=None) -> Discovery:
    """Record a failed live discovery of ``fabric`` that did not get as far as :func:`discover`'s
    own failure handling (an unexpected error in the periodic run: a ``failed`` Discovery with
    ``reason`` and the fabric's ``system.discovery_failing`` alarm, in one transaction). ``started``
    defaults to now. Returns the failed Discovery."""
    return _record_failure(fabric, reason, started or timezone.now())


def _record_failure(fabric: Fabric, reason: str, started) -> Discovery:
    log.warning("discovery of %s failed: %s", fabric.name, reason)
    with transaction.atomic():
        failed = Discovery.objects.create(
            fabric=fabric,
            started=started,
            duration_s=round((timezone.now() - started).total_seconds(), 3),
            source=DiscoverySource.LIVE,
            status=DiscoveryStatus.FAILED,
            error=reason,
        )
        record_events(fabric, [_system_event(fabric, "system.discovery_failing",
                                             f"live discovery of {fabric.name} failed: {reason}",
                                             {"discovery": failed.pk})])  # fmt: skip
    return failed

"""Same source: the digest of a topology text as the ingest sees it, and recording a Discovery
without parsing when the text is the one the last complete discovery stored."""

from __future__ import annotations

import functools
import hashlib
import time
from datetime import datetime
from pathlib import Path

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from events.services import EventSpec, record_events

from ...choices import DiscoveryStatus
from ...models import Discovery, Fabric, Node
from ..names import MapUnreadable, read_map_path
from .changes import Changes
from .common import became_latest, sync_sms

#: the modules whose code turns a topology text into stored rows: their source salts
#: :func:`source_digest`, so a changed parser, name rule or column table never matches an old digest
_PIPELINE_MODULES = (
    "fabric.parsers.ibnetdiscover",
    "fabric.parsers.subnet_lst",
    "fabric.parsers.records",
    "fabric.services.derive",
    "fabric.services.names",
    # this package, every module of it (a new module joins by being here)
    *sorted(
        __package__ if path.stem == "__init__" else f"{__package__}.{path.stem}"
        for path in Path(__file__).parent.glob("*.py")
    ),
)


@functools.cache
def _pipeline_salt() -> bytes:
    import importlib
    import inspect

    h = hashlib.blake2b(digest_size=16)
    for name in _PIPELINE_MODULES:
        try:
            module = importlib.import_module(name)
            h.update(inspect.getsource(module).encode())
        except (ImportError, OSError, TypeError):  # no source on disk: never match an old digest
            h.update(repr((name, time.time_ns())).encode())
    return h.digest()


def source_digest(text: str, fabric: Fabric | None = None) -> str:
    """Digest (32 hex digits) of a topology text as the ingest sees it: BLAKE2b over every line
    that is not a ``#`` comment line (ibnetdiscover's header carries the date and the initiating
    node and port, neither of which is topology), salted with the ingest pipeline's own source and,
    when ``fabric`` names its nodes from a map file on this server (``node_name_map_path``, read
    at every discovery), that file's bytes; ``""`` (never matches) when that file cannot be read.

    Two texts with the same digest parse to the same rows with the same code and names, so a text
    whose digest equals the last complete discovery's changes nothing (see :func:`ingest_unchanged`).
    About 10 ms for the Selene file.
    """
    h = hashlib.blake2b(_pipeline_salt(), digest_size=16)
    if fabric is not None and fabric.node_name_map_path:
        try:
            h.update(read_map_path(fabric.node_name_map_path).encode())
        except MapUnreadable:
            return ""
    for line in text.splitlines():
        if not line.startswith("#"):
            h.update(line.encode())
            h.update(b"\n")
    return h.hexdigest()


def ingest_unchanged(
    fabric: Fabric,
    digest: str,
    *,
    source: str,
    filename: str = "",
    started: datetime | None = None,
    events: list[EventSpec] | None = None,
    sms: list | None = None,
) -> Discovery | None:
    """Record a Discovery for a text whose :func:`source_digest` shows nothing changed, without
    parsing it; None when that cannot be shown (then parse and :func:`ingest_topology`).

    The shortcut holds when the fabric's latest Discovery (any source: a notice refresh is one) is
    complete (``ok``) with ``source_digest == digest``, and no stored node has ``digest`` NULL
    (cleared by another writer of its rows since) or ``unreachable_since`` set (a complete run
    clears it). Then the new Discovery (``ok``, ``rows_written`` 0 unless the SMs or ``events``
    wrote, ``diff["same_source"]`` True) copies that one's counts, digest and warnings; ``sms``
    (``SMRecord``s from ``sminfo``) go to the SM service as in a full ingest; ``events`` are
    recorded in the same transaction. Takes the Fabric row lock like :func:`ingest_topology`.
    """
    if not digest:
        return None
    started = started or timezone.now()
    with transaction.atomic():
        locked = Fabric.objects.select_for_update().get(pk=fabric.pk)
        latest = Discovery.objects.filter(fabric=locked).exclude(status=DiscoveryStatus.FAILED).first()
        if latest is None or latest.status != DiscoveryStatus.OK or latest.source_digest != digest:
            return None
        if (
            Node.objects.filter(fabric=locked)
            .filter(Q(digest__isnull=True) | Q(unreachable_since__isnull=False))
            .exists()
        ):
            return None
        ch = Changes()
        if sms:
            sync_sms(locked, sms, ch)
        if ch.events or events:
            record_events(locked, [*ch.events, *(events or [])], at=timezone.now())
            ch.rows += len(ch.events)
        empty = {"added": {"nodes": [], "links": []}, "removed": {"nodes": [], "links": []},
                 "changed": {"nodes": [], "ports": [], "links": []}}  # fmt: skip
        discovery = Discovery.objects.create(
            fabric=locked,
            started=started,
            duration_s=round((timezone.now() - started).total_seconds(), 3),
            source=source,
            filename=filename[:255],
            status=DiscoveryStatus.OK,
            counts=latest.counts,
            diff={
                **empty,
                "truncated": False,
                "partial": False,
                "initial": False,
                "unreached": [],
                "same_source": True,
            },  # fmt: skip
            warnings=latest.warnings,
            rows_written=ch.rows,
            digest=latest.digest,
            source_digest=digest,
        )
        became_latest(locked, discovery)
    return discovery

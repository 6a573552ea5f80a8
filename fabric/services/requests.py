"""What a user asks of a fabric from a page or the API: one function per use case.

Each function writes its change and its audit entry (``accounts.audit.record``) in one transaction
(the caller's, when it has one) and queues work with ``transaction.on_commit``: a request that
fails, or whose audit entry cannot be written, leaves nothing behind and queues nothing. The page
views (``fabric.views``) and the API (``fabric.api.views``) both call these, so a use case is
written once.
"""

from __future__ import annotations

import functools
import hashlib
import uuid
from typing import Any

from django.db import transaction
from django.utils import timezone

from accounts import audit
from core import enqueue
from core.sites import live_sites, require_live

from ..choices import DiscoverySource
from ..models import NO_LIVE_ACCESS, Discovery, Fabric
from .ingest import import_topology_text, summary
from .names import check_map, rename_nodes


class NoLiveAccess(Exception):
    """The fabric has no live access (it was imported from a file): a live discovery from this
    host would describe another fabric. The message is :data:`fabric.models.NO_LIVE_ACCESS`."""

    def __init__(self, fabric: Fabric) -> None:
        super().__init__(NO_LIVE_ACCESS.format(name=fabric.name))
        self.fabric = fabric


def request_discovery(fabric: Fabric, user: Any = None) -> str:
    """Queue a live discovery of ``fabric`` now, audited as ``fabric.discover`` by ``user``.

    Unlike the periodic discovery (``collectors.tools.is_live``), ``discovery_enabled`` is not
    needed: only live access (``Fabric.has_live_access``). The task is queued when the audit entry
    commits, under a task id chosen here so the entry can name it (Celery's ``task_id``; the
    embedded in-process worker ignores it).

    Returns:
        The task id (a UUID string), as written in the audit entry's ``changes["task_id"]``.

    Raises:
        NoLiveAccess: the fabric has no live access; nothing is written or queued.
        core.sites.SiteDown: the fabric's site has no live worker (503); nothing is written or queued.
    """
    if not fabric.has_live_access:
        raise NoLiveAccess(fabric)
    require_live(fabric.site, f"The discovery of fabric {fabric.name} was")
    task_id = str(uuid.uuid4())
    with transaction.atomic():
        audit.record("fabric.discover", fabric, {"task_id": task_id}, user=user)
        transaction.on_commit(functools.partial(_queue_discovery, fabric.pk, task_id))
    return task_id


def discover_new_fabric(fabric: Fabric, user: Any = None) -> str | None:
    """Queue the first discovery of a fabric just created (or given live access), so that it is
    not empty until the next periodic discovery (``WEFT_DISCOVERY_INTERVAL_S``): a
    :func:`request_discovery`, audited the same way, queued when the caller's transaction commits.
    Called by the API's create, the admin's add and ``fabric_lab --register``.

    Returns the task id, or None for a fabric without live access (one imported from a file) or
    whose site has no live worker yet (the fabric is created all the same; its ``system.site_down``
    alarm says why nothing runs, and the periodic discovery catches up once a worker reports).
    """
    if not fabric.has_live_access or fabric.site not in live_sites([fabric.site]):
        return None
    return request_discovery(fabric, user)


def _queue_discovery(fabric_id: int, task_id: str) -> None:
    enqueue.send("fabric.discover", fabric_id, task_id=task_id)  # fabric.tasks.discover_fabric_task


def import_upload(
    fabric_name: str, text: str, *, filename: str, user: Any = None, replace: bool = False
) -> Discovery:
    """Import an uploaded topology file into the fabric named ``fabric_name`` (created when
    missing), audited as ``fabric.import`` with the file name, the discovery id and the ingest
    summary; the import and its audit entry commit together. ``replace``: the file is the whole
    fabric (see :func:`fabric.services.ingest.import_topology_text`).

    Raises:
        fabric.parsers.records.TopologyParseError: the text is not a topology, or looks cut short
            (nothing written).
        fabric.services.ingest.ImportWouldRemove: too much would be removed without ``replace``.
    """
    with transaction.atomic():
        discovery = import_topology_text(
            fabric_name, text, filename=filename, source=DiscoverySource.UPLOAD, replace=replace
        )
        audit.record(
            "fabric.import",
            discovery.fabric,
            {"filename": filename, "discovery": discovery.pk, "summary": summary(discovery)},
            user=user,
        )
    return discovery


def set_node_name_map(
    fabric: Fabric, *, text: str | None = None, path: str | None = None, filename: str = "", user: Any = None
) -> dict[str, Any]:
    """Give ``fabric`` the node-name map ``text`` (uploaded) or ``path`` (a file on this server,
    read again at every discovery and import); neither (or both empty) removes the map. The map
    is parsed first (``fabric.parsers.node_name_map``): a bad one changes nothing. Then, in one
    transaction with the fabric locked: the map is stored, every stored node is renamed and its
    host re-derived (``fabric.services.names.rename_nodes``), and the change is audited as
    ``fabric.node_name_map`` (source, file name or path, entries, nodes renamed/re-hosted).

    Returns:
        ``{"entries": n, "renamed": n, "rehosted": n, "hosts_created": n}``.

    Raises:
        fabric.parsers.node_name_map.NodeNameMapError: bad lines, each located; nothing stored.
        fabric.services.names.MapUnreadable: ``path`` cannot be read; nothing stored.
        ValueError: both ``text`` and ``path`` given.
    """
    text = text or ""
    path = (path or "").strip()
    names = check_map(text, path, source=filename or "node-name map")
    with transaction.atomic():
        locked = Fabric.objects.select_for_update().get(pk=fabric.pk)
        before = {"source": _map_source(locked), "path": locked.node_name_map_path}
        locked.node_name_map = text
        locked.node_name_map_path = path
        locked.node_name_map_changed = timezone.now()
        locked.save(update_fields=["node_name_map", "node_name_map_path", "node_name_map_changed"])
        result = {"entries": len(names), **rename_nodes(locked, names)}
        audit.record(
            "fabric.node_name_map",
            locked,
            {"before": before, "source": _map_source(locked), "filename": filename, "path": path,
             "sha256": hashlib.sha256((text or path).encode()).hexdigest() if (text or path) else "",
             **result},
            user=user,
        )  # fmt: skip
    fabric.refresh_from_db()
    return result


def _map_source(fabric: Fabric) -> str:
    return "upload" if fabric.node_name_map else "path" if fabric.node_name_map_path else "none"

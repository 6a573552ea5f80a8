"""The notice listener's status per fabric, as the listener (``fabric.services.notices``) last
stored it in the cache: read by the SM service, the fabric API and ``manage.py listen_notices``."""

from __future__ import annotations

from django.core.cache import cache

#: seconds a stored status lives: a listener refreshes it well within (``NoticeListener``)
STATUS_TTL_S = 120


def status_key(fabric_id: int) -> str:
    return f"weft:notices:{fabric_id}"


def notice_status(fabric_id: int) -> dict | None:
    """The listener status of a fabric (``ListenerStatus.as_dict``), None when no listener
    reported within :data:`STATUS_TTL_S` (none runs, or the cache is down)."""
    try:
        return cache.get(status_key(fabric_id))
    except Exception:  # the cache backend is down: no status, never an error page
        return None

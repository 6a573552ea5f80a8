"""Which devices a poll takes: enabled, in the group, and due (``poll_interval_s`` since the last poll)."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from ..models import Device


def due_devices(group: int = 0, groups: int = 1, now=None, site: str | None = None) -> list[Device]:
    """Enabled devices with ``id % groups == group`` (and, with ``site``, of a fabric at that
    collector site, ``Fabric.site``) never polled or last polled at least their
    ``poll_interval_s`` ago (less half a beat tick, so a 60 s device polled on a 10 s beat is not
    pushed to 70 s by scheduling jitter), ordered by id."""
    from django.conf import settings

    now = now or timezone.now()
    slack = timedelta(seconds=settings.WEFT_SNMP_TICK_S / 2)
    out = []
    rows = Device.objects.filter(enabled=True).select_related("fabric").order_by("pk")
    if site is not None:
        rows = rows.filter(fabric__site=site)
    for d in rows:
        if d.pk % groups != group:
            continue
        if d.last_poll_at is None:
            out.append(d)
            continue
        try:
            next_at = d.last_poll_at + timedelta(seconds=d.poll_interval_s) - slack
        except OverflowError:  # an interval stored before the form capped it: never due again
            continue
        if next_at <= now:
            out.append(d)
    return out

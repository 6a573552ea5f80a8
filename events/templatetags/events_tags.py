"""Template tags of the events app: the alarms of a node or port (for the fabric pages)."""

from __future__ import annotations

from django import template
from django.db.models import Q

from ..health import CHECK_LABELS
from ..keys import port_key
from ..models import Alarm

register = template.Library()


def alarms_for(node=None, port=None, include_cleared: int = 10):
    """Open alarms of a node (its own, its ports', its links') or a port (its own, its link's),
    then the most recent ``include_cleared`` cleared ones."""
    if port is not None:
        key = port_key(port.node.node_guid, port.port_num)
        q = (
            Q(port=port)
            | Q(object_key=key)
            | Q(object_key__startswith=f"{key}-")
            | Q(object_key__endswith=f"-{key}")
        )
        fabric_id = port.node.fabric_id
    elif node is not None:
        guid = node.node_guid
        q = Q(node=node) | Q(port__node=node) | Q(object_key=guid) | Q(object_key__startswith=f"{guid}/")
        q |= Q(object_key__contains=f"-{guid}/")
        fabric_id = node.fabric_id
    else:
        return [], []
    qs = Alarm.objects.filter(q, fabric_id=fabric_id).select_related("acknowledged_by")
    return list(qs.open()[:100]), list(qs.filter(state="cleared").order_by("-cleared_at")[:include_cleared])


@register.inclusion_tag("events/_alarm_table.html", takes_context=True)
def object_alarms(context, node=None, port=None):
    open_alarms, cleared = alarms_for(node=node, port=port)
    return {"open_alarms": open_alarms, "cleared": cleared, "is_operator": context.get("is_operator"),
            "csrf_token": context.get("csrf_token")}  # fmt: skip


@register.filter
def check_label(code: str) -> str:
    """A health check's name for people (``events.health.CHECK_LABELS``); unknown codes as-is."""
    return CHECK_LABELS.get(code, code)

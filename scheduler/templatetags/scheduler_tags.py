"""Template tags of the scheduler app: the jobs whose routed paths cross a port (the port page),
the topology download form (the fabric page)."""

from __future__ import annotations

from django import template

from fabric.keys import port_key

from ..services.joblinks import jobs_on_ports

register = template.Library()


@register.inclusion_tag("scheduler/_port_jobs_table.html")
def port_jobs(port) -> dict:
    """``{"jobs": [...], "key"}`` for a ``fabric.Port``: ``joblinks.jobs_on_ports`` of its key
    (job, name, state, path count, estimated share of the port's traffic)."""
    key = port_key(port.node.node_guid, port.port_num)
    return {"jobs": jobs_on_ports([key]).get(key, []), "key": key}


@register.inclusion_tag("scheduler/_topology_export_form.html")
def topology_export_form(fabric) -> dict:
    """``{"fabric", "formats": [(format, label)]}`` for the fabric page's download form
    (``scheduler.export_views``)."""
    from ..export_views import FORMAT_LABELS

    return {"fabric": fabric, "formats": FORMAT_LABELS}

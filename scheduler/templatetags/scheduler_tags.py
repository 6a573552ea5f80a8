"""Template tags of the scheduler app: the jobs whose routed paths cross a port (the port page),
the topology download form (the fabric page)."""

from __future__ import annotations

from django import template

from fabric.keys import port_key

from ..services.joblinks import jobs_on_ports

register = template.Library()


@register.inclusion_tag("scheduler/_port_jobs_table.html", takes_context=True)
def port_jobs(context, port) -> dict:
    """``{"jobs": [...], "key"}`` for a ``fabric.Port``: ``joblinks.jobs_on_ports`` of its key
    (job, name, state, path count, estimated share of the port's traffic), the jobs the page's
    reader may read (a job page another tenant's member cannot open is not linked)."""
    key = port_key(port.node.node_guid, port.port_num)
    request = context.get("request")
    user = getattr(request, "user", None)
    return {"jobs": jobs_on_ports([key], user).get(key, []), "key": key}


@register.inclusion_tag("scheduler/_topology_export_form.html")
def topology_export_form(fabric) -> dict:
    """``{"fabric", "formats": [(format, label)]}`` for the fabric page's download form
    (``scheduler.export_views``)."""
    from ..export_views import FORMAT_LABELS

    return {"fabric": fabric, "formats": FORMAT_LABELS}

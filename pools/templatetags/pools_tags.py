"""Template tags of the pools app: the dashboard's pool-usage card (``pools/_dashboard_pools.html``,
which the events dashboard includes when it exists)."""

from __future__ import annotations

from django import template

from .. import access
from ..models import Pool
from ..views import BAR_WIDTH, pool_rows

register = template.Library()


@register.inclusion_tag("pools/_pool_usage_card.html", takes_context=True)
def pool_usage(context) -> dict:
    """Per pool the user may see (``pools.access.scope_pools``: their tenants' and the shared
    ones; every pool for an Admin): held, borrowed and free GPUs and the bar of the pool list."""
    request = context.get("request")
    user = getattr(request, "user", None)
    pools = (
        access.scope_pools(Pool.objects.select_related("tenant", "fabric"), user)
        if user
        else Pool.objects.none()
    )
    return {"rows": pool_rows(pools), "bar_width": BAR_WIDTH, "is_admin": context.get("is_admin")}

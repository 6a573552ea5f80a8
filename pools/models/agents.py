"""Host agents' API tokens bound to the hosts they report for (``pools.services.agents``).

A token is an ``accounts.ApiToken``; the binding is the pools app's (it is about host reports),
so the accounts app does not know of it. Deleting the token or the host deletes the binding.
"""

from __future__ import annotations

from django.db import models

from accounts.models import ApiToken
from fabric.models import Host

from ..choices import BindingVia


class AgentBinding(models.Model):
    """``token`` may post host reports (``POST /api/pools/agent/``) for ``host``; a token with
    bindings may report for those hosts only. ``via``: an Admin, or the token's first report."""

    token = models.ForeignKey(ApiToken, on_delete=models.CASCADE, related_name="agent_bindings")
    host = models.ForeignKey(Host, on_delete=models.CASCADE, related_name="agent_bindings")
    via = models.CharField(max_length=12, choices=BindingVia.choices)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["token", "host"]
        constraints = [models.UniqueConstraint(fields=["token", "host"], name="agent_binding_unique")]

    def __str__(self) -> str:
        return f"{self.token} → {self.host}"

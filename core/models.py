"""The kernel's one table: leadership leases of the singleton roles (``core.leases``)."""

from __future__ import annotations

from django.db import models


class Lease(models.Model):
    """Who leads a singleton role (``beat``, ``notices:<fabric id>``, ``snmp_traps``) until when.

    Written only by :class:`core.leases.Lease` with one atomic statement (take over when
    ``expires_at`` has passed, renew when ``holder`` is the caller); ``fencing`` grows by one at every
    take-over by another holder. The row is the role's heartbeat too: ``renewed_at`` is the leader's
    last renewal, and a role whose ``expires_at`` has passed has no live instance
    (``core.leases.role_states``).
    """

    role = models.CharField(max_length=200, primary_key=True)
    holder = models.CharField(max_length=200, help_text="host:pid:random of the leader")
    fencing = models.BigIntegerField(default=1, help_text="take-over count (fencing number)")
    acquired_at = models.DateTimeField(help_text="when this holder took the role")
    renewed_at = models.DateTimeField(help_text="the holder's last renewal (its heartbeat)")
    expires_at = models.DateTimeField(help_text="another instance may take over after this")

    class Meta:
        ordering = ["role"]

    def __str__(self) -> str:
        return f"{self.role} held by {self.holder} (fencing {self.fencing})"

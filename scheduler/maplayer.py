"""What the scheduler adds to a fabric's network map (``fabric.api.maplayout.register_overlay``,
from ``SchedulerConfig.ready``): its locality domains, which the map draws as groups."""

from __future__ import annotations

from fabric.api.maplayout import register_overlay

from .locality import Domain
from .topology import build_locality


def domains(fabric) -> list[Domain]:
    """The locality domains of ``fabric`` (``scheduler.topology.build_locality``)."""
    return [d for d in build_locality([fabric]).domains.values() if d.fabric_id == fabric.pk]


def register() -> None:
    """Register the overlay above on the map (idempotent)."""
    register_overlay("domains", domains)

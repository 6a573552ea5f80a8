"""What the scheduler adds to a fabric's network map (``fabric.api.maplayout.register_overlay``,
from ``SchedulerConfig.ready``): its locality domains, which the map draws as groups, and the jobs
crossing the cables of the link panel (the job→links index, ``services.joblinks``)."""

from __future__ import annotations

from fabric.api.maplayout import register_overlay

from .locality import Domain
from .services.joblinks import jobs_on_ports
from .topology import build_locality


def domains(fabric) -> list[Domain]:
    """The locality domains of ``fabric`` (``scheduler.topology.build_locality``)."""
    return [d for d in build_locality([fabric]).domains.values() if d.fabric_id == fabric.pk]


def edge_jobs(fabric, keys: list[str], user=None) -> dict[str, list[dict]]:
    """The jobs whose routed paths leave by the ports ``keys`` of ``fabric`` (port keys), with
    their estimated share (``joblinks.jobs_on_ports``), those ``user`` may read; the link panel
    asks it for the cables of one edge only."""
    return jobs_on_ports(keys, user)


def register() -> None:
    """Register the overlays above on the map (idempotent)."""
    register_overlay("domains", domains)
    register_overlay("edge_jobs", edge_jobs)

"""The counter state a sweep starts from: each port's raw values, width, sample time and staleness
as the fabric's latest sweep stored them, cached per process (by the fabric's id and creation
time and the id of that sweep) and handed over by the sweep that writes the next one."""

from __future__ import annotations

import threading

from fabric.models import Fabric

from ...models import PortCounters, Sweep
from .store import RAW
from .targets import identity

_lock = threading.Lock()
_state_cache: dict[tuple[int, str], tuple[tuple, int, dict[int, tuple]]] = {}


def previous_state(
    fabric: Fabric, mech: str, port_ids: list[int], ident: tuple | None = None
) -> dict[int, tuple]:
    """``{port_id: (raw values tuple, extended, sampled_at epoch, stale)}`` of the last sweep."""
    ident = (ident or identity(fabric))[:2]
    latest = (
        Sweep.objects.filter(fabric=fabric).order_by("-started", "-id").values_list("id", flat=True).first()
    )
    with _lock:
        hit = _state_cache.get((fabric.pk, mech))
    if hit and latest is not None and hit[0] == ident and hit[1] == latest:
        return hit[2]
    state: dict[int, tuple] = {}
    wanted = set(port_ids)
    rows = PortCounters.objects.filter(port__node__fabric=fabric).values_list(
        "port_id", *RAW, "extended", "sampled_at", "stale"
    )
    for row in rows.iterator(chunk_size=5000):
        if row[0] not in wanted:
            continue
        sampled = row[-2]
        state[row[0]] = (tuple(row[1:17]), row[17], sampled.timestamp() if sampled else None, row[19])
    return state


def remember_state(
    fabric_id: int, mechanism: str, owner: tuple, sweep_id: int, state: dict[int, tuple]
) -> None:
    """Keep the state a committed sweep ``sweep_id`` of ``mechanism`` left (``{port_id: (raw values
    tuple, extended, sampled_at epoch, stale)}``) for the next sweep of the fabric; ``owner`` the
    fabric's ``identity()[:2]`` (its id and creation time)."""
    with _lock:
        _state_cache[(fabric_id, mechanism)] = (owner, sweep_id, state)

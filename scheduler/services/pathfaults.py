"""The ``paths`` reason source (``scheduler.services.faults``): causes on the links a job's
traffic crosses, read from the job→links index (``scheduler.JobLink``, written by
``scheduler.services.joblinks`` from the routes).

* ``path_link_down`` — an open ``link.down`` alarm on a link one of whose two directed ports
  (either end's egress) the job's paths cross, not a link of its own HCAs (those are the ``hca``
  source's ``hca_link_down``); ``object_type`` ``link``, the link key; a failing
  cause (``faults.FAILING_CODES``: ``on_fault`` acts);
* ``path_congested`` — an open ``port.congestion`` alarm (the counter rule raises it after its
  policy's ``consecutive`` sweeps over its ``threshold``, ``events.rules``) on a port the job's
  paths leave by; ``"approximation": "routes"``, with the job's path count on it.

A job without index rows whose fabric has no routes read yet gets the approximate causes of the
built-in ``congestion`` source (its HCA links and its leaves' uplinks), which this source
replaces: one source answers ``path_congested`` for every job.
"""

from __future__ import annotations

from collections import defaultdict

from events.models import Alarm
from fabric.keys import port_key, split_link_key
from routing.models import RoutingSnapshot

from ..models import JobLink
from .faults import SOURCES, CongestionSource, JobScope, Reason, register_source


class PathSource:
    """``path_link_down`` / ``path_congested`` over the job's routed paths (module docstring)."""

    name = "paths"
    codes = ("path_link_down", "path_congested")
    triggers = ("link.down", "port.congestion")

    def __init__(self) -> None:
        self._fallback = CongestionSource()

    def reasons(self, scopes: list[JobScope]) -> dict[int, list[Reason]]:
        ids = [s.job_id for s in scopes]
        ports: dict[int, dict[str, int]] = defaultdict(dict)  # job → port key → paths
        for jid, k, n in JobLink.objects.filter(job_id__in=ids).values_list("job_id", "port_key", "paths"):
            ports[jid][k] = ports[jid].get(k, 0) + n
        out: dict[int, list[Reason]] = {}
        routed = set(
            RoutingSnapshot.objects.filter(
                fabric_id__in={
                    h.fabric_id for s in scopes for hcas in s.hosts.values() for h in hcas if h.fabric_id
                }
            ).values_list("fabric_id", flat=True)
        )
        # no rows because its fabric has no routes yet (not: a one-host job, no pair to route)
        unrouted = [
            s for s in scopes if s.job_id not in ports
            and not any(h.fabric_id in routed for hcas in s.hosts.values() for h in hcas)
        ]  # fmt: skip
        if unrouted:
            out.update(self._fallback.reasons(unrouted))
        if not ports:
            return out
        down = []
        for pk, key, text in (
            Alarm.objects.open().filter(code="link.down").values_list("pk", "object_key", "object_repr")
        ):
            try:
                ends = split_link_key(key)
            except ValueError:
                continue
            down.append((pk, key, text, [port_key(*e) for e in ends], {g for g, _ in ends}))
        hot = list(
            Alarm.objects.open()
            .filter(code="port.congestion")
            .values_list("pk", "object_key", "object_repr", "message")
        )
        hcas = {s.job_id: set(s.hca_by_guid()) for s in scopes}
        for jid, mine in ports.items():
            found = []
            for pk, key, text, ends, guids in down:
                if guids & hcas.get(jid, set()):
                    continue  # its own HCA's link: the hca source's hca_link_down
                n = sum(mine.get(e, 0) for e in ends)
                if n:
                    found.append(Reason("path_link_down", "link", key,
                                        f"a link on its paths is down: {text or key} ({n} paths)", "",
                                        {"alarm": pk, "paths": n, "approximation": "routes"}))  # fmt: skip
            for pk, key, text, message in hot:
                if key in mine:
                    found.append(Reason("path_congested", "port", key,
                                        f"congested on its paths: {text or key} ({message}; {mine[key]} paths)", "",
                                        {"alarm": pk, "paths": mine[key], "approximation": "routes"}))  # fmt: skip
            if found:
                out[jid] = found
        return out


def register() -> None:
    """Register :class:`PathSource` in place of the approximate ``congestion`` source
    (``SchedulerConfig.ready()``)."""
    SOURCES.pop("congestion", None)
    register_source(PathSource())

"""The catalogue of event types Weft knows, with the default policy of each.

An admin edits the policy of a type (``EventPolicy``); the values here are what a fresh Weft
ships with, chosen as a fabric admin expects from UFM-class tools: a link going down is
Critical and pages on-call, a node appearing is only logged, counter conditions raise Minor
alarms that clear themselves when the counters calm down.

Each type has a stable dotted ``code``. Alarms are keyed by ``(fabric, code, object_key)``; an
event whose type lists ``clears`` closes the open alarms of those codes on the same object key
(``clear_scope="key"``) or on the whole fabric (``clear_scope="fabric"``, e.g. any new SM master
clears "SM master lost").

Thresholds and their units:

* ``port.symbol_errors``/``port.rcv_errors``: errors per minute over one sweep interval
  (delta of SymbolErrorCounter/PortRcvErrors, IBTA Vol 1 16.1.3.5, divided by the interval);
* ``port.link_downed``: LinkDownedCounter delta per sweep (raise when the delta is above it);
* ``port.congestion``: the telemetry congestion index (0..1), for ``consecutive`` sweeps.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .models import Category, Severity


@dataclass(frozen=True)
class EventType:
    """One event type and its default policy.

    ``threshold``/``consecutive`` only mean something for condition types evaluated by the rules
    engine (counters, health); ``ttl_s`` = 0 keeps an alarm until it is cleared, otherwise the
    alarm clears itself ``ttl_s`` seconds after it was last raised.
    """

    code: str
    name: str
    category: str
    severity: str
    raise_alarm: bool = False
    email: bool = False
    notify_clear: bool = True
    ttl_s: int = 0
    threshold: float | None = None
    threshold_unit: str = ""
    consecutive: int = 1
    clears: tuple[str, ...] = field(default_factory=tuple)
    clear_scope: str = "key"
    description: str = ""


T, C, S, H, SYS = Category.TOPOLOGY, Category.COUNTERS, Category.SM, Category.HEALTH, Category.SYSTEM
IN, W, MI, CR = Severity.INFO, Severity.WARNING, Severity.MINOR, Severity.CRITICAL

CATALOG: dict[str, EventType] = {
    t.code: t
    for t in [
        # Topology (written by the discovery ingest, fabric.services).
        EventType("link.down", "Link down", T, CR, raise_alarm=True, email=True,
                  description="A cable between two ports disappeared (port went down or was unplugged)."),
        EventType("link.up", "Link up", T, IN, clears=("link.down", "link.degraded"),
                  description="A link appeared or came back."),
        EventType("link.degraded", "Link below capability", T, MI, raise_alarm=True, email=True,
                  description="Link width or speed changed or runs below what both ends support."),
        EventType("port.state_changed", "Port state changed", T, W,
                  description="PortInfo:PortState changed (Down/Init/Armed/Active)."),
        EventType("node.added", "Node added", T, IN, clears=("node.removed",),
                  description="A switch or CA appeared on the fabric."),
        EventType("node.removed", "Node removed", T, MI, raise_alarm=True, email=True,
                  description="A switch or CA is no longer seen on the fabric."),
        EventType("port.lid_changed", "Port LID changed", T, W, description="A CA port got a new LID."),
        EventType("node.lid_changed", "Switch LID changed", T, W, description="A switch got a new LID."),
        EventType("node.description_changed", "Node description changed", T, IN),
        # Subnet manager (SM watch and discovery).
        EventType("sm.master_changed", "SM master changed", S, W, raise_alarm=True, email=True, ttl_s=3600,
                  clears=("sm.master_lost",), clear_scope="fabric",
                  description="Another SM became master (failover or handover)."),
        EventType("sm.master_lost", "SM master lost", S, CR, raise_alarm=True, email=True,
                  description="No SM answers as master: the subnet is not managed."),
        EventType("sm.master_found", "SM master found", S, IN, clears=("sm.master_lost",), clear_scope="fabric"),
        # Port counters (rules engine, after every sweep).
        EventType("port.link_downed", "Link downed", C, MI, raise_alarm=True, email=True, ttl_s=3600,
                  threshold=0, threshold_unit="LinkDownedCounter delta per sweep",
                  description="LinkDownedCounter rose: the link retrained or went down and up."),
        EventType("port.symbol_errors", "Symbol errors", C, MI, raise_alarm=True, email=True,
                  threshold=10, threshold_unit="errors/min",
                  description="SymbolErrorCounter rate above threshold (bad cable or transceiver)."),
        EventType("port.symbol_errors_cleared", "Symbol errors cleared", C, IN, clears=("port.symbol_errors",)),
        EventType("port.rcv_errors", "Receive errors", C, MI, raise_alarm=True, email=True,
                  threshold=10, threshold_unit="errors/min",
                  description="PortRcvErrors rate above threshold."),
        EventType("port.rcv_errors_cleared", "Receive errors cleared", C, IN, clears=("port.rcv_errors",)),
        EventType("port.congestion", "Congestion", C, W, raise_alarm=True, email=False,
                  threshold=0.5, threshold_unit="congestion index (0..1)", consecutive=3,
                  description="Congestion index above threshold for N consecutive sweeps."),
        EventType("port.congestion_cleared", "Congestion cleared", C, IN, clears=("port.congestion",)),
        EventType("port.counters_saturated", "Counters saturated", C, W, raise_alarm=True,
                  description="32-bit counters stuck at their maximum: rates cannot be computed; reset them."),
        EventType("port.counters_saturated_cleared", "Counters no longer saturated", C, IN,
                  clears=("port.counters_saturated",)),
        EventType("fabric.ports_stale", "Stale ports after sweep", C, W, raise_alarm=True,
                  threshold=0, threshold_unit="stale ports per sweep",
                  description="Ports whose counters could not be read in the last sweep."),
        EventType("fabric.ports_stale_cleared", "No stale ports", C, IN, clears=("fabric.ports_stale",)),
        # Health (rules engine after every discovery, and the health report).
        EventType("health.duplicate_guid", "Duplicate GUID", H, CR, raise_alarm=True, email=True,
                  description="The same port GUID is used by two ports."),
        EventType("health.duplicate_guid_cleared", "Duplicate GUID resolved", H, IN,
                  clears=("health.duplicate_guid",)),
        EventType("health.duplicate_lid", "Duplicate LID", H, CR, raise_alarm=True, email=True,
                  description="The same LID is assigned to two ports."),
        EventType("health.duplicate_lid_cleared", "Duplicate LID resolved", H, IN,
                  clears=("health.duplicate_lid",)),
        EventType("health.invalid_lid", "Active port without valid LID", H, MI, raise_alarm=True,
                  description="An Active port has LID 0 or 65535 (0xffff)."),
        EventType("health.invalid_lid_cleared", "Port LID valid", H, IN, clears=("health.invalid_lid",)),
        # System.
        EventType("system.poller_failing", "Counter poller failing", SYS, MI, raise_alarm=True, email=True,
                  description="The last counter sweep of a fabric failed."),
        EventType("system.poller_recovered", "Counter poller recovered", SYS, IN,
                  clears=("system.poller_failing",), clear_scope="fabric"),
        EventType("system.discovery_failing", "Discovery failing", SYS, MI, raise_alarm=True, email=True,
                  description="The last live discovery of a fabric failed."),
        EventType("system.discovery_recovered", "Discovery recovered", SYS, IN,
                  clears=("system.discovery_failing",), clear_scope="fabric"),
    ]
}  # fmt: skip


def event_type(code: str) -> EventType:
    """Return the catalogue entry of ``code``, or an Info, event-only type for unknown codes
    (other apps may write codes this catalogue does not list yet)."""
    known = CATALOG.get(code)
    if known is not None:
        return known
    return EventType(code, code.replace(".", " ").replace("_", " ").capitalize(), SYS, IN)


def clearing_codes(code: str) -> list[str]:
    """Codes of the events that clear alarms of ``code`` (inverse of ``clears``)."""
    return [t.code for t in CATALOG.values() if code in t.clears]

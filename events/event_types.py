"""Event types the events app's own rules write (registered in ``EventsConfig.ready()``).

Counter types come from ``events.rules.counters`` after every sweep, health types from
``events.rules.topology`` after every discovery, poller types from the sweep status.

Thresholds and their units:

* ``port.symbol_errors``/``port.rcv_errors``: errors per minute over one sweep interval
  (delta of SymbolErrorCounter/PortRcvErrors, IBTA Vol 1 16.1.3.5, divided by the interval);
* ``port.link_downed``: LinkDownedCounter delta per sweep (raise when the delta is above it);

Every counter rule clears only after ``WEFT_COUNTER_CLEAR_SWEEPS`` (default 3) sweeps in a row
without its condition (its policy's ``clear_consecutive``), so a steady error rate that misses a
sweep now and then gives one alarm, not one per burst;
* ``port.congestion``: the telemetry congestion index (0..1), for ``consecutive`` sweeps;
* ``fabric.ports_stale``: ports whose counters could not be read in one sweep.
"""

from django.conf import settings

from .choices import Category, ClearScope, Severity
from .registry import EventType

C, H, SYS = Category.COUNTERS, Category.HEALTH, Category.SYSTEM
IN, W, MI, CR = Severity.INFO, Severity.WARNING, Severity.MINOR, Severity.CRITICAL
#: every counter rule clears only after this many quiet sweeps in a row (hysteresis: a steady but
#: bursty error rate gives one alarm, not one per burst)
QUIET = settings.WEFT_COUNTER_CLEAR_SWEEPS

EVENT_TYPES = [
    EventType("port.link_downed", "Link went down and up (LinkDownedCounter)", C, MI, raise_alarm=True,
              email=True, threshold=0, threshold_unit="LinkDownedCounter delta per sweep", clear_consecutive=QUIET,
              description="LinkDownedCounter rose: the link retrained or went down and came back up (a flapping "
                          "link, not congestion). Clears after WEFT_COUNTER_CLEAR_SWEEPS sweeps without a rise."),
    EventType("port.link_downed_cleared", "Link stable again (LinkDownedCounter)", C, IN,
              clears=("port.link_downed",)),
    EventType("port.symbol_errors", "Symbol errors", C, MI, raise_alarm=True, email=True,
              threshold=10, threshold_unit="errors/min", clear_consecutive=QUIET,
              description="SymbolErrorCounter rate above threshold (bad cable or transceiver)."),
    EventType("port.symbol_errors_cleared", "Symbol errors cleared", C, IN, clears=("port.symbol_errors",)),
    EventType("port.rcv_errors", "Receive errors", C, MI, raise_alarm=True, email=True,
              threshold=10, threshold_unit="errors/min", clear_consecutive=QUIET,
              description="PortRcvErrors rate above threshold."),
    EventType("port.rcv_errors_cleared", "Receive errors cleared", C, IN, clears=("port.rcv_errors",)),
    EventType("port.congestion", "Congestion", C, W, raise_alarm=True, email=False,
              threshold=0.5, threshold_unit="congestion index (0..1)", consecutive=3,
              clear_consecutive=QUIET, clear_factor=0.8,
              description="Congestion index above threshold for N consecutive sweeps; it clears after "
                          "clear_consecutive sweeps at or below threshold × clear_factor (hysteresis: "
                          "an index hovering at the threshold does not raise and clear every few sweeps)."),
    EventType("port.congestion_cleared", "Congestion cleared", C, IN, clears=("port.congestion",)),
    EventType("port.counters_saturated", "Counters saturated", C, W, raise_alarm=True, clear_consecutive=QUIET,
              description="32-bit counters stuck at their maximum: rates cannot be computed; reset them."),
    EventType("port.counters_saturated_cleared", "Counters no longer saturated", C, IN,
              clears=("port.counters_saturated",)),
    EventType("fabric.ports_stale", "Stale ports after sweep", C, W, raise_alarm=True,
              threshold=0, threshold_unit="stale ports per sweep",
              description="Ports whose counters could not be read in the last sweep."),
    EventType("fabric.ports_stale_cleared", "No stale ports", C, IN, clears=("fabric.ports_stale",)),
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
    EventType("system.poller_failing", "Counter poller failing", SYS, MI, raise_alarm=True, email=True,
              description="The last counter sweep of a fabric failed."),
    EventType("system.poller_recovered", "Counter poller recovered", SYS, IN,
              clears=("system.poller_failing",), clear_scope=ClearScope.FABRIC),
    EventType("system.role_down", "Role down", SYS, CR, raise_alarm=True, email=True,
              description="A singleton role (beat, the notice listener of a fabric, the SNMP trap "
                          "receiver) has no live instance: its lease (core.leases) expired more than "
                          "WEFT_LEASE_TTL_S ago and no standby took over (events.roles)."),
    EventType("system.role_up", "Role up", SYS, IN, clears=("system.role_down",)),
    EventType("system.site_down", "Site has no live worker", SYS, CR, raise_alarm=True, email=True,
              description="No Celery worker consumes the fabric's collector site queue (core.sites: its "
                          "workers' heartbeats lapsed more than WEFT_LEASE_TTL_S ago): the fabric's "
                          "discoveries, sweeps, applies and port actions are refused (503) or skipped "
                          "(events.roles.check_sites)."),
    EventType("system.site_up", "Site has a live worker", SYS, IN, clears=("system.site_down",)),
]  # fmt: skip

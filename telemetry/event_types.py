"""Event types the telemetry app writes (registered in ``TelemetryConfig.ready()``; see
``events.registry``): the poller watchdog's (``telemetry.services.watchdog``). The types about what
a sweep read (counters, stale ports, a failed sweep) are the events app's rules'
(``events/event_types.py``).
"""

from events.choices import Category, ClearScope, Severity
from events.registry import EventType

SYS = Category.SYSTEM
IN, MI = Severity.INFO, Severity.MINOR

EVENT_TYPES = [
    EventType("system.poller_stalled", "Counter poller stalled", SYS, MI, raise_alarm=True, email=True,
              description="No counter sweep of a fabric finished for WEFT_STALL_INTERVALS poll intervals "
                          "plus the collector budget (WEFT_TOOL_TIMEOUT_S): no worker or beat runs the "
                          "sweeps, or their lock is held (see the README)."),
    EventType("system.poller_resumed", "Counter poller resumed", SYS, IN,
              clears=("system.poller_stalled",), clear_scope=ClearScope.FABRIC),
]  # fmt: skip

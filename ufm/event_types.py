"""Event types the UFM-compatible API writes (registered in ``UfmConfig.ready()``).

``ufm.services.set_port_health`` writes them when a client isolates a switch port (UFM's
"unhealthy ports" with action ``isolate``: the port is disabled in the fabric) and when it marks
it healthy again (re-enabled). The object is the port (key ``"<node guid>/<port>"``), so the alarm
sits on the port; the link's own ``link.down``/``link.up`` come from the topology ingest.
"""

from events.choices import Category, Severity
from events.registry import EventType

T = Category.TOPOLOGY

EVENT_TYPES = [
    EventType("port.isolated", "Port isolated", T, Severity.MINOR, raise_alarm=True,
              description="A client of the UFM-compatible API marked a switch port unhealthy: Weft "
                          "disabled it (ibportstate disable), so no traffic crosses its link until "
                          "it is marked healthy."),
    EventType("port.isolation_cleared", "Port no longer isolated", T, Severity.INFO,
              clears=("port.isolated",),
              description="A port isolated through the UFM-compatible API was marked healthy and "
                          "enabled again (ibportstate enable); the link trains and the SM brings it up."),
]  # fmt: skip

"""Event types the routing app writes (registered in ``RoutingConfig.ready()``; see
``events.registry``).

``routing.changed`` comes from the routes service (``routing.services.collect``) when a read of
the switches' forwarding tables differs from the previous one: the SM re-routed (after a link
change, an SM hand-over, or a new sweep). Its message and details say how many destination LIDs
moved (their LFT entry now names another out port) on which switches. Not raised as an alarm:
a re-route is the SM doing its job; the link or SM event that caused it has its own alarm.
"""

from events.choices import Category, Severity
from events.registry import EventType

EVENT_TYPES = [
    EventType("routing.changed", "Routes changed", Category.SM, Severity.INFO,
              description="The SM re-routed: destination LIDs moved to other out ports on some switches "
                          "(details: moved LIDs per switch)."),
]  # fmt: skip

"""Event types the devices app writes (registered in ``DevicesConfig.ready()``; see ``events.registry``).

Object keys: a device is ``<device name>``; an interface ``<device>/<ifName>``; a sensor
``<device>/sensor/<entPhysicalIndex>``; an LLDP link ``<device>/<local port>-<remote>/<remote
port>`` (remote = the neighbour's sysName, else its chassis id). Alarms are kept under the
device's fabric (``Device.fabric``), like an IB switch's under its subnet.

Writers: the poll service (``devices.services.poll``) writes reachability, interface state,
LLDP links and the condition rules (``devices.services.rules``: discards, errors, congestion,
temperature, failed fans/PSUs); the trap receiver (``devices.services.traps``) writes
``device.interface_down``/``up`` for linkDown/linkUp traps, and ``device.trap`` for the rest.
A link-down trap raises the same alarm as a poll that finds the interface down: one alarm per
interface, Critical and mailed like an IB ``link.down``, cleared by whichever sees it up first.
"""

from events.choices import Category, Severity
from events.registry import EventType

D = Category.DEVICES
IN, W, MI, CR = Severity.INFO, Severity.WARNING, Severity.MINOR, Severity.CRITICAL

EVENT_TYPES = [
    EventType("device.identified", "Device identified", D, IN,
              description="First contact with a device, or its sysObjectID, model or serial changed."),
    EventType("device.unreachable", "Device unreachable", D, MI, raise_alarm=True, email=True,
              description="The device did not answer SNMP within its timeout and retries (or its "
                          "poll budget); the other devices' polls go on."),
    EventType("device.auth_failed", "SNMP credentials refused", D, MI, raise_alarm=True, email=True,
              description="The device refused the SNMPv3 user, keys or protocols (wrong digest, "
                          "unknown user, decryption error), or a stored credential cannot be decrypted."),
    EventType("device.reachable", "Device reachable", D, IN,
              clears=("device.unreachable", "device.auth_failed"),
              description="A device that was unreachable or refused the credentials answered a poll."),
    EventType("device.interface_down", "Interface down", D, CR, raise_alarm=True, email=True,
              description="An interface that is administratively up is operationally down (a poll "
                          "or a linkDown trap saw it): the Ethernet counterpart of an IB link.down."),
    EventType("device.interface_up", "Interface up", D, IN, clears=("device.interface_down",),
              description="An interface reported down is up again (poll or linkUp trap), or was "
                          "shut down on purpose (admin down)."),
    EventType("device.link_up", "Ethernet link up", D, IN, clears=("device.link_down",),
              description="LLDP shows a new neighbour on an interface (a cable to a switch or host)."),
    EventType("device.link_down", "Ethernet link down", D, MI, raise_alarm=True, email=True,
              description="An LLDP neighbour is no longer seen on the interface it was on."),
    EventType("device.interface_discards", "Interface discards", D, W, raise_alarm=True,
              threshold=100, threshold_unit="discards/min (in + out)",
              description="ifInDiscards + ifOutDiscards rate above threshold (buffers overflowing)."),
    EventType("device.interface_discards_cleared", "Interface discards cleared", D, IN,
              clears=("device.interface_discards",)),
    EventType("device.interface_errors", "Interface errors", D, MI, raise_alarm=True, email=True,
              threshold=10, threshold_unit="errors/min (in + out)",
              description="ifInErrors + ifOutErrors rate above threshold (bad cable, optic or FEC)."),
    EventType("device.interface_errors_cleared", "Interface errors cleared", D, IN,
              clears=("device.interface_errors",)),
    EventType("device.congestion", "Ethernet congestion", D, W, raise_alarm=True,
              threshold=0.5, threshold_unit="congestion signal (0..1)", consecutive=3,
              clear_consecutive=3, clear_factor=0.8,
              description="PFC pause share (or egress discard share without PFC counters) above "
                          "threshold for N consecutive polls (telemetry.semantics.derive_wrapping)."),
    EventType("device.congestion_cleared", "Ethernet congestion cleared", D, IN, clears=("device.congestion",)),
    EventType("device.temperature_high", "Temperature high", D, MI, raise_alarm=True, email=True,
              threshold=80, threshold_unit="°C", clear_factor=0.95,
              description="A temperature sensor reads above threshold."),
    EventType("device.temperature_cleared", "Temperature normal", D, IN, clears=("device.temperature_high",)),
    EventType("device.sensor_failed", "Fan or PSU failed", D, MI, raise_alarm=True, email=True,
              description="A fan or power-supply sensor reports nonoperational (ENTITY-SENSOR-MIB)."),
    EventType("device.sensor_ok", "Fan or PSU back", D, IN, clears=("device.sensor_failed",)),
    EventType("device.trap", "SNMP trap", D, IN,
              description="A trap from a managed device other than linkDown/linkUp (its OID and "
                          "varbinds in the details)."),
]  # fmt: skip

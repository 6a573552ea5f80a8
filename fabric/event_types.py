"""Event types the fabric app writes (registered in ``FabricConfig.ready()``; see
``events.registry``).

Topology types come from the discovery ingest (``fabric.services.ingest``, also for the targeted
port refreshes after SM notices), ``port.error_trap`` from the notice listener
(``fabric.services.notices``), the ``sm.*`` types
from the SM service (``fabric.services.sm``), the ``topology.mismatch``/``matches`` types from the
reference compare (``fabric.services.reference``), the ``partition.*`` types from the partitions service
(``fabric.services.partitions``), the ``system.discovery_*`` types from the live
discovery service (``fabric.services.discovery``) and its watchdog (``fabric.services.watchdog``). Defaults are what a fabric admin expects from
a UFM-class tool: a link going down is Critical and mails on-call, a node appearing is only logged.
"""

from events.choices import Category, ClearScope, Severity
from events.registry import EventType

T, S, SYS = Category.TOPOLOGY, Category.SM, Category.SYSTEM
IN, W, MI, CR = Severity.INFO, Severity.WARNING, Severity.MINOR, Severity.CRITICAL

EVENT_TYPES = [
    EventType("fabric.discovered", "Fabric discovered", T, IN,
              description="The first discovery or import of an empty fabric (one event with the counts)."),
    EventType("link.down", "Link down", T, CR, raise_alarm=True, email=True,
              description="A cable between two ports disappeared (port went down or was unplugged)."),
    EventType("port.isolated", "Port isolated", T, IN, raise_alarm=True,
              description="A switch port was isolated on purpose (disabled with ibportstate from the port "
                          "page or through the UFM-compatible API's unhealthy ports): its link's loss is "
                          "expected, so no link.down is written for it until it is enabled again. "
                          "fabric.services.isolation writes it."),
    EventType("port.isolation_cleared", "Port no longer isolated", T, IN, clears=("port.isolated",),
              description="An isolated port was enabled again (port page Enable, or marked healthy through "
                          "the UFM-compatible API); the link trains and the SM brings it up."),
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
    EventType("port.error_trap", "Port error trap", T, W,
              description="The SM forwarded a switch trap for this port: 129 local link integrity, "
                          "130 excessive buffer overrun or 131 flow-control update watchdog."),
    EventType("node.lid_changed", "Switch LID changed", T, W, description="A switch got a new LID."),
    EventType("node.description_changed", "Node description changed", T, IN),
    EventType("sm.master_changed", "SM master changed", S, W, raise_alarm=True, email=True, ttl_s=3600,
              clears=("sm.master_lost",), clear_scope=ClearScope.FABRIC,
              description="Another SM became master (failover or handover)."),
    EventType("sm.master_lost", "SM master lost", S, CR, raise_alarm=True, email=True,
              threshold_unit="unanswered SM polls", consecutive=1,
              description="No SM answers as master: the subnet is not managed."),
    EventType("sm.master_found", "SM master found", S, IN, clears=("sm.master_lost",),
              clear_scope=ClearScope.FABRIC),
    EventType("sm.unreachable", "SM not reachable from this host", S, MI, raise_alarm=True, email=True,
              description="sminfo never reached the subnet (it hung and was killed, or the local port "
                          "could not be opened): the SM's state is unknown, which is not a lost master."),
    EventType("sm.reachable", "SM reachable again", S, IN, clears=("sm.unreachable",),
              clear_scope=ClearScope.FABRIC),
    EventType("system.discovery_failing", "Discovery failing", SYS, MI, raise_alarm=True, email=True,
              description="The last live discovery of a fabric failed."),
    EventType("system.discovery_recovered", "Discovery recovered", SYS, IN,
              clears=("system.discovery_failing",), clear_scope=ClearScope.FABRIC),
    EventType("system.discovery_stalled", "Discovery stalled", SYS, MI, raise_alarm=True, email=True,
              description="No live discovery of a fabric finished for WEFT_STALL_INTERVALS discovery "
                          "intervals plus its timeout: no worker or beat runs it (see the README)."),
    EventType("system.discovery_resumed", "Discovery resumed", SYS, IN,
              clears=("system.discovery_stalled",), clear_scope=ClearScope.FABRIC),
    EventType("partition.applied", "Partitions applied", S, IN,
              clears=("partition.drift", "partition.apply_failed", "partition.reconcile_drift",
                      "partition.apply_stuck"), clear_scope=ClearScope.FABRIC,
              description="OpenSM re-read the partitions file Weft wrote and the sampled ports carry "
                          "the PKeys they should (smpquery pkeys)."),
    EventType("partition.drift", "Partition drift", S, MI, raise_alarm=True, email=True,
              description="After an apply, sampled ports of a partition do not carry its PKey as "
                          "configured (or non-members carry it): OpenSM does not run what Weft stores."),
    EventType("partition.apply_failed", "Partitions apply failed", S, MI, raise_alarm=True, email=True,
              description="Weft could not write the partitions file or make OpenSM re-read it, or "
                          "could not read the sampled ports to verify it (smpquery failing or hung)."),
    EventType("partition.reconcile_drift", "Partitions drifted from OpenSM", S, MI, raise_alarm=True,
              email=True,
              description="The periodic reconcile found that the master SM does not run the partitions "
                          "Weft stores: its partitions file holds another text (OpenSM recreated, the file "
                          "replaced) or ports read with smpquery pkeys disagree. Weft re-applies."),
    EventType("partition.apply_stuck", "Partitions apply pending too long", S, MI, raise_alarm=True,
              email=True,
              description="A partition change has not been applied for longer than "
                          "WEFT_PARTITIONS_PENDING_ALARM_S (a worker killed mid-apply, a lost queue). "
                          "The reconcile re-applies it."),
    EventType("topology.mismatch", "Topology differs from reference", T, MI, raise_alarm=True, email=True,
              description="After a discovery, the fabric differs from the reference topology an Admin set "
                          "(missing, extra or miswired links, missing or extra nodes, links below the "
                          "reference's width/speed); raised when the differences change."),
    EventType("topology.matches", "Topology matches reference", T, IN, clears=("topology.mismatch",),
              clear_scope=ClearScope.FABRIC, description="The fabric matches its reference topology again."),
    EventType("switch.psu_failed", "Switch power supply failed", Category.HEALTH, CR, raise_alarm=True, email=True,
              description="A switch PSU reports a status, DC power or PSU fan other than OK (ibswinfo.sh; "
                          "fabric.services.switchhealth)."),
    EventType("switch.psu_ok", "Switch power supply OK", Category.HEALTH, IN, clears=("switch.psu_failed",),
              description="A switch PSU that had failed reports OK again."),
    EventType("switch.fan_failed", "Switch fans failed", Category.HEALTH, MI, raise_alarm=True, email=True,
              description="A switch's chassis fan status is not OK, or a fan reads 0 rpm (ibswinfo.sh)."),
    EventType("switch.fan_ok", "Switch fans OK", Category.HEALTH, IN, clears=("switch.fan_failed",),
              description="A switch's fans that had failed report OK again."),
    EventType("switch.temperature_high", "Switch temperature high", Category.HEALTH, CR, raise_alarm=True,
              email=True,
              description="A switch's ASIC temperature reached its high warning threshold (MTMP "
                          "temperature_threshold_hi, when ibswinfo.sh prints it) or WEFT_SWITCH_TEMP_MAX_C."),
    EventType("switch.temperature_ok", "Switch temperature OK", Category.HEALTH, IN,
              clears=("switch.temperature_high",),
              description="A switch's temperature is below its limit again."),
    EventType("cable.temperature_high", "Transceiver temperature high", Category.HEALTH, MI, raise_alarm=True,
              email=True,
              description="A port's transceiver is at or above its module's high temperature alarm threshold "
                          "(mlxlink's Temperature [C] thresholds, ibdiagnet's AlarmTemperatureHighThresh), "
                          "reports its HighTemperatureAlarm flag, or, without a threshold, is at or above "
                          "WEFT_CABLE_TEMP_MAX_C (fabric.services.cables)."),
    EventType("cable.temperature_ok", "Transceiver temperature OK", Category.HEALTH, IN,
              clears=("cable.temperature_high",),
              description="A transceiver that was too hot is below its limit again."),
    EventType("cable.rx_power_low", "Transceiver receive power low", Category.HEALTH, MI, raise_alarm=True,
              email=True,
              description="A lane of a port's transceiver receives less light than the module's low Rx power "
                          "threshold (or WEFT_CABLE_RX_POWER_MIN_DBM without one), or the module reports a "
                          "LowRX<n>PowerAlarm flag: a dirty or damaged fibre, or a failing far end."),
    EventType("cable.rx_power_ok", "Transceiver receive power OK", Category.HEALTH, IN,
              clears=("cable.rx_power_low",),
              description="Every lane of the transceiver receives enough light again."),
    EventType("cable.replaced", "Cable or transceiver replaced", Category.HEALTH, IN,
              description="The module in a port reports another serial number than at its previous reading."),
]  # fmt: skip

"""The numeric OIDs Weft reads (pure constants; no MIB files are loaded at run time).

Sources: SNMPv2-MIB (RFC 3418), IF-MIB (RFC 2863), ENTITY-MIB (RFC 6933), ENTITY-SENSOR-MIB
(RFC 3433), LLDP-MIB (IEEE 802.1AB-2005), IEEE8021-PFC-MIB (IEEE 802.1Qbb: PFC frames per
priority, sent = Requests, received = Indications), SNMPv2-MIB notifications (RFC 3418: linkDown
1.3.6.1.6.3.1.1.5.3, linkUp .4 with IF-MIB's ifIndex/ifAdminStatus/ifOperStatus varbinds).
"""

from __future__ import annotations

# SNMPv2-MIB system group
SYS_DESCR = "1.3.6.1.2.1.1.1.0"
SYS_OBJECT_ID = "1.3.6.1.2.1.1.2.0"
SYS_UPTIME = "1.3.6.1.2.1.1.3.0"
SYS_NAME = "1.3.6.1.2.1.1.5.0"
SNMP_ENGINE_ID = "1.3.6.1.6.3.10.2.1.1.0"  # SNMP-FRAMEWORK-MIB snmpEngineID.0
SYSTEM = (SYS_DESCR, SYS_OBJECT_ID, SYS_UPTIME, SYS_NAME, SNMP_ENGINE_ID)

# IF-MIB ifTable (1.3.6.1.2.1.2.2.1.<column>)
IF_TABLE = "1.3.6.1.2.1.2.2.1"
IF_DESCR, IF_TYPE, IF_SPEED, IF_ADMIN, IF_OPER = (f"{IF_TABLE}.{c}" for c in (2, 3, 5, 7, 8))
IF_IN_OCTETS, IF_IN_UCAST, IF_IN_DISCARDS, IF_IN_ERRORS = (f"{IF_TABLE}.{c}" for c in (10, 11, 13, 14))
IF_OUT_OCTETS, IF_OUT_UCAST, IF_OUT_DISCARDS, IF_OUT_ERRORS = (f"{IF_TABLE}.{c}" for c in (16, 17, 19, 20))

# IF-MIB ifXTable (1.3.6.1.2.1.31.1.1.1.<column>)
IFX_TABLE = "1.3.6.1.2.1.31.1.1.1"
IF_NAME = f"{IFX_TABLE}.1"
IF_HC_IN_OCTETS, IF_HC_IN_UCAST = f"{IFX_TABLE}.6", f"{IFX_TABLE}.7"
IF_HC_OUT_OCTETS, IF_HC_OUT_UCAST = f"{IFX_TABLE}.10", f"{IFX_TABLE}.11"
IF_HIGH_SPEED = f"{IFX_TABLE}.15"
IF_ALIAS = f"{IFX_TABLE}.18"
IF_DISCONTINUITY = f"{IFX_TABLE}.19"

#: What an interface inventory reads (names, speeds: they change rarely)
INTERFACE_INVENTORY = (IF_DESCR, IF_TYPE, IF_SPEED, IF_NAME, IF_HIGH_SPEED, IF_ALIAS)
#: What every poll reads (states and counters); the 32-bit octet/packet columns only where the
#: 64-bit ones are missing (``devices.parsers.counter_columns``)
INTERFACE_STATE = (IF_ADMIN, IF_OPER, IF_IN_DISCARDS, IF_IN_ERRORS, IF_OUT_DISCARDS, IF_OUT_ERRORS)
HC_COUNTERS = (IF_HC_IN_OCTETS, IF_HC_OUT_OCTETS, IF_HC_IN_UCAST, IF_HC_OUT_UCAST)
COUNTERS_32 = (IF_IN_OCTETS, IF_OUT_OCTETS, IF_IN_UCAST, IF_OUT_UCAST)

# ENTITY-MIB entPhysicalTable (1.3.6.1.2.1.47.1.1.1.1.<column>)
ENT_PHYS = "1.3.6.1.2.1.47.1.1.1.1"
ENT_DESCR, ENT_CONTAINED_IN, ENT_CLASS, ENT_NAME = (f"{ENT_PHYS}.{c}" for c in (2, 4, 5, 7))
ENT_SERIAL, ENT_MFG, ENT_MODEL = (f"{ENT_PHYS}.{c}" for c in (11, 12, 13))
#: walked at identification: the tree (class, containment) and names of every entity; descr,
#: serial, maker and model are then read (GET) for the chassis only (``devices.services.poll``)
ENTITY_TREE = (ENT_CONTAINED_IN, ENT_CLASS, ENT_NAME)
ENTITY_CHASSIS = (ENT_DESCR, ENT_SERIAL, ENT_MFG, ENT_MODEL)

# ENTITY-SENSOR-MIB entPhySensorTable (1.3.6.1.2.1.99.1.1.1.<column>), indexed like entPhysicalTable
SENSOR_TABLE = "1.3.6.1.2.1.99.1.1.1"
SENSOR_TYPE, SENSOR_SCALE, SENSOR_PRECISION, SENSOR_VALUE, SENSOR_STATUS = (
    f"{SENSOR_TABLE}.{c}" for c in (1, 2, 3, 4, 5)
)
SENSOR_UNITS = f"{SENSOR_TABLE}.6"
SENSORS = (SENSOR_TYPE, SENSOR_SCALE, SENSOR_PRECISION, SENSOR_VALUE, SENSOR_STATUS, SENSOR_UNITS)
#: what a poll between inventories reads of the sensors (type, scale, precision are static)
SENSOR_READINGS = (SENSOR_VALUE, SENSOR_STATUS)

# LLDP-MIB (1.0.8802.1.1.2.1): local ports and the remote systems table
LLDP_LOC_PORT = "1.0.8802.1.1.2.1.3.7.1"
LLDP_LOC_PORT_ID, LLDP_LOC_PORT_DESC = f"{LLDP_LOC_PORT}.3", f"{LLDP_LOC_PORT}.4"
LLDP_REM = "1.0.8802.1.1.2.1.4.1.1"
LLDP_REM_CHASSIS_SUBTYPE, LLDP_REM_CHASSIS = f"{LLDP_REM}.4", f"{LLDP_REM}.5"
LLDP_REM_PORT_SUBTYPE, LLDP_REM_PORT, LLDP_REM_PORT_DESC = f"{LLDP_REM}.6", f"{LLDP_REM}.7", f"{LLDP_REM}.8"
LLDP_REM_SYS_NAME = f"{LLDP_REM}.9"
#: lldpStatsRemTablesLastChangeTime.0: sysUpTime when a row of the remote tables was last created,
#: changed or deleted (LLDP-MIB); a poll walks the remote table only when it moved
LLDP_REM_CHANGED = "1.0.8802.1.1.2.1.2.1.0"
#: the scalars of a poll between inventories (one GET): uptime (restarts) and the LLDP change time
POLL_SCALARS = (SYS_UPTIME, LLDP_REM_CHANGED)
#: LLDP columns of a poll that walks them (the local ports' descriptions only on inventory polls)
LLDP = (
    LLDP_LOC_PORT_ID,
    LLDP_REM_CHASSIS_SUBTYPE,
    LLDP_REM_CHASSIS,
    LLDP_REM_PORT_SUBTYPE,
    LLDP_REM_PORT,
    LLDP_REM_PORT_DESC,
    LLDP_REM_SYS_NAME,
)

# IEEE8021-PFC-MIB ieee8021PfcTable (1.3.111.2.802.1.1.21.1.1.1.<column>), per bridge port
PFC_TABLE = "1.3.111.2.802.1.1.21.1.1.1"
PFC_REQUESTS, PFC_INDICATIONS = f"{PFC_TABLE}.2", f"{PFC_TABLE}.3"
PFC = (PFC_REQUESTS, PFC_INDICATIONS)

# Notifications (SNMPv2-MIB snmpTrapOID.0 values) and their varbinds
SNMP_TRAP_OID = "1.3.6.1.6.3.1.1.4.1.0"
TRAP_LINK_DOWN = "1.3.6.1.6.3.1.1.5.3"
TRAP_LINK_UP = "1.3.6.1.6.3.1.1.5.4"
IF_INDEX = f"{IF_TABLE}.1"

"""Real ``perfquery`` output shared by the telemetry parser and collector tests."""

# ``perfquery`` (PortCounters) of the port whose ``perfquery -x`` is in the real
# treydock_perfquery_x_0x7cfe9003003b4b96.out (Lid 133 port 1, CapMask2 0): the rdma-core layout
# with non-zero error counters, to show they survive the extended block's all-zero error block.
PLAIN_LID133 = """# Port counters: Lid 133 port 1 (CapMask: 0x5A00)
PortSelect:......................1
CounterSelect:...................0x0000
SymbolErrorCounter:..............7
LinkErrorRecoveryCounter:........2
LinkDownedCounter:...............3
PortRcvErrors:...................5
PortRcvRemotePhysicalErrors:.....0
PortRcvSwitchRelayErrors:........0
PortXmitDiscards:................0
PortXmitConstraintErrors:........0
PortRcvConstraintErrors:.........0
CounterSelect2:..................0x00
LocalLinkIntegrityErrors:........0
ExcessiveBufferOverrunErrors:....0
QP1Dropped:......................0
VL15Dropped:.....................0
PortXmitData:....................4294967295
PortRcvData:.....................4294967295
PortXmitPkts:....................4294967295
PortRcvPkts:.....................4294967295
PortXmitWait:....................123456
"""

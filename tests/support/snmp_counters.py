"""Set an snmpsim agent's interface counters (IF-MIB, 32- or 64-bit columns) for the device poll tests."""

from __future__ import annotations

from devices import mibs


def set_counters(agent, name, idx, hc: bool, **values):
    """Set the IF-MIB counters ``values`` (``in_octets``, ``out_octets``, ``in_pkts``, ``out_pkts``, ``in_discards``,
    ``out_errors``) of interface ``idx`` in agent recording ``name``; ``hc``: the 64-bit HC columns."""
    cols = {
        "in_octets": (mibs.IF_HC_IN_OCTETS if hc else mibs.IF_IN_OCTETS, "70" if hc else "65"),
        "out_octets": (mibs.IF_HC_OUT_OCTETS if hc else mibs.IF_OUT_OCTETS, "70" if hc else "65"),
        "in_pkts": (mibs.IF_HC_IN_UCAST if hc else mibs.IF_IN_UCAST, "70" if hc else "65"),
        "out_pkts": (mibs.IF_HC_OUT_UCAST if hc else mibs.IF_OUT_UCAST, "70" if hc else "65"),
        "in_discards": (mibs.IF_IN_DISCARDS, "65"),
        "out_errors": (mibs.IF_OUT_ERRORS, "65"),
    }
    agent.set_values(name, {f"{cols[k][0]}.{idx}": (cols[k][1], str(v)) for k, v in values.items()})

"""Fixtures of the devices tests: one snmpsim agent (``lab.snmpsim``) for the session serving the
real recordings of ``$WEFT_REALDATA/snmp`` (copied to a temp folder at start), an Ethernet
fabric, and a helper that makes a device of a recording."""

from __future__ import annotations

import pytest

#: community / context name → recording file in $WEFT_REALDATA/snmp
RECORDINGS = {
    "msn4600": "librenms_cumulus-5.9.2_nvidia-msn4600_98if.snmprec.gz",
    "sonic": "librenms_dell-sonic-4.4.1_e3248p.snmprec",
    "arista7050": "librenms_arista-eos-4.15.3f_dcs-7050tx-128.snmprec",
    "arista7150": "snmpsim-data_arista-eos-4.20.5f_dcs-7150s-52-cl.snmprec.gz",
    "nohc": "librenms_cumulus-4.2.1_mlnx-sw-1_no-hc-counters.snmprec",
    "nxos": "librenms_nxos-10.5_n9k-c93180yc-fx3.snmprec",
}
#: copies the tests edit (counters moving, links going away); the others stay as recorded
EDITED = {"msn-moving": "msn4600", "nohc-moving": "nohc", "sonic-edit": "sonic", "msn-base": "msn4600",
          "arista-lldp": "arista7150", "msn-hot": "msn4600"}  # fmt: skip
V3 = {
    "user": "weft-v3",
    "auth_key": "auth-secret-1",
    "priv_key": "priv-secret-1",
    "auth_proto": "SHA",
    "priv_proto": "AES",
}


@pytest.fixture(scope="session")
def snmp_dir(realdata):
    folder = realdata / "snmp"
    if not folder.is_dir():
        pytest.skip(f"{folder} is absent: SNMP recording tests skipped")
    return folder


@pytest.fixture(scope="session")
def agent(snmp_dir):
    """The snmpsim agent (``lab.snmpsim.SnmpSim``) serving every recording, plus the edited copies."""
    from lab.snmpsim import SnmpSim, snmpsim_available

    if not snmpsim_available():
        pytest.skip("snmpsim is not installed (requirements.txt; bin/setup)")
    recs = {name: snmp_dir / f for name, f in RECORDINGS.items()}
    recs.update({name: snmp_dir / RECORDINGS[src] for name, src in EDITED.items()})
    with SnmpSim(recs, v3=V3) as sim:
        yield sim


@pytest.fixture
def eth_fabric(db):
    from fabric.models import Fabric

    return Fabric.objects.create(name="roce", description="Ethernet/RoCE fabric (SNMP devices)")


@pytest.fixture
def make_device(eth_fabric, agent):
    """``make_device(name, community=name, **fields) -> Device`` served by the session's agent."""
    from devices.models import Device

    def make(name: str, community: str | None = None, **fields):
        fields = {"address": agent.host, "port": agent.port, "timeout_s": 2.0, "retries": 1, **fields}
        secrets = {k: fields.pop(k) for k in ("auth_key", "priv_key") if k in fields}
        d = Device(fabric=eth_fabric, name=name, **fields)
        d.set_secret("community", community if community is not None else name)
        for k, v in secrets.items():
            d.set_secret(k, v)
        d.save()
        return d

    return make

"""Smoke tests of the Lab on the 2-switch, 4-CA fabric (ibsim's net.2sw2path4hca)."""

import re

import pytest

pytestmark = pytest.mark.lab


def test_ibnetdiscover_sees_two_switches_four_cas_with_opensm_lids(small_lab):
    out = small_lab.run(["ibnetdiscover"]).stdout
    switches = re.findall(r"^Switch\s+\d+\s+\"[^\"]+\".*?\blid (\d+)", out, re.M)
    cas = re.findall(r"^Ca\s+\d+\s+\"[^\"]+\"", out, re.M)
    ca_lids = re.findall(r"^\[\d+\]\(\w+\)\s+\"[^\"]+\"\[\d+\].*?# lid (\d+) lmc", out, re.M)
    assert len(switches) == 2
    assert len(cas) == 4
    lids = [int(x) for x in switches + ca_lids]
    assert len(lids) == 6 and all(lid > 0 for lid in lids)
    assert len(set(lids)) == 6

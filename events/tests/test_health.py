"""Health checks on real fabric outputs ($WEFT_REALDATA/ibnetdiscover) imported by the real ingest."""

from __future__ import annotations

import re

import pytest

from events.health import check_fabric, links_below_capability, run_report, topology_findings

pytestmark = pytest.mark.django_db


def import_file(path, name):
    from fabric.models import Fabric
    from fabric.services.ingest import import_topology_text

    import_topology_text(name, path.read_text(), filename=path.name)
    return Fabric.objects.get(name=name)


def test_sdr_links_in_hdr_fabric_are_below_capability(realdata):
    path = realdata / "ibnetdiscover" / "hk_topo4_quantum_hdr_EDITED_fakeca_sdr.ibnetdiscover.txt"
    fabric = import_file(path, "hk4")
    # The CA ends of the 4xSDR links, as the file's CA records state them.
    sdr_cas = {
        m.group(1)
        for m in re.finditer(r'^\[\d+\]\((\w+)\)\s+"S-\w+"\[\d+\].*4xSDR\s*$', path.read_text(), re.M)
    }
    assert sdr_cas
    found = links_below_capability(fabric)
    flagged = {f.object_key for f in found}
    assert len(found) == len(sdr_cas)
    for guid in sdr_cas:
        assert any(f"0x{int(guid, 16):016x}/1" in key for key in flagged), guid
    assert all(f.details["rate_gbps"] < f.details["expected_gbps"] for f in found)


def test_report_on_clean_real_fabric(realdata):
    path = realdata / "ibnetdiscover" / "hk_topo3_quantum_hdr_2019.ibnetdiscover.txt"
    fabric = import_file(path, "hk3")
    assert [f for f in topology_findings(fabric)] == []
    report = run_report(fabric, trigger="scheduled")
    assert report.summary["duplicate_lid"] == 0 and report.summary["duplicate_guid"] == 0
    assert report.summary["link_below_capability"] == len(links_below_capability(fabric))
    assert len(report.findings) == len(check_fabric(fabric))
    # Expected from the file, not from the checks: its only defects are two CAs cabled at 4x SDR in
    # an HDR fabric, and an ibnetdiscover file carries no SM, so no master is known.
    sdr_cas = {
        m.group(1)
        for m in re.finditer(r'^\[\d+\]\((\w+)\)\s+"S-\w+"\[\d+\].*4xSDR\s*$', path.read_text(), re.M)
    }
    assert len(sdr_cas) == 2
    assert report.summary == {
        "duplicate_guid": 0,
        "duplicate_lid": 0,
        "invalid_lid": 0,
        "link_below_capability": len(sdr_cas),
        "port_errors": 0,
        "unreachable_node": 0,
        "sm_state": 1,
        "routing": 0,  # the routing app's check: an imported fabric has no forwarding tables to read
    }
    below = [f for f in report.findings if f["check"] == "link_below_capability"]
    assert {key for f in below for key in f["object_key"].split("-")} >= {f"0x{g}/1" for g in sdr_cas}
    assert all(f["severity"] == "minor" and f["details"]["rate_gbps"] == 8.0 for f in below)
    (sm,) = [f for f in report.findings if f["check"] == "sm_state"]
    assert sm["severity"] == "critical" and "No master SM" in sm["message"]
    assert report.status == "critical" and report.trigger == "scheduled"
    assert report.findings[0] == sm  # worst first


@pytest.mark.django_db
def test_unchanged_live_rediscovery_leaves_no_node_unreachable():
    from django.utils import timezone

    from events.health import reachability_findings
    from fabric.models import Fabric, Node
    from fabric.parsers import parse_ibnetdiscover
    from fabric.services.ingest import ingest_topology
    from tests.support.topologies import BASE

    fabric = Fabric.objects.create(name="f")
    ingest_topology(fabric, parse_ibnetdiscover(BASE, "t"), source="live")
    again = ingest_topology(fabric, parse_ibnetdiscover(BASE, "t"), source="live")  # writes no node row
    fabric.refresh_from_db()
    assert again.rows_written == 0 and fabric.last_discovery_id == again.pk
    assert reachability_findings(fabric) == []
    node = Node.objects.filter(fabric=fabric).order_by("pk").first()
    Node.objects.filter(pk=node.pk).update(unreachable_since=timezone.now())  # a partial run kept it
    found = reachability_findings(fabric)
    assert [(f.check, f.object_key) for f in found] == [("unreachable_node", node.node_guid)]

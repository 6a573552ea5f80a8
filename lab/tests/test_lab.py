"""The fabric lab against the real ibsim, OpenSM and infiniband-diags (no mocks)."""

from __future__ import annotations

import gzip
import random
import re
import time

import pytest

from lab import Lab, LabConsoleError, LabError, netgen
from lab.core import ibsim_version
from lab.tests.ibtext import alive, perf_counter, pkeys, ports_summary

pytestmark = pytest.mark.lab


def _wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.3)


# -- the 2-switch, 4-CA fabric (net.2sw2path4hca) ---------------------------------------------------


def test_ibnetdiscover_sees_two_switches_four_cas_with_lids_from_opensm(small_lab):
    net = small_lab.net
    seen = ports_summary(small_lab.run(["ibnetdiscover", "-p"]).stdout)
    assert len(seen["switches"]) == len(net.switches) == 2
    assert len(seen["cas"]) == len(net.cas) == 4
    assert len(seen["links"]) == len(net.links) == 6  # 4 CA cables + 2 inter-switch links
    # the netfile gives no LIDs: every LID was assigned by OpenSM, non-zero and unique
    lids = list(seen["lids"].values())
    assert len(lids) == 6 and all(lid > 0 for lid in lids)
    assert len(set(lids)) == 6
    # GUIDs the lab computes from the netfile are the ones ibsim reports
    assert {f"0x{n.port_guid(1):016x}" for n in net.cas} == seen["cas"]
    assert {f"0x{n.guid:016x}" for n in net.switches} == seen["switches"]
    assert small_lab.node_names == [n.description for n in net.nodes]


def test_sm_info_reports_master_on_the_sm_node(small_lab):
    info = small_lab.sm_info()
    assert info["state"] == "MASTER"
    assert info["guid"] == f"0x{small_lab.node('Hca1').port_guid(1):016x}"  # first CA of the netfile
    assert info["priority"] == 14 and info["lid"] > 0 and info["activity"] > 0
    assert small_lab.wait_master(timeout=5)["guid"] == info["guid"]


def test_tool_env_alone_points_a_tool_at_the_lab(small_lab):
    """What a Weft Fabric stores (tool_env) plus the normal environment reaches this lab."""
    import os
    import subprocess

    from lab.core import find_program

    env = dict(os.environ, **small_lab.tool_env)
    out = subprocess.run(
        [find_program("sminfo")], env=env, capture_output=True, text=True, timeout=30, cwd=small_lab.workdir
    )
    assert out.returncode == 0, out.stderr
    guid = int(re.search(r"sm guid (0x[0-9a-f]+)", out.stdout)[1], 16)
    assert f"0x{guid:016x}" == small_lab.sm_info()["guid"]
    assert set(small_lab.tool_env) == {"LD_PRELOAD", "IBSIM_SOCKNAME", "SIM_HOST"}


def test_perf_set_is_read_back_by_perfquery(small_lab):
    wait = random.randint(10_000, 2_000_000)
    ext = random.randint(2**33, 2**40)  # needs the 64-bit PortCountersExtended
    guid = f"0x{small_lab.node('Hca3').port_guid(1):016x}"
    small_lab.perf_set("Hca3", 1, "PortXmitWait", wait)
    small_lab.perf_set(guid, 1, "PortCountersExtended.PortXmitData", ext)  # node given by port GUID
    basic = small_lab.run(["perfquery", "-G", guid, "1"]).stdout
    extended = small_lab.run(["perfquery", "-x", "-G", guid, "1"]).stdout
    assert perf_counter(basic, "PortXmitWait") == wait
    # MAD traffic through the port adds a few words between the set and the read
    assert ext <= perf_counter(extended, "PortXmitData") < ext + 100_000


def test_perf_set_on_a_switch_port_by_description(small_lab):
    value = random.randint(1000, 60000)
    small_lab.perf_set("Switch2", 3, "PortCounters.SymbolErrorCounter", value)
    sw = small_lab.node("Switch2")
    out = small_lab.run(["perfquery", "-G", f"0x{sw.guid:016x}", "3"]).stdout
    assert perf_counter(out, "SymbolErrorCounter") == value


def test_console_errors_raise(small_lab):
    with pytest.raises(LabConsoleError, match="not found"):
        small_lab.console('Unlink "NoSuchNode"[1]')
    with pytest.raises(LabConsoleError, match="unknown"):
        small_lab.console("Frobnicate")
    with pytest.raises(LabConsoleError, match="cannot be found"):
        small_lab.perf_set("Hca1", 1, "PortCounters.NoSuchCounter", 1)
    with pytest.raises(LabConsoleError, match="not linked"):
        small_lab.unlink("Switch1", 7)  # port 7 of Switch1 has no cable
    with pytest.raises(LabError, match="no node"):
        small_lab.perf_set("nope", 1, "PortXmitWait", 1)
    with pytest.raises(LabError, match="ports 1..2"):
        small_lab.unlink("Hca1", 3)
    # a long command (beyond ibsim's 127-byte console line) still works, through a command file
    answer = small_lab.console("PerformanceSet " + '"Hca2"[1]' + " " * 130 + "PortCounters.PortXmitWait=5")
    assert "has been set to 5" in answer
    # the console still answers normally afterwards
    assert "Client" in small_lab.console("Attached")


def test_unlink_removes_the_ca_and_relink_brings_it_back(lab_factory):
    lab = lab_factory(netgen.two_switch_four_ca())
    guid = f"0x{lab.node('Hca4').port_guid(1):016x}"
    before = ports_summary(lab.run(["ibnetdiscover", "-p"]).stdout)
    assert guid in before["cas"]
    lab.unlink("Hca4", 1)
    after = ports_summary(lab.run(["ibnetdiscover", "-p"]).stdout)
    assert guid not in after["cas"]
    assert len(after["cas"]) == 3 and len(after["links"]) == len(before["links"]) - 1
    lab.relink("Hca4", 1)
    back = ports_summary(lab.run(["ibnetdiscover", "-p"]).stdout)
    assert guid in back["cas"] and back["links"] == before["links"]
    # a whole switch: unlink all its ports, then put them back
    lab.unlink("Switch2")
    cut = ports_summary(lab.run(["ibnetdiscover", "-p"]).stdout)
    assert len(cut["switches"]) == 1 and len(cut["cas"]) == 2
    lab.relink("Switch2")
    assert ports_summary(lab.run(["ibnetdiscover", "-p"]).stdout)["links"] == before["links"]


def test_set_error_rate_makes_queries_fail(lab_factory):
    lab = lab_factory(netgen.two_switch_four_ca())
    guid = f"0x{lab.node('Hca2').port_guid(1):016x}"
    assert lab.run(["smpquery", "-G", "nodedesc", guid], timeout=30).returncode == 0
    lab.set_error("Hca2", 1, 100)  # drop every MAD through Hca2's port
    failed = lab.run(["smpquery", "-t", "200", "-G", "nodedesc", guid], timeout=30, check=False)
    assert failed.returncode != 0
    lab.set_error("Hca2", 1, 0)
    assert "Hca2" in lab.run(["smpquery", "-G", "nodedesc", guid], timeout=30).stdout
    with pytest.raises(LabError, match="0..100"):
        lab.set_error("Hca2", 1, 101)


def test_partitions_file_is_visible_through_smpquery_pkeys(lab_factory):
    net = netgen.two_switch_four_ca()
    hca1, hca2 = 0x100001, 0x100004  # port GUIDs ibsim gives Hca1 and Hca2 (checked below)
    parts = f"Default=0x7fff, ipoib : ALL=full ;\ntenant-a=0x0a01 : 0x{hca1:x}=full, 0x{hca2:x}=limited ;\n"
    lab = lab_factory(net, partitions=parts)
    assert lab.node("Hca1").port_guid(1) == hca1 and lab.node("Hca2").port_guid(1) == hca2

    def keys(name):
        guid = f"0x{lab.node(name).port_guid(1):016x}"
        return pkeys(lab.run(["smpquery", "-G", "pkeys", guid, "1"]).stdout)

    assert keys("Hca1") == {0xFFFF, 0x8A01}  # full member: high bit set
    assert keys("Hca2") == {0xFFFF, 0x0A01}  # limited member
    assert keys("Hca3") == {0xFFFF}
    # a new partitions file reaches the ports after SIGHUP
    lab.set_partitions(parts + "tenant-b=0x0b02 : 0x100007=full ;\n")
    _wait_for(lambda: keys("Hca3") == {0xFFFF, 0x8B02}, 30, "tenant-b on Hca3")


def test_bad_partitions_are_reported_with_the_line(lab_factory, tmp_path):
    path = tmp_path / "partitions.conf"
    path.write_text("Default=0x7fff, ipoib : ALL=full ;\nbroken=notakey : ALL=full ;\n")
    lab = Lab(netgen.two_switch_four_ca(), partitions=path)
    with pytest.raises(LabError, match=r"partitions\.conf: line 2: bad partition definition"):
        lab.start()
    assert lab.pids == []
    good = lab_factory(netgen.two_switch_four_ca())
    with pytest.raises(LabError, match="line 1: "):
        good.set_partitions("this is not a partition\n")


def test_partitions_from_a_file(lab_factory, tmp_path):
    path = tmp_path / "partitions.conf"
    path.write_text("Default=0x7fff, ipoib : ALL=full ;\nstorage=0x0123 : ALL_CAS=full ;\n")
    lab = lab_factory(netgen.two_switch_four_ca(), partitions=path)
    guid = f"0x{lab.node('Hca4').port_guid(1):016x}"
    assert 0x8123 in pkeys(lab.run(["smpquery", "-G", "pkeys", guid, "1"]).stdout)


def test_standby_sm_takes_over_after_the_master_is_killed(lab_factory):
    lab = lab_factory(netgen.two_switch_four_ca(), standby_sm="Hca4", sm_node="Hca2")
    master = lab.sm_info()
    assert master["state"] == "MASTER"
    assert master["guid"] == f"0x{lab.node('Hca2').port_guid(1):016x}"
    old_pid = lab.sm_pids[0]
    t0 = time.monotonic()
    lab.kill_master_sm()
    assert not alive(old_pid)
    new = lab.wait_master(timeout=60, guid="Hca4")
    took = time.monotonic() - t0
    assert new["guid"] == f"0x{lab.node('Hca4').port_guid(1):016x}"
    assert new["priority"] == master["priority"] - 1
    # sminfo_polling_timeout 1000 ms x polling_retry_number 2, plus a sweep
    assert took < 30
    # the killed OpenSM's ibsim client slot was freed
    assert all(c["pid"] != old_pid for c in lab.clients())
    # the fabric still answers with the new SM
    assert len(ports_summary(lab.run(["ibnetdiscover", "-p"]).stdout)["cas"]) == 4


def test_several_labs_run_at_once_without_interfering(lab_factory):
    a = lab_factory(netgen.two_switch_four_ca())
    b = lab_factory(netgen.fat_tree_2level(2, 1, 3))
    assert a.socket_name != b.socket_name
    seen_a = ports_summary(a.run(["ibnetdiscover", "-p"]).stdout)
    seen_b = ports_summary(b.run(["ibnetdiscover", "-p"]).stdout)
    assert (len(seen_a["switches"]), len(seen_a["cas"])) == (2, 4)
    assert (len(seen_b["switches"]), len(seen_b["cas"])) == (3, 6)
    # the same counter on a port of each lab keeps its own value
    a.perf_set("Hca1", 1, "PortXmitWait", 111)
    b.perf_set("host001 mlx5_0", 1, "PortXmitWait", 222)
    ga = f"0x{a.node('Hca1').port_guid(1):016x}"
    gb = f"0x{b.node('host001 mlx5_0').port_guid(1):016x}"
    assert perf_counter(a.run(["perfquery", "-G", ga, "1"]).stdout, "PortXmitWait") == 111
    assert perf_counter(b.run(["perfquery", "-G", gb, "1"]).stdout, "PortXmitWait") == 222
    # unlinking in one lab leaves the other whole; stopping one leaves the other running
    a.unlink("Hca1")
    assert len(ports_summary(b.run(["ibnetdiscover", "-p"]).stdout)["cas"]) == 6
    pids_a = a.pids
    a.stop()
    assert not any(alive(p) for p in pids_a)
    assert b.sm_info()["state"] == "MASTER"


def test_stop_ends_every_process_and_is_idempotent():
    lab = Lab(netgen.two_switch_four_ca(), standby_sm="Hca3").start()
    pids = lab.pids
    workdir = lab.workdir
    assert len(pids) == 3 and all(alive(p) for p in pids)  # 2 OpenSMs + ibsim
    lab.stop()
    lab.stop()
    assert not any(alive(p) for p in pids)
    assert not workdir.exists()
    with pytest.raises(LabError, match="not running"):
        lab.console("Attached")


def test_a_forked_child_does_not_stop_the_parents_lab(lab_factory):
    import os

    lab = lab_factory(netgen.two_switch_four_ca())
    pid = os.fork()
    if pid == 0:  # child: what its exit would run (atexit, GC), as a worker process would
        try:
            from lab.core import _stop_all

            _stop_all()
            lab.stop()
            del lab
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert len(lab.pids) == 2 and all(alive(p) for p in lab.pids)
    assert lab.sm_info()["state"] == "MASTER"


def test_context_manager_stops_on_error():
    pids = []
    with pytest.raises(ZeroDivisionError), Lab(netgen.two_switch_four_ca()) as lab:
        pids = lab.pids
        1 / 0  # noqa: B018
    assert pids and not any(alive(p) for p in pids)


def test_bad_netfile_and_bad_nodes_are_clear_errors(tmp_path):
    bad = tmp_path / "bad.net"
    bad.write_text('Switch 8 "S1"\n[1] "H1"[1]\n\nHca 2 "H1"\n[1] "S1"[1]\n[9] "S1"[2]\n')
    with pytest.raises(LabError, match=r"bad\.net:6: port 9 outside 1\.\.2"):
        Lab(bad)
    with pytest.raises(LabError, match="cannot read netfile"):
        Lab(tmp_path / "missing.net")
    with pytest.raises(LabError, match="no node 'nope'"):
        Lab(netgen.two_switch_four_ca(), sm_node="nope")
    with pytest.raises(LabError, match="OpenSM runs on a CA"):
        Lab(netgen.two_switch_four_ca(), sm_node="Switch1")
    with pytest.raises(LabError, match="other than the master"):
        Lab(netgen.two_switch_four_ca(), standby_sm="Hca1")


def test_ibsim_parse_failure_is_reported_with_its_output():
    # Well-formed for the lab's reader, but two CAs get the same GUID: ibsim refuses it and exits.
    text = 'caguid=0x1000\nHca 1 "A"\n[1] "B"[1]\n\ncaguid=0x1000\nHca 1 "B"\n[1] "A"[1]\n'
    lab = Lab(text)
    with pytest.raises(LabError, match="ibsim"):
        lab.start(timeout=20)
    assert lab.pids == []


def test_missing_tools_raise_lab_tools_missing(monkeypatch, tmp_path):
    from lab import LabToolsMissing

    monkeypatch.setenv("PATH", str(tmp_path))  # ibsim lives in /usr/bin, which is now off the PATH
    with pytest.raises(LabToolsMissing, match=r"ibsim \(Debian package ibsim-utils\)"):
        Lab(netgen.two_switch_four_ca())


# -- generated fabrics ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("netfile", "switches", "cas", "links", "rate"),
    [
        (lambda: netgen.fat_tree_2level(4, 2, 3), 6, 12, 4 * (3 + 2), "4xHDR"),
        (lambda: netgen.fat_tree_2level(3, 2, 2, speed="EDR", links_per_spine=2), 5, 6, 3 * (2 + 4), "4xEDR"),
        (lambda: netgen.fat_tree_3level(2, 2, 2, 4, 2), 2 * 4 + 4, 8, 2 * 2 * (2 + 2) + 2 * 4, "4xHDR"),
        (lambda: netgen.rail_pod(4, rails=4), 4 + 1, 16, 16 + 4 * 4, "4xNDR"),
        (lambda: netgen.parse_spec("2:leaves=3,spines=2,hosts=2,speed=FDR,width=4x"), 5, 6, 3 * 4, "4xFDR"),
    ],
    ids=["2level-hdr", "2level-edr-2links", "3level", "rail-pod", "spec-fdr"],
)
def test_generators_give_the_intended_fabric(lab_factory, netfile, switches, cas, links, rate):
    lab = lab_factory(netfile())
    seen = ports_summary(lab.run(["ibnetdiscover", "-p"], timeout=60).stdout)
    assert len(seen["switches"]) == switches == len(lab.net.switches)
    assert len(seen["cas"]) == cas == len(lab.net.cas)
    assert len(seen["links"]) == links == len(lab.net.links)
    if rate == "4xNDR" and ibsim_version() < (0, 11):  # Debian 12's ibsim 0.10 has no NDR
        assert "NDR links run as HDR" in lab.warnings[0]
        rate = "4xHDR"
    assert seen["rates"] == {rate}


def test_fat_tree_648_hosts_comes_up_master(lab_factory):
    text = netgen.fat_tree_2level(36, 18, 18)  # classic 648-host 2-level tree on 40-port QM8700s
    t0 = time.monotonic()
    lab = lab_factory(text, timeout=180)
    took = time.monotonic() - t0
    print(f"648-host fat tree: lab up in {took:.1f}s ({lab.timings})")
    assert lab.sm_info()["state"] == "MASTER"
    seen = ports_summary(lab.run(["ibnetdiscover", "-p"], timeout=120).stdout)
    assert len(seen["cas"]) == 648 and len(seen["switches"]) == 54
    assert len(seen["links"]) == 36 * (18 + 18)
    assert len(set(seen["lids"].values())) == 648 + 54 and min(seen["lids"].values()) > 0
    assert seen["rates"] == {"4xHDR"}
    out = lab.run(["ibnetdiscover"], timeout=120).stdout
    assert re.search(r'"host017 mlx5_0" lid \d+ 4xHDR', out)
    assert re.search(r'# "MF0;leaf-03:MQM8700/U1" enhanced port 0 lid \d+', out)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_selene_compute_fabric_comes_up_master(lab_factory, realdata, tmp_path):
    source = realdata / "ibnetdiscover" / "selene_compute.ibnetdiscover.txt.gz"
    netfile = tmp_path / "selene_compute.net"
    netfile.write_bytes(gzip.decompress(source.read_bytes()))
    t0 = time.monotonic()
    lab = lab_factory(netfile, timeout=900)
    took = time.monotonic() - t0
    print(f"Selene compute ({len(lab.net.nodes)} nodes): lab up in {took:.1f}s ({lab.timings})")
    assert len(lab.net.switches) == 666 and len(lab.net.cas) == 4341
    assert lab.sm_info()["state"] == "MASTER"
    seen = ports_summary(lab.run(["ibnetdiscover", "-p"], timeout=300).stdout)
    assert len(seen["switches"]) == 666 and len(seen["cas"]) == 4341
    assert "4xHDR" in seen["rates"]


def test_lab_tests_skip_with_the_reason_when_tools_are_missing(tmp_path):
    """Without ibsim on PATH, ``@pytest.mark.lab`` tests are skipped, naming the Debian package."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PATH=str(tmp_path))  # /usr/bin (ibsim) off the PATH
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            f"{__file__}::test_sm_info_reports_master_on_the_sm_node",
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 skipped" in proc.stdout
    assert "ibsim (Debian package ibsim-utils)" in proc.stdout


@pytest.mark.parametrize(
    "name",
    [
        "ibsim_net/hk_ibsim_credit_loop_manually_created.txt",  # non-hex GUIDs in (...)
        "ibsim_net/qnib_netlist.clos3_multilink",  # hand-written ibsim syntax, parallel links
        "ibnetdiscover/ibtopotool_3_nvidia_kb_stderr.topo",  # stderr junk on top, first CA cabled on port 2
        "ibnetdiscover/psmn_X5.ibnetdiscover.topo",  # '#' inside a quoted description
        "ibnetdiscover/ufm_small_topo_file.ibnetdiscover.txt",  # mixed HDR/FDR, switch self-loops
        "ibnetdiscover/nvidia_topograph_ndr_dgx.ibnetdiscover.out",  # NDR, 65-port QM9701
    ],
)
def test_real_topologies_come_up_as_declared(lab_factory, realdata, name):
    lab = lab_factory(realdata / name)
    seen = ports_summary(lab.run(["ibnetdiscover", "-p"], timeout=120).stdout)
    assert lab.sm_info()["state"] == "MASTER"
    assert len(seen["switches"]) == len(lab.net.switches)
    assert len(seen["cas"]) == len(lab.net.cas)
    assert len(seen["links"]) == len(lab.net.links)


def test_ctrl_c_in_a_script_stops_the_lab(tmp_path):
    """Ctrl-C reaches only Python (the lab runs in its own session); ``with Lab`` then stops the lab."""
    import signal
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "run_lab.py"
    script.write_text(
        "import os, sys, time\n"
        "from lab import Lab, netgen\n"
        "with Lab(netgen.two_switch_four_ca()) as lab:\n"
        "    print(' '.join(map(str, lab.pids)), flush=True)\n"
        "    time.sleep(120)\n"
    )
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        cwd=root,
        env=dict(__import__("os").environ, PYTHONPATH=str(root)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # as a terminal's foreground command: SIGINT not ignored, whatever the test run inherited
        # (a run started with `&` or nohup ignores it, and Python then installs no handler)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    pids = [int(p) for p in proc.stdout.readline().split()]
    assert len(pids) == 2 and all(alive(p) for p in pids)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert "KeyboardInterrupt" in err
    assert not any(alive(p) for p in pids)

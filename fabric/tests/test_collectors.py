"""Collector tests: run_tool with real processes, environment and CA arguments, the RoCE check."""

from __future__ import annotations

import os
import sys
import time

import pytest

from fabric.collectors.ibnetdiscover import DiscoveryError, collect_topology, ethernet_only_reason
from fabric.collectors.tools import (
    ToolNotFound,
    ToolTimeout,
    fabric_ca_args,
    fabric_env,
    find_tool,
    is_live,
    run_tool,
)
from fabric.models import Fabric


def test_run_tool_returns_output_status_and_duration():
    res = run_tool(
        [sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"],
        timeout=30,
    )
    assert (res.returncode, res.stdout, res.stderr.strip()) == (3, "out\n", "err")
    assert not res.ok and res.duration_s > 0


def test_run_tool_timeout_kills_the_process_group(tmp_path):
    marker = tmp_path / "child.pid"
    code = (
        "import subprocess, sys, time\n"
        f"p = subprocess.Popen(['sleep', '60']); open({str(marker)!r}, 'w').write(str(p.pid))\n"
        "print('partial', flush=True); time.sleep(60)\n"
    )
    t0 = time.monotonic()
    with pytest.raises(ToolTimeout) as info:
        run_tool([sys.executable, "-c", code], timeout=1.5)
    assert time.monotonic() - t0 < 10
    assert info.value.stdout == "partial\n"
    child = int(marker.read_text())
    for _ in range(50):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the grandchild survived the timeout")


def test_missing_tool():
    with pytest.raises(ToolNotFound) as info:
        run_tool(["weft-no-such-tool"], timeout=5)
    assert "weft-no-such-tool" in str(info.value)


def test_sbin_tools_are_found_without_sbin_on_path():
    if not os.path.exists("/usr/sbin/ibnetdiscover"):
        pytest.skip("infiniband-diags not installed")
    assert find_tool("ibnetdiscover", {"PATH": "/usr/bin"}) == "/usr/sbin/ibnetdiscover"


def test_fabric_env_and_ca_args():
    f = Fabric(
        name="f",
        tool_env={"LD_PRELOAD": "/x/libumad2sim.so", "SIM_HOST": "h1", "N": 3},
        ca_name="mlx5_2",
        ca_port=2,
    )
    env = fabric_env(f)
    assert env["LD_PRELOAD"] == "/x/libumad2sim.so" and env["N"] == "3"
    assert env["HOME"] == os.environ["HOME"]
    assert "/usr/sbin" in env["PATH"].split(os.pathsep)
    assert fabric_ca_args(f) == ["-C", "mlx5_2", "-P", "2"]
    assert fabric_ca_args(Fabric(name="g")) == []
    assert is_live(f)
    assert not is_live(Fabric(name="g"))
    assert not is_live(Fabric(name="h", tool_env={"A": "b"}, discovery_enabled=False))
    assert is_live(Fabric(name="i", local_hca=True))  # a host with its default HCA
    assert not is_live(Fabric(name="j", local_hca=True, discovery_enabled=False))


def _sysfs(tmp_path, layers: dict[str, str]):
    for dev_port, layer in layers.items():
        dev, port = dev_port.split("/")
        d = tmp_path / dev / "ports" / port
        d.mkdir(parents=True)
        (d / "link_layer").write_text(layer + "\n")
    return str(tmp_path)


def test_ethernet_only_host_is_detected(tmp_path):
    root = _sysfs(tmp_path / "a", {"mlx5_0/1": "Ethernet", "mlx5_1/1": "Ethernet"})
    reason = ethernet_only_reason(root)
    assert "Ethernet" in reason and "mlx5_0" in reason and "mlx5_1" in reason
    assert (
        ethernet_only_reason(_sysfs(tmp_path / "b", {"mlx5_0/1": "Ethernet", "mlx5_1/1": "InfiniBand"}))
        is None
    )
    assert ethernet_only_reason(str(tmp_path / "none")) is None


@pytest.mark.django_db
def test_collect_reports_a_missing_tool(tmp_path):
    f = Fabric.objects.create(name="c", tool_env={"PATH": str(tmp_path)})
    with pytest.raises(DiscoveryError) as info:
        collect_topology(f, program="weft-no-ibnetdiscover")
    assert "not found" in info.value.reason


@pytest.mark.lab
@pytest.mark.django_db
def test_collect_from_the_lab(small_lab):
    f = Fabric.objects.create(name="lab", tool_env=dict(small_lab.tool_env))
    got = collect_topology(f)
    assert not got.partial and got.text.count("\nSwitch") + got.text.startswith("Switch") >= 1
    assert got.sm is not None and got.sm.state == 3
    assert got.sm.guid == f"0x{small_lab.net.cas[0].port_guid(1):016x}"

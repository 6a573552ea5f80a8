"""The host agent: HCAs through pyverbs or the sysfs fallback, nvidia-smi through run_tool, and
every real report posted end to end to a live Weft server."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

from pools import agent

BASE_DIR = Path(__file__).resolve().parents[2]


def _sysfs(root: Path) -> Path:
    """mlx5_0: IB port, active, 4x HDR; mlx5_1: RoCE port (Ethernet) + a down IB port; mlx5_2: no GUID."""

    def write(path: str, text: str) -> None:
        p = root / path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text + "\n")

    write("mlx5_0/node_guid", "0c42:a103:0012:3450")
    write("mlx5_0/ports/1/link_layer", "InfiniBand")
    write("mlx5_0/ports/1/state", "4: ACTIVE")
    write("mlx5_0/ports/1/rate", "200 Gb/sec (4X HDR)")
    write("mlx5_0/ports/1/gids/0", "fe80:0000:0000:0000:0c42:a103:0012:3451")
    write("mlx5_1/node_guid", "0c42:a103:0012:3460")
    write("mlx5_1/ports/1/link_layer", "Ethernet")
    write("mlx5_1/ports/1/state", "4: ACTIVE")
    write("mlx5_1/ports/1/rate", "100 Gb/sec (4X EDR)")
    write("mlx5_1/ports/1/gids/0", "fe80:0000:0000:0000:0e42:a1ff:fe12:3460")
    write("mlx5_1/ports/2/link_layer", "InfiniBand")
    write("mlx5_1/ports/2/state", "1: DOWN")
    write("mlx5_1/ports/2/rate", "10 Gb/sec (4X SDR)")
    write("mlx5_1/ports/2/gids/0", "fe80:0000:0000:0000:0c42:a103:0012:3462")
    write("mlx5_2/ports/1/link_layer", "InfiniBand")
    write("mlx5_2/ports/1/state", "2: INIT")
    write("mlx5_2/ports/1/rate", "")
    return root


EXPECTED = [
    {"name": "mlx5_0", "node_guid": "0x0c42a10300123450", "ports": [
        {"port_num": 1, "port_guid": "0x0c42a10300123451", "link_layer": "InfiniBand", "state": "ACTIVE",
         "rate_gbps": 200.0}]},
    {"name": "mlx5_1", "node_guid": "0x0c42a10300123460", "ports": [
        {"port_num": 1, "port_guid": "", "link_layer": "Ethernet", "state": "ACTIVE", "rate_gbps": 100.0},
        {"port_num": 2, "port_guid": "0x0c42a10300123462", "link_layer": "InfiniBand", "state": "DOWN",
         "rate_gbps": 10.0}]},
    {"name": "mlx5_2", "node_guid": "", "ports": [
        {"port_num": 1, "port_guid": "", "link_layer": "InfiniBand", "state": "INIT", "rate_gbps": None}]},
]  # fmt: skip


def test_sysfs_tree_mixed_ib_roce_and_no_guid(tmp_path):
    assert agent.hcas_from_sysfs(_sysfs(tmp_path)) == EXPECTED
    assert agent.hcas_from_sysfs(tmp_path / "absent") == []


def _fake_pyverbs(monkeypatch, get_device_list):
    err_mod = types.ModuleType("pyverbs.pyverbs_error")

    class PyverbsError(Exception):
        pass

    class PyverbsRDMAError(PyverbsError):
        pass

    err_mod.PyverbsError, err_mod.PyverbsRDMAError = PyverbsError, PyverbsRDMAError
    dev_mod = types.ModuleType("pyverbs.device")
    dev_mod.get_device_list = lambda: get_device_list(PyverbsRDMAError)
    pkg = types.ModuleType("pyverbs")
    pkg.device = dev_mod
    monkeypatch.setitem(sys.modules, "pyverbs", pkg)
    monkeypatch.setitem(sys.modules, "pyverbs.device", dev_mod)
    monkeypatch.setitem(sys.modules, "pyverbs.pyverbs_error", err_mod)


def test_pyverbs_rdma_error_falls_back_to_sysfs(tmp_path, monkeypatch):
    def boom(err):
        raise err("Failed to get devices list. Errno: 38, Function not implemented")

    _fake_pyverbs(monkeypatch, boom)
    hcas, how = agent.collect_hcas(_sysfs(tmp_path))
    assert hcas == EXPECTED and how.startswith("sysfs (pyverbs: PyverbsRDMAError: Failed to get devices list")


def test_pyverbs_without_devices_falls_back_to_sysfs(tmp_path, monkeypatch):
    _fake_pyverbs(monkeypatch, lambda err: [])
    hcas, how = agent.collect_hcas(_sysfs(tmp_path))
    assert hcas == EXPECTED and how == "sysfs (pyverbs found no RDMA device)"


def test_real_pyverbs_on_this_host_falls_back_cleanly(tmp_path):
    """The Debian pyverbs of this machine (no RDMA device here): whatever it does, the agent gets
    the sysfs view."""
    pytest.importorskip("pyverbs.device", reason="python3-pyverbs not installed")
    hcas, how = agent.collect_hcas(_sysfs(tmp_path))
    if how == "pyverbs":
        pytest.skip("this host has RDMA devices: pyverbs answered")
    assert hcas == EXPECTED and how.startswith("sysfs (")


def _fake_nvidia_smi(tmp_path: Path, xml: str, exit_code: int = 0) -> Path:
    (tmp_path / "q.xml").write_text(xml)
    script = tmp_path / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "-q" ]; then cat {tmp_path / "q.xml"}; exit {exit_code}; fi\n'
        'if [ "$1" = "topo" ]; then printf "\\tGPU0\\tmlx5_0\\nGPU0\\t X \\tPIX\\n"; exit 0; fi\n'
        'if [ "$1" = "mig" ]; then sleep 30; fi\n'
    )
    script.chmod(0o755)
    return script


def test_collect_gpus_runs_nvidia_smi_with_timeouts(tmp_path, realdata):
    xml = (realdata / "nvidia-smi" / "telegraf_a100-sxm4-80gb_mig4.xml").read_text()
    out = agent.collect_gpus(str(_fake_nvidia_smi(tmp_path, xml)), timeout=1.0)
    # -q -x and topo -m answered; the MIG listing hung and was killed: reported without it
    assert out["nvidia_smi_xml"] == xml and out["topo"].startswith("\tGPU0") and out["mig"] == ""
    with pytest.raises(agent.ToolError, match="exited 3"):
        agent.collect_gpus(str(_fake_nvidia_smi(tmp_path, "", exit_code=3)), timeout=5.0)
    with pytest.raises(agent.ToolError, match="not found"):
        agent.collect_gpus(str(tmp_path / "no-such-nvidia-smi"), timeout=5.0)


def _reports(realdata: Path) -> list[Path]:
    folder = realdata / "nvidia-smi"
    if not folder.is_dir():
        pytest.skip(f"{folder} is absent")
    return sorted(folder.glob("*.xml")) + sorted(folder.glob("*capture*"))


@pytest.mark.slow
def test_every_real_report_end_to_end_through_a_live_server(weft_server, realdata, tmp_path):
    netfile = tmp_path / "hosts.net"
    from tests.support.topologies import BASE

    netfile.write_text(BASE)
    weft_server.manage("import_topology", str(netfile), "--fabric", "e2e")
    token = weft_server.manage("create_token", "operator").stdout.split()[2]
    sysfs = _sysfs(tmp_path / "sys")
    expected = {}
    for n, path in enumerate(_reports(realdata)):
        host = "host001" if n % 2 == 0 else "host002"
        proc = subprocess.run(
            [sys.executable, "-m", "pools.agent", "--server", weft_server.url, "--token", token, "--host", host,
             "--xml", str(path), "--sysfs", str(sysfs)],
            cwd=BASE_DIR, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 0, (path.name, proc.stdout, proc.stderr)
        body = json.loads(proc.stdout.strip().splitlines()[-1])
        from pools.parsers import parse_gpu_report

        report = parse_gpu_report(path.read_text())
        assert (body["status"], body["host"], body["added"]) == (200, host, len(report.gpus)), path.name
        assert body["gpus"] == len(report.gpus)
        assert body["mig_slices"] == sum(len(g.mig_devices) for g in report.gpus)
        assert [w["where"] for w in body["warnings"]] == [w.where for w in report.warnings]
        assert "HCAs read through" in proc.stderr
        expected.update({g.uuid: host for g in report.gpus})
    # the server lists every GPU posted (moved ones on the host that reported them last)
    import urllib.request

    req = urllib.request.Request(f"{weft_server.url}/api/pools/gpus/?limit=1000&present=true",
                                 headers={"Authorization": f"Token {token}"})  # fmt: skip
    with urllib.request.urlopen(req, timeout=30) as resp:
        listed = json.loads(resp.read())["results"]
    present_last = {g["uuid"]: g["host"]["name"] for g in listed}
    assert set(present_last) <= set(expected)
    assert all(expected[u] == h for u, h in present_last.items())
    # the manage.py entry point is the same agent
    proc = subprocess.run(
        [sys.executable, "manage.py", "weft_agent", "--", "--server", weft_server.url, "--token", "bad",
         "--xml", str(_reports(realdata)[0]), "--host", "host001", "--sysfs", str(sysfs)],
        cwd=BASE_DIR, env=weft_server.env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1 and json.loads(proc.stdout.strip().splitlines()[-1])["status"] == 401


@pytest.mark.slow
def test_agent_token_binding_and_size_limit_through_a_live_server(weft_server_factory, realdata, tmp_path):
    """The real agent against ``manage.py serve`` (daphne): an agent-group token binds to the host
    of its first report and is refused (403) for another; a report above
    ``WEFT_AGENT_MAX_BODY_BYTES`` is a 413 the agent prints; the server logs no traceback."""
    server = weft_server_factory(WEFT_AGENT_MAX_BODY_BYTES="40000")
    netfile = tmp_path / "hosts.net"
    from tests.support.topologies import BASE

    netfile.write_text(BASE)
    server.manage("import_topology", str(netfile), "--fabric", "e2e")
    server.manage("set_role", "agent-01", "viewer", "--create")
    server.manage("shell", "-c", "from django.contrib.auth.models import Group, User; "
                  "User.objects.get(username='agent-01').groups.add(Group.objects.get_or_create(name='Host agent')[0])")  # fmt: skip
    token = server.manage("create_token", "agent-01").stdout.split()[2]
    sysfs = _sysfs(tmp_path / "sys")
    folder = realdata / "nvidia-smi"
    if not folder.is_dir():
        pytest.skip(f"{folder} is absent")
    small, big = folder / "netdata_tesla-p100-pcie.xml", folder / "pai_azure_tesla-k80x4_out_of_order.xml"

    def run(host: str, xml: Path) -> tuple[int, dict]:
        proc = subprocess.run(
            [sys.executable, "-m", "pools.agent", "--server", server.url, "--token", token, "--host", host,
             "--xml", str(xml), "--sysfs", str(sysfs)],
            cwd=BASE_DIR, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        return proc.returncode, json.loads(proc.stdout.strip().splitlines()[-1])

    code, body = run("host001", small)
    assert (code, body["status"], body["host"]) == (0, 200, "host001")
    code, body = run("host002", small)
    assert (code, body["status"], body["code"]) == (1, 403, "host_not_bound")
    assert "bound to host001 (e2e)" in body["detail"]
    code, body = run("host001", big)
    assert (code, body["status"], body["code"], body["limit"]) == (1, 413, "too_large", 40000)
    assert body["size"] > 40000
    log = server.log_path.read_text()  # the whole log
    assert "Traceback" not in log and "Request Entity Too Large: /api/pools/agent/" in log

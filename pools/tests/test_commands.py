"""``manage.py import_gpus``: JSON last line, located errors, nothing written on a bad file."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from pools.models import Gpu, HostInventory


def _run(*args) -> dict:
    out, err = StringIO(), StringIO()
    call_command("import_gpus", *args, stdout=out, stderr=err)
    return json.loads(out.getvalue().strip().splitlines()[-1])


def test_import_real_xml_with_topo(base_fabric, realdata, tmp_path):
    nv = realdata / "nvidia-smi"
    if not nv.is_dir():
        pytest.skip(f"{nv} is absent")
    topo = tmp_path / "topo.txt"
    topo.write_text(
        "\tGPU0\tGPU1\tmlx5_0\tmlx5_1\tCPU Affinity\tNUMA Affinity\n"
        "GPU0\t X \tNV12\tPIX\tSYS\t0-7\t0\nGPU1\tNV12\t X \tSYS\tPXB\t8-15\t1\n"
    )
    s = _run(str(nv / "telegraf_a100-sxm4-80gb_mig4.xml"), "--host", "host001", "--topo", str(topo))
    assert (s["host"], s["gpus"], s["mig_slices"]) == ("host001", 1, 4)
    # the report was for GPU index 1 only (minor number 1): the topo row GPU0 is another GPU
    assert [w["where"] for w in s["warnings"]] == ["nvidia_smi_log/attached_gpus", "topo/GPU0"]
    assert HostInventory.objects.get().warnings == s["warnings"]
    g = Gpu.objects.get()
    assert (g.index, g.rail_device, g.rail_affinity, g.numa_node) == (1, "mlx5_1", "PXB", 1)
    assert g.rail_node.description == "host001 mlx5_1"
    s = _run(str(nv / "pai_azure_tesla-k80x4_out_of_order.xml"), "--host", "host002")
    assert (s["host"], s["gpus"], s["mig_slices"], s["warnings"]) == ("host002", 4, 0, [])


def test_bad_file_is_located_and_writes_nothing(base_fabric, tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text(
        '<?xml version="1.0"?>\n<nvidia_smi_log>\n<gpu id="1">\n<uuid>GPU-1</uuid>\n</nvidia_smi_log>\n'
    )
    with pytest.raises(CommandError, match=r"bad\.xml:5"):
        _run(str(bad), "--host", "host001")
    with pytest.raises(CommandError, match="no host 'ghost'"):
        _run(str(bad), "--host", "ghost")
    with pytest.raises(CommandError, match="no such file"):
        _run(str(tmp_path / "none.xml"), "--host", "host001")
    assert Gpu.objects.count() == 0 and HostInventory.objects.count() == 0

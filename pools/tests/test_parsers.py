"""Parsers of nvidia-smi outputs: every real file of $WEFT_REALDATA/nvidia-smi with exact values,
and located errors for malformed input."""

from __future__ import annotations

import pytest

from pools.parsers import GpuParseError, parse_gpu_report, parse_mig, parse_nvsmi, parse_topo

NVSMI = "nvidia-smi"


@pytest.fixture(scope="module")
def nv(realdata):
    folder = realdata / NVSMI
    if not folder.is_dir():
        pytest.skip(f"{folder} is absent: nvidia-smi real-data tests skipped")
    return lambda name: (folder / name).read_text()


def test_every_realdata_file_parses(realdata):
    folder = realdata / NVSMI
    if not folder.is_dir():
        pytest.skip(f"{folder} is absent")
    files = sorted(folder.iterdir())
    assert len(files) == 15
    for f in files:
        text = f.read_text()
        if f.suffix == ".xml" or "capture" in f.name:
            assert parse_gpu_report(text, source=f.name).gpus, f.name
        elif "topo" in f.name:
            assert parse_topo(text, source=f.name).gpus, f.name
        else:
            listing = parse_mig(text, source=f.name)
            assert listing.profiles or listing.gpu_instances, f.name


def test_k80_out_of_pci_order_indexes_by_position_not_minor_number(nv):
    r = parse_gpu_report(nv("pai_azure_tesla-k80x4_out_of_order.xml"))
    assert r.driver_version == "430.26" and r.cuda_version == "" and r.attached_gpus == 4
    assert [(g.index, g.minor_number, g.pci_bus_id) for g in r.gpus] == [
        (0, 1, "00001580:00:00.0"),
        (1, 2, "00002df7:00:00.0"),
        (2, 3, "00004968:00:00.0"),
        (3, 0, "0000f8d6:00:00.0"),
    ]
    assert r.gpus[3].uuid == "GPU-3341aba2-f01d-2c1f-7dd4-e389779faec2"
    assert [g.memory_used_mib for g in r.gpus] == [587, 587, 0, 0]
    assert {g.memory_total_mib for g in r.gpus} == {11441}
    assert {g.mig_current for g in r.gpus} == {"unsupported"}
    assert {g.health for g in r.gpus} == {"healthy"}
    assert r.warnings == []


def test_single_gpus(nv):
    cases = {
        "netdata_tesla-p100-pcie.xml": ("Tesla P100-PCIE-16GB", "GPU-d3da8716-eaab-75db-efc1-60e88e1cd55e",
                                        16384, 103, 0, 16280, "00000000:00:04.0"),
        "telegraf_a10g.xml": ("NVIDIA A10G", "GPU-9a9a6c50-2a47-2f51-a902-b82c3b127e94",
                              23028, 435, 22, 22569, "00000000:00:1e.0"),
        "telegraf_tesla-t4.xml": ("Tesla T4", "GPU-d37e67a5-91dd-3774-a5cb-99096249601a",
                                  15360, 388, 1032, 13939, "00000000:00:1e.0"),
    }  # fmt: skip
    for name, (product, uuid, total, reserved, used, free, bus) in cases.items():
        (g,) = parse_gpu_report(nv(name), source=name).gpus
        assert (g.product_name, g.uuid, g.memory_total_mib, g.memory_reserved_mib) == (
            product,
            uuid,
            total,
            reserved,
        )
        assert (g.memory_used_mib, g.memory_free_mib, g.pci_bus_id, g.index) == (used, free, bus, 0)
        assert g.health == "healthy" and g.mig_current == "unsupported"


def test_a100_mig_xml_and_lgi(nv):
    r = parse_gpu_report(nv("netdata_a100-sxm4-40gb_mig2.xml"))
    (g,) = r.gpus
    assert (g.mig_current, g.mig_pending, g.memory_total_mib, g.health) == (
        "enabled",
        "enabled",
        40960,
        "unknown",
    )
    assert [(m.gpu_instance_id, m.compute_instance_id, m.memory_total_mib, m.sm_count, m.profile)
            for m in g.mig_devices] == [(1, 0, 19968, 42, ""), (2, 0, 19968, 42, "")]  # fmt: skip
    # the same A100-40GB layout as ThetaGPU's -lgi: two 3g.20gb at 4:4 and 0:4
    r = parse_gpu_report(
        nv("netdata_a100-sxm4-40gb_mig2.xml"),
        mig=nv("alcf_thetagpu_dgx-a100-40gb_mig_lgip_lgipp_lgi_lci.txt"),
    )
    assert [(m.gpu_instance_id, m.profile, m.profile_id, m.placement_start, m.placement_size)
            for m in r.gpus[0].mig_devices] == [(1, "3g.20gb", 9, 4, 4), (2, "3g.20gb", 9, 0, 4)]  # fmt: skip


def test_a100_80gb_report_for_one_of_four_gpus(nv):
    r = parse_gpu_report(nv("telegraf_a100-sxm4-80gb_mig4.xml"))
    (g,) = r.gpus
    assert r.attached_gpus == 4 and g.minor_number == 1 and g.index == 1
    assert len(r.warnings) == 1 and "attached_gpus is 4 but 1" in r.warnings[0].message
    assert [m.gpu_instance_id for m in g.mig_devices] == [3, 4, 5, 6]
    assert {(m.memory_total_mib, m.sm_count) for m in g.mig_devices} == {(19968, 14)}
    assert (g.memory_total_mib, g.memory_used_mib, g.health) == (81920, 50, "healthy")


def test_h100_capture_text_query_list_and_topo(nv):
    r = parse_gpu_report(nv("utkuozdemir_capture_h100-80gb_mig4_590.48.01.txt"), source="h100")
    assert (r.driver_version, r.cuda_version, r.attached_gpus, r.warnings) == ("590.48.01", "13.1", 1, [])
    (g,) = r.gpus
    assert (g.product_name, g.architecture, g.pci_bus_id) == (
        "NVIDIA H100 80GB HBM3",
        "Hopper",
        "00000000:00:09.0",
    )
    # the last -q section (under load)
    assert (g.memory_total_mib, g.memory_reserved_mib, g.memory_used_mib, g.memory_free_mib) == (
        81559,
        479,
        11125,
        69956,
    )
    assert (g.numa_node, g.rail_device, g.health) == (0, "", "healthy")
    assert [
        (m.mig_index, m.gpu_instance_id, m.profile, m.uuid, m.memory_total_mib, m.sm_count)
        for m in g.mig_devices
    ] == [
        (0, 2, "3g.40gb", "MIG-00000000-0000-0000-0000-000000000000", 40448, 60),
        (1, 3, "2g.20gb", "MIG-00000001-0000-0000-0000-000000000001", 20096, 32),
        (2, 9, "1g.10gb", "MIG-00000002-0000-0000-0000-000000000002", 9984, 16),
        (3, 10, "1g.10gb", "MIG-00000003-0000-0000-0000-000000000003", 9984, 16),
    ]


def test_mig_tables(nv):
    theta = parse_mig(nv("alcf_thetagpu_dgx-a100-40gb_mig_lgip_lgipp_lgi_lci.txt"))
    assert [(p.name, p.profile_id, p.free, p.total, p.memory_gib, p.sm, p.ce) for p in theta.profiles] == [
        ("1g.5gb", 19, 0, 7, 4.75, 14, 1), ("2g.10gb", 14, 0, 3, 9.75, 28, 2), ("3g.20gb", 9, 0, 2, 19.62, 42, 3),
        ("4g.20gb", 5, 0, 1, 19.62, 56, 4), ("7g.40gb", 0, 0, 1, 39.5, 98, 7),
    ]  # fmt: skip
    assert theta.placements[(0, 19)] == ([0, 1, 2, 3, 4, 5, 6], 1)
    assert theta.placements[(0, 14)] == ([0, 2, 4], 2)
    assert theta.placements[(0, 0)] == ([0], 8)
    assert [(c.gpu_instance_id, c.profile, c.instance_id) for c in theta.compute_instances] == [
        (1, "1c.3g.20gb", 0), (2, "1c.3g.20gb", 0)]  # fmt: skip
    gh = parse_mig(nv("cuanschutz_gh200_mig_lgip.txt"))
    assert [p.name for p in gh.profiles] == [
        "1g.12gb",
        "1g.12gb+me",
        "1g.24gb",
        "2g.24gb",
        "3g.48gb",
        "4g.48gb",
        "7g.96gb",
    ]
    assert (gh.profiles[-1].sm, gh.profiles[-1].memory_gib, gh.profiles[-1].ce, gh.profiles[1].ofa) == (
        132,
        93.0,
        8,
        1,
    )
    seven = parse_mig(nv("nvidia_cloud-native-docs_a100-40gb_7x1g.5gb_mig_lgi.txt"))
    assert [(i.instance_id, i.placement_start, i.placement_size) for i in seven.gpu_instances] == [
        (7 + n, n, 1) for n in range(7)]  # fmt: skip
    assert {i.profile for i in seven.gpu_instances} == {"1g.5gb"}


def test_topo_rails(nv):
    def rails(name):
        return {i: (r.device, r.affinity) for i, r in parse_topo(nv(name)).rails().items()}

    dgx = parse_topo(nv("gengwg_dgx-a100_mlx5x12.topo-m.txt"))
    assert len(dgx.nics) == 12 and [dgx.gpus[i].numa_node for i in range(8)] == [3, 3, 1, 1, 7, 7, 5, 5]
    assert rails("gengwg_dgx-a100_mlx5x12.topo-m.txt") == {
        0: ("mlx5_0", "PXB"), 1: ("mlx5_1", "PXB"), 2: ("mlx5_2", "PXB"), 3: ("mlx5_3", "PXB"),
        4: ("mlx5_6", "PXB"), 5: ("mlx5_7", "PXB"), 6: ("mlx5_8", "PXB"), 7: ("mlx5_9", "PXB")}  # fmt: skip
    assert rails("gengwg_dgx1_v100_mlx5x4.topo-mp.txt") == {i: (f"mlx5_{i // 2}", "PIX") for i in range(8)}
    assert rails("princeton_della_a100x2_mlx5x2.topo-m.txt") == {0: ("mlx5_0", "NODE"), 1: ("mlx5_1", "NODE")}
    assert rails("princeton_traverse_v100x4_power9_mlx5x4.topo-m.txt") == {
        i: (f"mlx5_{i}", "NODE") for i in range(4)
    }
    stelline = parse_topo(nv("stelline_asus-esc8000a-e12_rtx6000ada-x4_nic-legend.topo-m.txt"))
    assert stelline.nics == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert {i: r.device for i, r in stelline.rails().items()} == {i: f"mlx5_{i}" for i in range(4)}
    traverse = parse_topo(nv("princeton_traverse_v100x4_power9_mlx5x4.topo-m.txt"))
    assert traverse.gpus[2].numa_node == 8 and traverse.gpus[0].gpus == {1: "NV3", 2: "SYS", 3: "SYS"}


XML_HEAD = '<?xml version="1.0" ?>\n<nvidia_smi_log>\n<attached_gpus>1</attached_gpus>\n'


def _gpu(body: str, uuid: str = "GPU-1") -> str:
    return f'<gpu id="00000000:01:00.0">\n<uuid>{uuid}</uuid>\n{body}\n</gpu>\n'


def test_wrapped_memory_flagged_and_not_taken():
    fb = "<fb_memory_usage><total>16384 MiB</total><used>17592186044415 MiB</used><free>200 MiB</free></fb_memory_usage>"
    r = parse_nvsmi(XML_HEAD + _gpu(fb) + "</nvidia_smi_log>", source="c.xml")
    (g,) = r.gpus
    assert (g.memory_total_mib, g.memory_used_mib, g.memory_free_mib) == (16384, None, 200)
    assert [w.where for w in r.warnings] == ["gpu[0]/fb_memory_usage/used"]
    assert "impossible" in r.warnings[0].message


def test_entities_and_malformed_xml_are_located_errors():
    bomb = '<?xml version="1.0"?>\n<!DOCTYPE x [<!ENTITY a "aaaa">]>\n<nvidia_smi_log>&a;</nvidia_smi_log>'
    with pytest.raises(GpuParseError) as e:
        parse_nvsmi(bomb, source="bomb.xml")
    assert e.value.line == 2 and "bomb.xml:2" in str(e.value)
    ext = '<?xml version="1.0"?>\n<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>\n<nvidia_smi_log>&e;</nvidia_smi_log>'
    with pytest.raises(GpuParseError, match="refused"):
        parse_nvsmi(ext, source="ext.xml")
    with pytest.raises(GpuParseError) as e:
        parse_nvsmi(XML_HEAD + _gpu("<minor_number>x</minor_number>") + "</nvidia_smi_log>", source="m.xml")
    assert e.value.element == "gpu[0]/minor_number"
    with pytest.raises(GpuParseError) as e:
        parse_nvsmi(XML_HEAD + "<gpu id='1'>\n<uuid>GPU-1</uuid>\n</gpux></nvidia_smi_log>", source="t.xml")
    assert e.value.line == 6
    with pytest.raises(GpuParseError) as e:
        parse_nvsmi(
            XML_HEAD + "<gpu id='1'><product_name>x</product_name></gpu></nvidia_smi_log>", source="u.xml"
        )
    assert e.value.element == "gpu[0]/uuid"
    with pytest.raises(GpuParseError, match="not nvidia-smi -q output"):
        parse_nvsmi("hello", source="h.txt")


def test_health_from_recovery_action_ecc_and_remapping():
    body = ("<gpu_recovery_action>Reset</gpu_recovery_action><ecc_errors><volatile><dram_uncorrectable>2"
            "</dram_uncorrectable></volatile></ecc_errors>")  # fmt: skip
    (g,) = parse_nvsmi(XML_HEAD + _gpu(body) + "</nvidia_smi_log>").gpus
    assert g.health == "unhealthy" and g.health_reasons == [
        "recovery action: Reset",
        "2 volatile uncorrectable ECC error(s)",
    ]
    body = "<remapped_rows><remapped_row_pending>Yes</remapped_row_pending><remapped_row_failure>No</remapped_row_failure></remapped_rows>"
    (g,) = parse_nvsmi(XML_HEAD + _gpu(body) + "</nvidia_smi_log>").gpus
    assert (g.health, g.health_reasons) == ("degraded", ["rows pending remapping (reset needed)"])


def test_mig_and_topo_errors_are_located():
    bad = "+---+\n| GPU instances: |\n|====|\n|   0  MIG 1g.5gb  19  x  0:1 |\n"
    with pytest.raises(GpuParseError) as e:
        parse_mig(bad, source="lgi.txt")
    assert (e.value.line, e.value.element) == (4, "-lgi")
    with pytest.raises(GpuParseError) as e:
        parse_topo("\tGPU0\tmlx5_0\nGPU0\t X \tFOO\n", source="t.txt")
    assert (e.value.line, e.value.element) == (2, "GPU0")
    with pytest.raises(GpuParseError, match="no matrix header"):
        parse_topo("nothing here", source="t.txt")

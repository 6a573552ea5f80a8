"""Cables and transceivers (issue 26 §3, cables): readings stored with a bounded history by the
one writer (``fabric.services.cables``), the ``cable.*`` alarms they raise and clear, the import
command with its located refusals, the port and switch pages, the ``cables`` API, ``/metrics``
(checked by ``promtool check metrics``), and collection through scripts standing in for
``ibdiagnet`` and ``mlxlink`` (neither is on this machine, and ibsim's ports have no modules: the
stand-ins print the hand-written samples of ``cable_samples/``; everything after the program is
Weft's, including the timeout that kills a hung run's process group)."""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
from html import unescape
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from accounts.models import AuditEntry
from events.engine import process_pending_events
from events.models import Alarm, Event
from fabric.choices import NodeType
from fabric.models import CableInfo, Fabric, Link, Node, Port
from fabric.services import cables
from fabric.services.cables import CableInfoError, collect, conditions, import_text
from tests.support.output import Collect

SAMPLES = Path(__file__).parent / "cable_samples"
LEAF, HOST = "0x7cfe900300aa0000", "0x1070fd03001b2200"


def _text(name: str) -> str:
    return (SAMPLES / name).read_text()


def _fabric() -> Fabric:
    """A switch ``leaf-a`` (LID 28, ports 1-13) linked to an HCA on port 13 and ports 1-4 linked
    to each other (1-2, 3-4), as the samples' GUIDs name them."""
    fabric = Fabric.objects.create(name="hall")
    leaf = Node.objects.create(fabric=fabric, node_guid=LEAF, node_type=NodeType.SWITCH, lid=28,
                               description="leaf-a", num_ports=40)  # fmt: skip
    host = Node.objects.create(fabric=fabric, node_guid=HOST, node_type=NodeType.CA, description="node-7 mlx5_0",
                               num_ports=1)  # fmt: skip
    ports = {n: Port.objects.create(node=leaf, port_num=n) for n in range(1, 14)}
    hca = Port.objects.create(node=host, port_num=1, lid=41)
    Link.objects.create(fabric=fabric, port_a=ports[1], port_b=ports[2])
    Link.objects.create(fabric=fabric, port_a=ports[3], port_b=ports[4])
    Link.objects.create(fabric=fabric, port_a=ports[13], port_b=hca)
    return fabric


def _port(guid: str, num: int) -> Port:
    return Port.objects.get(node__node_guid=guid, port_num=num)


def test_conditions_use_the_modules_thresholds_then_the_settings():
    hot = {
        "temperature_c": 71.0,
        "temperature_high_c": 70.0,
        "rx_power_dbm": [-1.3, -12.4],
        "rx_power_low_dbm": -10.402,
    }
    c = conditions(hot, 75, -12)
    assert c["temperature"] == cables.Condition(True, "71 °C (limit 70 °C)")
    assert c["rx_power"] == cables.Condition(True, "lane 1 at -12.4 dBm (limit -10.402 dBm)")
    plain = conditions({"temperature_c": 71.0, "rx_power_dbm": [-11.0]}, 75, -12)  # no module threshold
    assert not plain["temperature"].failed and plain["temperature"].why == "71 °C (limit 75 °C)"
    assert not plain["rx_power"].failed
    flagged = conditions({"alarms": ["HighTemperatureAlarm", "LowRX3PowerAlarm"]}, 75, -12)
    assert flagged["temperature"].failed and flagged["rx_power"].why == (
        "the module flags LowRX3PowerAlarm (limit -12 dBm)"
    )
    assert conditions({"part_number": "MCP1600-E002E30"}, 75, -12) == {}  # passive copper: nothing to judge


@pytest.mark.django_db
def test_db_csv_import_raises_and_clears_alarms_and_keeps_a_bounded_history(users, settings):
    settings.WEFT_CABLE_INFO_KEEP = 2
    fabric = _fabric()
    text = _text("ibdiagnet2_cables.db_csv")
    out = import_text(fabric, text, source_name="db.csv", user=users["admin"])
    assert (out["format"], out["stored"], out["events"]) == ("db_csv", 5, 2)
    assert out["unmatched"] == ["port 0x0000000000dead01/9 is not a port of fabric hall (skipped)"]
    assert "line 17: CABLE_INFO: Temperature: not a temperature: 'warm'" in out["problems"]
    entry = AuditEntry.objects.get(action="cable_info.import")
    assert entry.changes == {"file": "db.csv", "ports": 5, "events": 2} and entry.user == users["admin"]

    hot = Event.objects.get(code="cable.temperature_high")
    assert (hot.object_key, hot.port_id) == (f"{LEAF}/2/cable_temperature", _port(LEAF, 2).pk)
    assert "82 °C (limit 80 °C); the module flags HighTemperatureAlarm" in hot.message
    low = Event.objects.get(code="cable.rx_power_low")
    assert low.object_key == f"{LEAF}/4/cable_rx_power" and "lane 1 at -19 dBm (limit -12 dBm)" in low.message
    process_pending_events(fabric.pk)
    assert sorted(Alarm.objects.open().values_list("code", flat=True)) == [
        "cable.rx_power_low",
        "cable.temperature_high",
    ]

    import_text(fabric, text, source_name="db.csv")  # unchanged: no second event
    assert Event.objects.filter(code__startswith="cable.").count() == 2

    cooler = text.replace('"82C",6,"46.118.96","6123"', '"51C",6,"46.118.96","6123"').replace(
        '"NA",0x1,0,1,0,"80C"', '"NA",0,0,0,0,"80C"'
    )
    swapped = cooler.replace("MT2231FT11108", "MT2299FT00001")  # port 1's module (and the HCA's) replaced
    import_text(fabric, swapped, source_name="db2.csv")
    assert Event.objects.filter(code="cable.temperature_ok").count() == 1
    replaced = Event.objects.filter(code="cable.replaced").order_by("object_key")
    assert [e.object_key for e in replaced] == [f"{HOST}/1/cable", f"{LEAF}/1/cable"]
    assert "module MT2231FT11108 replaced by MT2299FT00001 (MFS1S00-H003V)" in replaced[1].message
    process_pending_events(fabric.pk)
    assert list(Alarm.objects.open().values_list("code", flat=True)) == ["cable.rx_power_low"]
    assert CableInfo.objects.filter(port=_port(LEAF, 2)).count() == 2  # WEFT_CABLE_INFO_KEEP
    assert CableInfo.objects.filter(port=_port(LEAF, 2)).first().data["temperature_c"] == 51.0


@pytest.mark.django_db
def test_import_command_names_the_port_or_refuses_with_the_file_and_why(tmp_path):
    fabric = _fabric()
    junk = tmp_path / "junk.txt"
    junk.write_text("Segmentation fault\n")
    copper, optic = (
        str(SAMPLES / "mlxlink_passive_copper.txt"),
        str(SAMPLES / "mlxlink_switch_port_optic.txt"),
    )
    cases = [
        (["--file", copper], "mlxlink output does not name its port: give --port GUID:PORT"),
        (["--file", copper, "--port", "leaf-a:3"], "--port 'leaf-a:3': give GUID:PORT"),
        (["--file", copper, "--port", f"{LEAF}:99"], f"port {LEAF}/99 is not a port of fabric hall"),
        (["--file", str(SAMPLES / "mlxlink_malformed.txt")], "no port of fabric hall at lid 41 port 3"),
        (["--file", str(junk)], "junk.txt:0: no 'name : value' line: not mlxlink output"),
        (["--file", str(junk), "--format", "db_csv"], "junk.txt:0: no START_ section: not an ibdiagnet db_csv"),
        (["--file", str(SAMPLES / "ibdiagnet2_no_cables.db_csv")], "no CABLE_INFO section (run ibdiagnet with --get_cable_info)"),
        (["--file", str(tmp_path / "absent.txt")], "absent.txt: No such file or directory"),
    ]  # fmt: skip
    for args, said in cases:
        err: list[str] = []
        with pytest.raises(CommandError, match="1 of 1 files not imported"):
            call_command("cable_info", fabric.name, *args, stderr=Collect(err), stdout=Collect([]))
        assert said in "".join(err), (args, err)
    assert not CableInfo.objects.exists()

    out: list[str] = []
    call_command("cable_info", fabric.name, "--file", optic, "--file", copper, "--port", f"{LEAF}:3",
                 stdout=Collect(out), stderr=Collect([]))  # fmt: skip
    summary = json.loads(out[-1])
    assert summary["failed"] == 0 and [i["stored"] for i in summary["imported"]] == [1, 1]
    # --port names the port of every file given with it: it wins over the optic's own command line
    assert CableInfo.objects.filter(port=_port(LEAF, 3)).count() == 2
    with pytest.raises(CommandError, match="not collected: no cable data: set the fabric's cable info tool"):
        call_command("cable_info", fabric.name, stdout=Collect([]))


@pytest.mark.django_db
def test_mlxlink_header_names_the_switch_port():
    fabric = _fabric()
    out = import_text(fabric, _text("mlxlink_switch_port_optic.txt"), source_name="optic.txt")
    row = CableInfo.objects.get()
    assert row.port == _port(LEAF, 13) and out["events"] == 2  # 71 °C over its 70 °C; lane 2 at -12.4 dBm
    assert row.data["fec"] == "Standard LL RS-FEC - RS(271,257)" and row.data["effective_ber"] == 2e-15
    with pytest.raises(CableInfoError, match="lid 28 is switch leaf-a: its command line gives no -p PORT"):
        import_text(fabric, "$ mlxlink -d lid-28 -m\n" + _text("mlxlink_passive_copper.txt"), source_name="x")
    import_text(fabric, "# mlxlink -d lid-41 -m\n" + _text("mlxlink_passive_copper.txt"), source_name="hca")
    assert CableInfo.objects.filter(port=_port(HOST, 1)).get().data["cable_type"] == "Passive copper cable"


@pytest.mark.django_db
def test_port_and_switch_pages_show_the_reading_or_why_there_is_none(client_for, settings):
    fabric = _fabric()
    viewer = client_for("viewer")
    p13 = _port(LEAF, 13)
    page = unescape(viewer.get(f"/fabric/ports/{p13.pk}/", secure=True).content.decode())
    assert "No cable data: set the fabric's cable info tool (ibdiagnet or mlxlink)" in page
    import_text(fabric, _text("mlxlink_switch_port_optic.txt"), source_name="optic.txt")
    page = unescape(viewer.get(f"/fabric/ports/{p13.pk}/", secure=True).content.decode())
    assert "Mellanox / MFS1S00-H010V / MT2217FT07781 rev A3" in page
    assert "QSFP56, Optical Module (separated), 850 nm VCSEL, 850 nm" in page and "10 m" in page
    assert '<dd id="cable-temperature" class="state-1">71 °C (limit 70 °C)</dd>' in page
    assert "-1.31, -0.98, -12.40, -1.12 dBm (low limit -10.402 dBm)" in page
    assert "Standard LL RS-FEC - RS(271,257); effective BER 2e-15, raw BER 8e-09, 3 symbol errors" in page
    assert "imported from a file" in page
    Fabric.objects.filter(pk=fabric.pk).update(cable_info_tool="mlxlink")
    settings.WEFT_MLXLINK = "/nonexistent/mlxlink"
    page = unescape(viewer.get(f"/fabric/ports/{_port(LEAF, 12).pk}/", secure=True).content.decode())
    assert "No cable data: mlxlink is not installed here (set WEFT_MLXLINK or put it on PATH" in page
    switch = unescape(viewer.get(f"/fabric/nodes/{p13.node_id}/", secure=True).content.decode())
    assert '<td class="cable">MFS1S00-H010V 10 m <span class="muted">71 °C</span></td>' in switch


def _script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.mark.django_db
def test_collect_with_mlxlink_runs_it_per_linked_switch_port_with_a_timeout(tmp_path, settings, monkeypatch):
    fabric = _fabric()
    optic, copper = SAMPLES / "mlxlink_switch_port_optic.txt", SAMPLES / "mlxlink_passive_copper.txt"
    settings.WEFT_MLXLINK = _script(tmp_path / "mlxlink", f"""[ "$1 $3" = "-d -p" ] || exit 2
case "$2:$4" in
  lid-28:13) cat "{optic}" ;;
  lid-28:1|lid-28:2|lid-28:3) cat "{copper}" ;;
  lid-28:4) exec sleep 30 ;;
  *) echo "-E- no such port $2 $4" >&2; exit 1 ;;
esac
""")  # fmt: skip
    assert collect(fabric) == {"skipped": "set the fabric's cable info tool (ibdiagnet or mlxlink) or import a "
                               "saved output with manage.py cable_info --file"}  # fmt: skip
    Fabric.objects.filter(pk=fabric.pk).update(cable_info_tool="mlxlink")
    fabric.refresh_from_db()
    monkeypatch.setattr(cables, "MLXLINK_TIMEOUT_S", 1.0)
    out = collect(fabric)
    assert (out["tool"], out["ports"], out["stored"], out["events"]) == ("mlxlink", 5, 4, 2)
    assert list(out["failed"]) == ["leaf-a [4]"]
    assert out["failed"]["leaf-a [4]"].endswith("mlxlink did not finish within 1 s (killed)")
    assert sorted(CableInfo.objects.values_list("port__port_num", "source")) == [
        (1, "mlxlink"), (2, "mlxlink"), (3, "mlxlink"), (13, "mlxlink")]  # fmt: skip


@pytest.mark.django_db
def test_collect_with_ibdiagnet_reads_its_db_csv_even_when_it_exits_non_zero(tmp_path, settings):
    fabric = _fabric()
    Fabric.objects.filter(pk=fabric.pk).update(cable_info_tool="ibdiagnet", ca_name="mlx5_0", ca_port=1)
    fabric.refresh_from_db()
    sample = SAMPLES / "ibdiagnet2_cables.db_csv"
    args = tmp_path / "args"
    settings.WEFT_IBDIAGNET = _script(tmp_path / "ibdiagnet", f"""echo "$@" > "{args}"
while [ $# -gt 0 ]; do [ "$1" = "-o" ] && out="$2"; shift; done
cp "{sample}" "$out/ibdiagnet2.db_csv"
echo "-E- 3 errors found in the fabric" >&2
exit 1
""")  # fmt: skip
    out = collect(fabric)
    assert (out["tool"], out["rows"], out["unmatched"], out["stored"], out["events"]) == (
        "ibdiagnet",
        6,
        1,
        5,
        2,
    )
    used = args.read_text().split()
    assert used[0] == "--get_cable_info" and used[-4:] == ["-i", "mlx5_0", "-p", "1"]
    assert not Path(used[2]).exists()  # its output directory is removed
    settings.WEFT_IBDIAGNET = _script(tmp_path / "ibdiagnet-broken", 'echo "-E- no HCA found" >&2\nexit 1\n')
    assert collect(fabric) == {
        "tool": "ibdiagnet",
        "failed": "ibdiagnet wrote no ibdiagnet2.db_csv (exit 1: -E- no HCA found)",
    }


@pytest.mark.django_db
def test_cables_api_lists_latest_readings_with_filters(client_for):
    fabric = _fabric()
    import_text(fabric, _text("ibdiagnet2_cables.db_csv"), source_name="db.csv")
    import_text(fabric, _text("mlxlink_switch_port_optic.txt"), source_name="optic.txt")
    import_text(fabric, _text("mlxlink_switch_port_optic.txt"), source_name="optic.txt")
    api = client_for("viewer")
    body = api.get("/api/fabric/cables/", {"latest": "true"}, secure=True).json()
    assert body["count"] == 6  # 5 db_csv ports + port 13 once
    one = api.get("/api/fabric/cables/", {"node_guid": LEAF, "port_num": "13"}, secure=True).json()
    assert one["count"] == 2  # the history
    r = one["results"][0]
    assert r["port"]["port_num"] == 13 and r["port"]["node"]["node_guid"] == LEAF and r["source"] == "file"
    reading = r["reading"]
    assert (reading["part_number"], reading["temperature_c"], reading["rx_power_dbm"][2]) == (
        "MFS1S00-H010V",
        71.0,
        -12.4,
    )
    assert reading["effective_ber"] == 2e-15 and reading["problems"] == []
    hot = api.get("/api/fabric/cables/", {"serial_number": "MT2231FT11109"}, secure=True).json()["results"]
    assert [h["reading"]["alarms"] for h in hot] == [["HighTemperatureAlarm", "HighTemperatureWarning"]]
    assert api.get("/api/fabric/cables/", {"port_num": "x"}, secure=True).status_code == 400
    detail = api.get(f"/api/fabric/cables/{r['id']}/", secure=True).json()
    assert detail["reading"]["fec"].startswith("Standard")


@pytest.mark.django_db
def test_metrics_give_the_latest_reading_per_port_in_prometheus_format(client_for):
    fabric = _fabric()
    import_text(fabric, _text("ibdiagnet2_cables.db_csv"), source_name="db.csv")
    import_text(fabric, _text("mlxlink_switch_port_optic.txt"), source_name="optic.txt")
    body = client_for("viewer").get("/metrics?collect[]=cables", secure=True).content.decode()
    assert (
        f'weft_cable_info{{fabric="hall",guid="{LEAF}",length_m="10",part="MFS1S00-H010V",port="13",'
        f'serial="MT2217FT07781",vendor="Mellanox"}} 1.0' in body
    )
    assert f'weft_cable_temperature_celsius{{fabric="hall",guid="{LEAF}",port="2"}} 82.0' in body
    assert f'weft_cable_temperature_limit_celsius{{fabric="hall",guid="{LEAF}",port="2"}} 80.0' in body
    assert f'weft_cable_rx_power_dbm{{fabric="hall",guid="{LEAF}",lane="2",port="13"}} -12.4' in body
    assert f'weft_cable_effective_ber{{fabric="hall",guid="{LEAF}",port="13"}} 2e-15' in body
    assert body.count("weft_cable_info{") == 6 and "weft_port_info" not in body
    if shutil.which("promtool") is None:
        pytest.skip("promtool not installed (apt-get install prometheus)")
    check = subprocess.run(
        ["promtool", "check", "metrics"], input=body.encode(), capture_output=True, timeout=60
    )
    assert (check.returncode, check.stdout, check.stderr) == (0, b"", b"")

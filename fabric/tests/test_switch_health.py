"""Switch health (issue 26 §3) on the real ``ibswinfo.sh`` outputs in ``$WEFT_REALDATA/ibswinfo``
(the treydock and SckyzO IB exporters' fixtures: a healthy Quantum, a SwitchIB with a fan status
ERROR, one with a PSU's DC power and fan ERROR, a malformed power, missing fields, and the
``-o vitals`` form): the pure parser, the alarms the readings raise and clear, the import command
with its located refusals, the switch page, and the collection through a script standing in for
``ibswinfo.sh`` (it needs NVIDIA MFT's ``mlxreg``, which is not on this machine, and ibsim has no
switch registers: the stand-in prints the real outputs; everything after the program is Weft's).
"""

from __future__ import annotations

import stat
from html import unescape

import pytest

from accounts.models import AuditEntry
from conftest import REALDATA
from events.engine import process_pending_events
from events.models import Alarm, Event
from fabric.choices import NodeType
from fabric.models import Fabric, Node, SwitchHealth
from fabric.parsers.ibswinfo import IbswinfoParseError, parse_ibswinfo
from fabric.services.switchhealth import collect, conditions, import_text
from tests.support.output import Collect

DIR = REALDATA / "ibswinfo"
pytestmark = pytest.mark.skipif(
    not DIR.is_dir(), reason=f"real ibswinfo outputs not found in {DIR} (WEFT_REALDATA)"
)


def _text(name: str) -> str:
    return (DIR / name).read_text()


def test_parser_reads_the_real_outputs():
    healthy = parse_ibswinfo(_text("treydock_ibswinfo_test2.out"))
    assert (healthy.part_number, healthy.serial_number, healthy.firmware) == (
        "MQM8790-HS2F",
        "MT2152T10239",
        "27.2010.3118",
    )
    assert (healthy.guid, healthy.ports, healthy.asic) == (
        "0x08c0eb0300d9f672",
        40,
        "Quantum Mellanox Technologies",
    )
    assert healthy.uptime_s == 96 * 86400 + 1 * 3600 + 55 * 60 + 47  # 96d-01:55:47
    assert (healthy.temperature_c, healthy.max_temperature_c, healthy.fan_status) == (53, 58, "OK")
    assert [(p.index, p.status, p.power_w, p.serial_number) for p in healthy.psus] == [
        (0, "OK", 154, "MT2150T22468"), (1, "OK", 134, "MT2150T22467")]  # fmt: skip
    assert healthy.fans == {1: 6125, 2: 5251, 3: 6013, 4: 5335, 5: 6068, 6: 5423, 7: 5854, 8: 5467, 9: 5906}
    assert healthy.problems == []

    err = parse_ibswinfo(_text("treydock_ibswinfo_test-err1.out"))
    assert err.psus[0].power_w is None and err.problems == ["line 20: PSU0 power (W): not a number: 'foo'"]
    missing = parse_ibswinfo(_text("treydock_ibswinfo_test1-missing.out"))
    assert missing.problems == ["line 18: PSU1 status: no value", "line 26: fan#1 (rpm): no value"]
    assert missing.temperature_c is None and 1 not in missing.fans and missing.psus[1].power_w == 71

    vitals = parse_ibswinfo(_text("sckyzo_ibswinfo_vitals1.out"))
    assert (vitals.uptime_s, vitals.temperature_c, vitals.max_temperature_c, vitals.guid) == (
        16982312,
        73,
        80,
        None,
    )
    assert [(p.index, p.power_w) for p in vitals.psus] == [(0, 92), (1, 102)] and len(vitals.fans) == 9

    with pytest.raises(IbswinfoParseError, match="not ibswinfo output"):
        parse_ibswinfo("Segmentation fault\n", source="x.out")


def test_conditions_name_what_failed():
    fan = conditions(parse_ibswinfo(_text("treydock_ibswinfo_test1.out")).as_dict(), 80)
    assert fan["fans"].failed and fan["fans"].why == "fan status ERROR"
    assert not fan["psu0"].failed and not fan["temperature"].failed
    psu = conditions(parse_ibswinfo(_text("treydock_ibswinfo_test3.out")).as_dict(), 80)
    assert psu["psu1"].failed and psu["psu1"].why == "DC power ERROR, fan ERROR" and not psu["psu0"].failed
    hot = conditions(parse_ibswinfo(_text("treydock_ibswinfo_test2.out")).as_dict(), 53)
    assert hot["temperature"].failed and hot["temperature"].why == "53 °C (limit 53 °C)"
    # a threshold printed by the switch wins over the setting
    own = parse_ibswinfo(_text("treydock_ibswinfo_test2.out") + "warn threshold (C) | 50/52 (low/high)\n")
    assert (own.warn_low_c, own.warn_high_c) == (50, 52) and conditions(own.as_dict(), 99)[
        "temperature"
    ].failed
    # the vitals form has no status at all: only temperature is judged
    assert set(conditions(parse_ibswinfo(_text("sckyzo_ibswinfo_vitals1.out")).as_dict(), 80)) == {
        "fans",
        "temperature",
    }


def _fabric_with_switches() -> Fabric:
    fabric = Fabric.objects.create(name="unmanaged")
    for lid, name in (
        (2, "treydock_ibswinfo_test1.out"),
        (3, "treydock_ibswinfo_test2.out"),
        (4, "treydock_ibswinfo_test3.out"),
    ):
        guid = parse_ibswinfo(_text(name)).guid
        Node.objects.create(fabric=fabric, node_guid=guid, node_type=NodeType.SWITCH, lid=lid,
                            description=f"switch-{lid}", num_ports=40)  # fmt: skip
    return fabric


@pytest.mark.django_db
def test_readings_raise_and_clear_alarms_and_keep_a_bounded_history(users, settings):
    settings.WEFT_SWITCH_HEALTH_KEEP = 2
    fabric = _fabric_with_switches()
    ok = import_text(fabric, _text("treydock_ibswinfo_test2.out"), source_name="t2.out", user=users["admin"])
    assert ok.node.lid == 3 and not Event.objects.exists()  # a healthy first reading says nothing
    entry = AuditEntry.objects.get(action="switch_health.import")
    assert entry.changes == {"file": "t2.out", "events": 0} and entry.user == users["admin"]

    fan_text = _text("treydock_ibswinfo_test1.out")
    import_text(fabric, fan_text, source_name="t1.out")
    ev = Event.objects.get(code="switch.fan_failed")
    assert ev.object_key == "0x1c34da0300010540/fans" and "fan status ERROR" in ev.message
    import_text(fabric, fan_text, source_name="t1.out")  # still failed: no second event
    assert Event.objects.filter(code="switch.fan_failed").count() == 1
    process_pending_events(fabric.pk)
    assert list(Alarm.objects.open().values_list("code", "object_key")) == [
        ("switch.fan_failed", "0x1c34da0300010540/fans")
    ]

    import_text(
        fabric,
        fan_text.replace("fan status         | ERROR", "fan status         | OK"),
        source_name="t1-fixed.out",
    )
    assert Event.objects.filter(code="switch.fan_ok").count() == 1
    process_pending_events(fabric.pk)
    assert not Alarm.objects.open().exists()
    node = Node.objects.get(lid=2)
    assert SwitchHealth.objects.filter(node=node).count() == 2  # WEFT_SWITCH_HEALTH_KEEP
    assert SwitchHealth.objects.filter(node=node).first().data["fan_status"] == "OK"

    import_text(fabric, _text("treydock_ibswinfo_test3.out"), source_name="t3.out")
    psu = Event.objects.get(code="switch.psu_failed")
    assert (psu.object_key, psu.severity) == ("0x08c0eb0300add20e/psu1", "critical")
    assert "PSU1 failed: DC power ERROR, fan ERROR" in psu.message


@pytest.mark.django_db
def test_import_command_refuses_with_the_file_and_why(tmp_path):
    fabric = _fabric_with_switches()
    junk = tmp_path / "junk.out"
    junk.write_text("Segmentation fault\n")
    cases = [
        (["--file", str(DIR / "sckyzo_ibswinfo_vitals1.out")], "has no GUID line: name the switch (--switch GUID)"),
        (["--file", str(DIR / "sckyzo_ibswinfo_vitals1.out"), "--switch", "0x1234"], "switch 0x0000000000001234 is not a switch of fabric unmanaged"),
        (["--file", str(junk)], "junk.out: no 'key | value' line: not ibswinfo output"),
        (["--file", str(tmp_path / "absent.out")], "absent.out: No such file or directory"),
    ]  # fmt: skip
    from django.core.management import call_command
    from django.core.management.base import CommandError

    for args, said in cases:
        err = []
        with pytest.raises(CommandError, match="1 of 1 files not imported"):
            call_command("switch_health", fabric.name, *args, stderr=Collect(err), stdout=Collect([]))
        assert said in "".join(err), (args, err)
    assert not SwitchHealth.objects.exists()
    out = []
    call_command("switch_health", fabric.name, "--file", str(DIR / "sckyzo_ibswinfo_vitals1.out"),
                 "--switch", parse_ibswinfo(_text("treydock_ibswinfo_test2.out")).guid, stdout=Collect(out))  # fmt: skip
    assert '"imported": [{"file"' in "".join(out) and SwitchHealth.objects.get().data["temperature_c"] == 73


@pytest.mark.django_db
def test_switch_page_shows_the_reading_or_why_there_is_none(client_for, settings):
    fabric = _fabric_with_switches()
    node = Node.objects.get(lid=4)
    viewer = client_for("viewer")
    page = unescape(viewer.get(f"/fabric/nodes/{node.pk}/").content.decode())
    assert "No health reading: the fabric reads no switch health" in page
    import_text(fabric, _text("treydock_ibswinfo_test3.out"), source_name="t3.out")
    page = unescape(viewer.get(f"/fabric/nodes/{node.pk}/").content.decode())
    assert "MQM8790-HS2F / MT2148T25782" in page and "27.2010.4102 / MT_0000000063" in page
    assert "47 °C (limit 80 °C; peak since reset 52 °C)" in page and "67d 04:19:16" in page
    assert '<tr data-psu="1"><td>PSU1</td><td>OK</td><td>ERROR</td><td>ERROR</td><td>—</td>' in page
    assert "#9 5854 rpm" in page and "imported from a file" in page
    Fabric.objects.filter(pk=fabric.pk).update(switch_info_tool="ibswinfo")
    settings.WEFT_IBSWINFO = ""
    page = unescape(viewer.get(f"/fabric/nodes/{node.pk}/").content.decode())
    assert "ibswinfo.sh is not installed here (WEFT_IBSWINFO is not set" in page


@pytest.mark.django_db
def test_collect_runs_the_tool_per_switch_and_stores_what_it_printed(tmp_path, settings):
    fabric = _fabric_with_switches()
    files = {
        2: "treydock_ibswinfo_test1.out",
        3: "treydock_ibswinfo_test2.out",
        4: "treydock_ibswinfo_test3.out",
    }
    script = tmp_path / "ibswinfo.sh"
    cases = "\n".join(f'  lid-{lid}) cat "{DIR / name}" ;;' for lid, name in files.items() if lid != 4)
    script.write_text(
        f'#!/bin/sh\n[ "$1" = "-d" ] || exit 2\ncase "$2" in\n{cases}\n  *) echo "-E- no such device $2" >&2; exit 1 ;;\nesac\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    assert collect(fabric) == {"skipped": fabric_reason()}
    Fabric.objects.filter(pk=fabric.pk).update(switch_info_tool="ibswinfo")
    fabric.refresh_from_db()
    settings.WEFT_IBSWINFO = str(script)
    out = collect(fabric)
    assert (out["switches"], out["read"]) == (3, 2)
    assert list(out["failed"].values()) == ["exit 1: -E- no such device lid-4"]
    assert {r.node.lid: r.source for r in SwitchHealth.objects.select_related("node")} == {
        2: "ibswinfo",
        3: "ibswinfo",
    }
    assert Event.objects.get().code == "switch.fan_failed"  # lid 2's fan status ERROR


def fabric_reason() -> str:
    return ("the fabric reads no switch health (its switch info tool is none); import a saved output with "
            "manage.py switch_health --file")  # fmt: skip


@pytest.mark.django_db
def test_metrics_give_the_latest_reading_per_switch(client_for):
    fabric = _fabric_with_switches()
    import_text(fabric, _text("treydock_ibswinfo_test2.out"), source_name="t2.out")
    import_text(fabric, _text("treydock_ibswinfo_test3.out"), source_name="t3.out")
    import_text(fabric, _text("treydock_ibswinfo_test3.out").replace("| 47", "| 49"), source_name="t3b.out")
    body = client_for("viewer").get("/metrics?collect[]=switches").content.decode()
    g3, g2 = "0x08c0eb0300add20e", "0x08c0eb0300d9f672"
    assert (
        f'weft_switch_temperature_celsius{{fabric="unmanaged",guid="{g3}"}} 49.0' in body
    )  # the latest only
    assert body.count("weft_switch_temperature_celsius{") == 2
    assert f'weft_switch_psu_ok{{fabric="unmanaged",guid="{g3}",psu="1"}} 0.0' in body
    assert f'weft_switch_psu_power_watts{{fabric="unmanaged",guid="{g2}",psu="0"}} 154.0' in body
    assert f'weft_switch_fan_speed_rpm{{fabric="unmanaged",fan="9",guid="{g2}"}} 5906.0' in body
    assert f'weft_switch_temperature_limit_celsius{{fabric="unmanaged",guid="{g2}"}} 80.0' in body
    assert (
        f'firmware="27.2010.4102",guid="{g3}",part_number="MQM8790-HS2F",serial_number="MT2148T25782"' in body
    )
    assert "weft_port_info" not in body  # only the group asked for

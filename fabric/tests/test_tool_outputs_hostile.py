"""Switch health and cable imports fed what a careless user or a broken tool gives (issue 26 §3):
binary data, another encoding, numbers no sensor reads, another tool's output, a file too large,
and a tool setting naming something that is not a program. Each is refused or reported with
where it went wrong; nothing is stored from a refused file and no exception escapes.

The parsers are pure (no database); the import commands run on the test database, which is
PostgreSQL in the ``backend`` phase: PostgreSQL refuses a NUL and ``Infinity`` in ``jsonb``,
the reason those must never reach a stored reading."""

from __future__ import annotations

import stat

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from fabric.choices import NodeType
from fabric.collectors.tools import ToolError, run_tool
from fabric.models import CableInfo, Fabric, Link, Node, Port, SwitchHealth
from fabric.parsers.cablerecord import to_float
from fabric.parsers.db_csv import DbCsvParseError, parse_cable_info
from fabric.parsers.ibswinfo import IbswinfoParseError, parse_ibswinfo
from fabric.parsers.mlxlink import MlxlinkParseError, parse_mlxlink
from fabric.services import cables, switchhealth
from tests.support.output import Collect

SWITCH = "0x7cfe900300aa0000"
IBSWINFO = f"""SwitchIB Mellanox Technologies
-----------------------------------
part number        | MSB7800-ES2F
serial number      | MT1234X00001
GUID               | {SWITCH}
ports              | 36
temperature (C)    | 45
max temp (C)       | 52
fan status         | OK
"""
DB_CSV = f"""START_CABLE_INFO
NodeGuid,PortGuid,PortNum,Vendor,PN,SN,Temperature
{SWITCH},{SWITCH},1,"Mellanox","MFS1S00-H003V","MT2231FT11108","44C"
{SWITCH},{SWITCH},2,"Mellanox","MFS1S00-H003V","MT2231FT11109","1e999C"
END_CABLE_INFO
"""


def _fabric() -> Fabric:
    """A switch (LID 2, GUID :data:`SWITCH`) with ports 1-2 cabled to each other."""
    fabric = Fabric.objects.create(name="careless")
    switch = Node.objects.create(fabric=fabric, node_guid=SWITCH, node_type=NodeType.SWITCH, lid=2,
                                 description="leaf-x", num_ports=36)  # fmt: skip
    a, b = (Port.objects.create(node=switch, port_num=n) for n in (1, 2))
    Link.objects.create(fabric=fabric, port_a=a, port_b=b)
    return fabric


def _refused(command: str, fabric: Fabric, *args: str) -> str:
    err: list[str] = []
    with pytest.raises(CommandError, match="1 of 1 files not imported"):
        call_command(command, fabric.name, *args, stderr=Collect(err), stdout=Collect([]))
    return "".join(err)


# -- the pure parsers ---------------------------------------------------------------------------
def test_a_number_no_sensor_reads_is_a_located_problem_not_a_crash():
    """``ports | 999…`` (400 digits) made ``int(float(...))`` raise OverflowError out of the parser."""
    info = parse_ibswinfo(IBSWINFO.replace("ports              | 36", "ports | " + "9" * 400))
    assert info.ports is None and info.temperature_c == 45
    assert info.problems == ["line 6: ports: out of range: '" + "9" * 40 + "'"]
    assert (
        to_float("1e999") is None and to_float("-1e999C", ("C",)) is None and to_float("44C", ("C",)) == 44.0
    )
    rows = parse_cable_info(DB_CSV, source="db.csv")
    assert [r.temperature_c for r in rows.readings] == [44.0, None]
    assert "line 4: CABLE_INFO: Temperature: not a temperature: '1e999C'" in rows.readings[1].problems


@pytest.mark.parametrize(
    "parse, error, text",
    [
        (parse_ibswinfo, IbswinfoParseError, IBSWINFO),
        (parse_cable_info, DbCsvParseError, DB_CSV),
        (
            parse_mlxlink,
            MlxlinkParseError,
            "Module Info\n-----------\nVendor Name : Mellanox\nVendor Serial Number : MT1\n",
        ),
    ],
    ids=["ibswinfo", "db_csv", "mlxlink"],
)
def test_binary_data_and_utf16_are_refused_with_the_line(parse, error, text):
    """A NUL byte (binary data; UTF-16 saved by an editor) is refused whole, located; it used to
    be kept in the reading's text and failed the import's write on PostgreSQL."""
    lines = text.splitlines(keepends=True)
    garbled = "".join(lines[:2]) + "\x00\x7fELF\x02\x01garbage | \x00\x00 x\n" + "".join(lines[2:])
    with pytest.raises(error) as info:
        parse(garbled, source="dump.bin")
    assert (info.value.source, info.value.line) == ("dump.bin", 3)
    assert "a NUL byte" in str(info.value)
    utf16 = text.encode("utf-16").decode("utf-8", errors="replace")  # read as the commands read
    with pytest.raises(error, match="a NUL byte"):
        parse(utf16, source="utf16.txt")


def test_another_tools_key_value_output_is_not_an_ibswinfo_reading():
    """Lines shaped ``key : value`` whose keys ibswinfo never prints gave an empty reading that an
    import with ``--switch`` stored as the switch's health."""
    with pytest.raises(IbswinfoParseError, match="none of its 2 'key | value' lines is an ibswinfo field"):
        parse_ibswinfo("device : /dev/mst/SW_MT54000_lid-0x0002\nstatus : -E- no such device\n", source="x")


def test_json_nested_deeper_than_the_stack_is_not_mlxlink_output():
    with pytest.raises(MlxlinkParseError, match="nested too deep"):
        parse_mlxlink('{"result": ' + "[" * 100_000 + "]" * 100_000 + "}", source="deep.json")


# -- the import commands ------------------------------------------------------------------------
@pytest.mark.backend
@pytest.mark.django_db
def test_imports_of_garbage_store_nothing_and_say_where(tmp_path):
    fabric = _fabric()
    binary = tmp_path / "switch.bin"
    binary.write_bytes(IBSWINFO.encode()[:80] + b"\x00\x01\x02 | \xff\xfe\n" + IBSWINFO.encode()[80:])
    said = _refused("switch_health", fabric, "--file", str(binary))
    assert f"{binary}:3: a NUL byte" in said
    utf16 = tmp_path / "cables.csv"
    utf16.write_bytes(DB_CSV.encode("utf-16"))
    said = _refused("cable_info", fabric, "--file", str(utf16), "--format", "db_csv")
    assert f"{utf16}:1: a NUL byte" in said
    assert not SwitchHealth.objects.exists() and not CableInfo.objects.exists()

    # what is left of a good file stores, with its unreadable number named, not Infinity
    good = tmp_path / "db.csv"
    good.write_text(DB_CSV)
    out: list[str] = []
    call_command("cable_info", fabric.name, "--file", str(good), stdout=Collect(out), stderr=Collect(out))
    temps = sorted(
        (r.port.port_num, r.data["temperature_c"]) for r in CableInfo.objects.select_related("port")
    )
    assert temps == [(1, 44.0), (2, None)]
    assert "line 4: CABLE_INFO: Temperature: not a temperature: '1e999C'" in "".join(out)


@pytest.mark.django_db
def test_a_file_over_the_import_cap_is_refused_unread(tmp_path, settings):
    settings.WEFT_IMPORT_MAX_BYTES = 1024
    fabric = _fabric()
    big = tmp_path / "huge.out"
    big.write_text(IBSWINFO + "fan#1 (rpm) | 9000\n" * 200)
    said = _refused("switch_health", fabric, "--file", str(big))
    assert f"{big}: larger than 1024 bytes: refused (WEFT_IMPORT_MAX_BYTES)" in said
    said = _refused("cable_info", fabric, "--file", str(big), "--format", "db_csv")
    assert "larger than 1024 bytes" in said
    assert not SwitchHealth.objects.exists() and not CableInfo.objects.exists()


# -- the tool settings ----------------------------------------------------------------------------
@pytest.mark.django_db
def test_a_tool_setting_naming_no_program_says_so_and_raises_nothing(tmp_path, settings):
    """``WEFT_IBSWINFO`` naming a file that is not executable (or a folder): ``collect`` raised
    PermissionError out of its thread pool (a traceback per beat) and the switch page said
    nothing; now the page and the summary say why, and ``run_tool`` answers a ToolError."""
    fabric = _fabric()
    Fabric.objects.filter(pk=fabric.pk).update(switch_info_tool="ibswinfo", cable_info_tool="mlxlink")
    fabric.refresh_from_db()
    text = tmp_path / "ibswinfo.sh"
    text.write_text("#!/bin/sh\necho hi\n")  # not executable
    for where in (text, tmp_path):
        settings.WEFT_IBSWINFO = settings.WEFT_MLXLINK = str(where)
        why = f"WEFT_IBSWINFO names {where}, which is not an executable file here"
        assert switchhealth.collect(fabric) == {"skipped": why}
        assert switchhealth.not_collected_reason(fabric) == why
        assert cables.collect(fabric)["skipped"].startswith("mlxlink is not installed here")
        with pytest.raises(ToolError, match="cannot be run: Permission denied"):
            run_tool([str(where)], timeout=5)
    text.chmod(text.stat().st_mode | stat.S_IXUSR)
    settings.WEFT_IBSWINFO = str(text)
    assert switchhealth.not_collected_reason(fabric) == ""


# -- the partition page ---------------------------------------------------------------------------
@pytest.mark.django_db
def test_a_port_guid_listed_twice_on_the_partition_page_is_refused(users, client_for):
    """``<guid> full`` and ``<guid> limited``: one of the two was dropped without a word."""
    fabric = _fabric()
    guid = "0x0002c90000000001"
    answer = client_for("admin").post(
        f"/fabric/partitions/new/?fabric={fabric.pk}",
        {
            "name": "twice",
            "pkey": "0x0005",
            "host_membership": "full",
            "members": f"{guid} full\n\n{guid} limited",
        },
    )
    assert answer.status_code == 400
    assert f"line 3: {guid} is listed on line 1 already" in answer.content.decode()
    from fabric.models import Partition

    assert not Partition.objects.filter(name="twice").exists()

"""Bad input to the topology import (API and command): a clear 400 / CommandError, never a 500 or a
traceback, and nothing stored changes."""

from __future__ import annotations

import gzip
import zlib

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings

from fabric.models import Discovery, Fabric, Link, Node
from fabric.services.ingest import import_topology_text
from tests.support.topologies import BASE


@pytest.fixture
def fabric(db) -> Fabric:
    return import_topology_text("base", BASE, filename="base.topo").fabric


def _state():
    return (Fabric.objects.count(), Node.objects.count(), Link.objects.count(), Discovery.objects.count())


@pytest.mark.parametrize(
    "body",
    [
        b'{"text": 5}',
        b'{"text": ["a"]}',
        b'{"file": "abc"}',
        b"[1]",
        b'"just a string"',
        b'{"filename": 3, "text": "x"}',
    ],
)
def test_import_json_of_the_wrong_shape_is_a_400(fabric, admin, body):
    before = _state()
    resp = admin.generic(
        "POST", f"/api/fabric/fabrics/{fabric.pk}/import/", body, content_type="application/json"
    )
    assert resp.status_code == 400, resp.content
    assert _state() == before


def test_import_multipart_file_field_that_is_not_a_file_is_a_400(fabric, admin):
    before = _state()
    resp = admin.post(f"/api/fabric/fabrics/{fabric.pk}/import/", {"file": "abc"}, format="multipart")
    assert resp.status_code == 400, resp.content
    assert "file" in resp.json()
    assert _state() == before


@override_settings(WEFT_IMPORT_MAX_BYTES=64 * 1024)
def test_import_gzip_bomb_is_refused_without_inflating_it(fabric, admin):
    bomb = gzip.compress(b"\0" * (8 * 1024 * 1024))  # 8 MiB of zeros in a few KiB
    before = _state()
    resp = admin.generic(
        "POST",
        f"/api/fabric/fabrics/{fabric.pk}/import/?filename=b.gz",
        bomb,
        content_type="application/gzip",
    )
    assert resp.status_code == 400, resp.content
    assert "larger than" in str(resp.json())
    assert _state() == before


@override_settings(WEFT_IMPORT_MAX_BYTES=1024)
def test_import_plain_file_above_the_cap_is_refused(fabric, admin, tmp_path):
    big = tmp_path / "big.topo"
    big.write_text(BASE * 10)
    before = _state()
    with open(big, "rb") as fh:
        resp = admin.post(f"/api/fabric/fabrics/{fabric.pk}/import/", {"file": fh}, format="multipart")
    assert resp.status_code == 400 and "larger than" in str(resp.json())
    raw = admin.generic(
        "POST", f"/api/fabric/fabrics/{fabric.pk}/import/", (BASE * 10).encode(), content_type="text/plain"
    )
    assert raw.status_code == 400 and "larger than" in str(raw.json())
    assert _state() == before


def test_command_corrupt_deflate_data_is_a_command_error(fabric, tmp_path):
    bad = tmp_path / "bad.gz"
    good = gzip.compress(BASE.encode())
    bad.write_bytes(good[:10] + b"\xff" * 40)  # valid header, invalid deflate blocks
    with pytest.raises(zlib.error):
        gzip.decompress(bad.read_bytes())  # what used to escape as a traceback
    before = _state()
    with pytest.raises(CommandError, match="corrupt gzip"):
        call_command("import_topology", str(bad), "--fabric", "base")
    assert _state() == before


@override_settings(WEFT_IMPORT_MAX_BYTES=64 * 1024)
def test_command_gzip_bomb_is_a_command_error(fabric, tmp_path):
    bomb = tmp_path / "bomb.gz"
    bomb.write_bytes(gzip.compress(b"\0" * (8 * 1024 * 1024)))
    with pytest.raises(CommandError, match="larger than"):
        call_command("import_topology", str(bomb), "--fabric", "base")


@pytest.mark.parametrize("name", ["y" * 100, "a/b<c>", "with space"])
def test_command_refuses_a_fabric_name_the_api_refuses(db, tmp_path, name):
    topo = tmp_path / "t.topo"
    topo.write_text(BASE)
    with pytest.raises(CommandError, match="--fabric"):
        call_command("import_topology", str(topo), "--fabric", name)
    assert not Fabric.objects.exists()


NUL_TEXTS = {
    "ibnetdiscover": BASE.replace('"host001 mlx5_0"', '"host\x00001"'),
    "ports": "CA   134  1 0x7cfe9003003b4bde 4x EDR - SW  1719 10 0x7cfe9003009ce5b0 ( 'o0001\x00HCA-1' - 'ib-i1l1s01' )\n",
    "subnet_lst": "{ SW Ports:08 SystemGUID:a22029083222f0ff NodeGUID:0002c90109fb0000 PortGUID:0002c90109fb0000 "
    "VenID:000002C9 DevID:A87C0000 Rev:000000A0 {MT43132\x00Mellanox} LID:0002 PN:05 } "
    "{ SW Ports:08 SystemGUID:a22029083222f0ff NodeGUID:0002c90109fb0018 PortGUID:0002c90109fb0018 "
    "VenID:000002C9 DevID:A87C0000 Rev:000000A0 {MT43132 Mellanox} LID:0003 PN:01 } PHY=4x LOG=ACT SPD=5\n",
}


@pytest.mark.parametrize("fmt", sorted(NUL_TEXTS))
def test_nul_bytes_never_reach_the_database(db, fmt):
    """PostgreSQL text cannot hold NUL: an upload with one failed with a traceback (CharacterNotInRepertoire)."""
    from fabric.parsers import detect_and_parse

    topo = detect_and_parse(NUL_TEXTS[fmt], "nul.txt")
    assert topo.format == fmt and topo.nodes
    assert not any("\x00" in (n.description or "") for n in topo.nodes.values())
    import_topology_text("nul", NUL_TEXTS[fmt], filename="nul.txt")
    assert Node.objects.filter(fabric__name="nul", description__contains="\ufffd").exists()


def test_discover_command_refuses_an_imported_fabric(fabric, monkeypatch):
    """The API answers 409; the command ran ibnetdiscover through the host's HCA and would have
    replaced the imported topology with the host's fabric."""

    def must_not_run(*args, **kwargs):
        raise AssertionError("no live discovery of an imported fabric")

    monkeypatch.setattr("fabric.management.commands.discover.discover", must_not_run)
    before = _state()
    with pytest.raises(CommandError, match="no live access"):
        call_command("discover", "--fabric", "base")
    assert _state() == before

"""The ``perfquery`` collector against an older infiniband-diags (a stand-in ``perfquery`` on PATH that
prints real output): its all-zero ``-x`` error block on a CapMask2-0 port is not stored."""

from __future__ import annotations

import stat

import pytest

from fabric.models import Fabric, Node, Port
from telemetry.collectors.counters import run_perfquery
from telemetry.models import PortCounters
from telemetry.services.sweep import poll_fabric
from tests.support.perfquery_text import PLAIN_LID133


@pytest.fixture
def old_perfquery(tmp_path, realdata):
    """A directory with a ``perfquery [-x] LID PORT`` that prints ``PLAIN_LID133``, and with ``-x`` the
    real CapMask2-0 output of that port (Lid 133 port 1), addressed to the LID and port asked for."""
    (tmp_path / "plain.out").write_text(PLAIN_LID133)
    ext = realdata / "perfquery" / "treydock_perfquery_x_0x7cfe9003003b4b96.out"
    tool = tmp_path / "perfquery"
    tool.write_text(
        "#!/bin/sh\n"
        f'f="{tmp_path / "plain.out"}"\n'
        f'if [ "$1" = "-x" ]; then f="{ext}"; shift; fi\n'
        'exec /bin/sed -e "s/Lid 133 port 1/Lid $1 port $2/" -e "s/^PortSelect:\\(\\.*\\)1$/PortSelect:\\1$2/" "$f"\n'
    )
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return tmp_path


def test_run_perfquery_keeps_the_32bit_errors(old_perfquery):
    got = run_perfquery([(133, 1, True)], env={"PATH": str(old_perfquery)}, ca_args=[], timeout=30)
    read = got.reads[(133, 1)]
    assert read.error == "" and read.extended is True
    v = read.values
    assert (v["symbol_errors"], v["link_error_recovery"], v["link_downed"], v["rcv_errors"]) == (7, 2, 3, 5)
    assert v["xmit_wait"] == 123456 and v["xmit_data"] == 37108676853855


@pytest.mark.django_db
def test_perfquery_sweep_stores_the_errors(old_perfquery):
    fabric = Fabric.objects.create(name="old", tool_env={"PATH": str(old_perfquery)})
    node = Node.objects.create(fabric=fabric, node_guid="0x7cfe9003003b4b96", node_type="ca", description="h")
    port = Port.objects.create(node=node, port_num=1, lid=133, rate_gbps=100.0)
    sweep = poll_fabric(fabric, mechanism="perfquery")
    assert (sweep.status, sweep.ports, sweep.stale) == ("ok", 1, 0)
    pc = PortCounters.objects.get(port=port)
    assert (pc.symbol_errors, pc.link_error_recovery, pc.link_downed, pc.rcv_errors) == (7, 2, 3, 5)
    assert pc.xmit_wait == 123456 and pc.extended is True and pc.rcv_data == 37225401952885

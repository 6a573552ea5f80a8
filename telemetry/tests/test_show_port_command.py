"""``manage.py show_port`` and ``poll_counters`` with bad input: a CommandError, never a traceback or a wrong fabric."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from fabric.services.ingest import import_topology_text
from tests.support.topologies import BASE


@pytest.fixture
def fabric(db):
    return import_topology_text("f", BASE, filename="base.topo").fabric


@pytest.mark.parametrize(
    "node", ["99999999999999999999", "0x99999999999999999999", "123456789012345678901234"]
)
def test_node_beyond_64_bits_is_not_found(fabric, node):
    with pytest.raises(CommandError, match="no node"):
        call_command("show_port", node, "1")


@pytest.mark.parametrize("port", ["99999999999999999999", "256", "-1"])
def test_port_out_of_range_is_a_command_error(fabric, port):
    with pytest.raises(CommandError, match="0-255"):
        call_command("show_port", "spine-1", port)


@pytest.mark.parametrize("extra", [[], ["--reset"]])
def test_poll_counters_refuses_an_imported_fabric(fabric, monkeypatch, extra):
    """The diags would read, or with --reset clear, the counters of the host's fabric instead."""

    def must_not_run(*args, **kwargs):
        raise AssertionError("no sweep of an imported fabric")

    monkeypatch.setattr("telemetry.management.commands.poll_counters.poll_fabric", must_not_run)
    with pytest.raises(CommandError, match="no live access"):
        call_command("poll_counters", "--fabric", "f", *extra)

"""``manage.py show_port`` with out-of-range input: a CommandError, never a traceback."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from fabric.services.ingest import import_topology_text
from fabric.tests.test_services import BASE


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

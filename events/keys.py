"""Natural keys of the objects events concern: re-exported from :mod:`fabric.keys`, their one
definition (node = node GUID; port = ``"<node guid>/<port>"``; link =
``"<guid>/<port>-<guid>/<port>"``, lower end first). New code imports ``fabric.keys``."""

from __future__ import annotations

from fabric.keys import link_key, port_key, split_link_key, split_port_key

__all__ = ["link_key", "port_key", "split_link_key", "split_port_key"]

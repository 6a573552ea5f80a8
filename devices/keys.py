"""Object keys of the devices' events and alarms (under the device's fabric), built only here as
``fabric/keys.py`` builds the fabric's: the poll, the traps and the condition rules share them."""

from __future__ import annotations


def interface_key(dev_name: str, if_name: str) -> str:
    """Object key of an interface's events and alarms: ``<device>/<ifName>``."""
    return f"{dev_name}/{if_name}"


def sensor_key(dev_name: str, index: int) -> str:
    """Object key of a sensor's events and alarms: ``<device>/sensor/<entPhysicalIndex>``."""
    return f"{dev_name}/sensor/{index}"


def link_key(dev_name: str, local_port: str, remote: str, remote_port: str) -> str:
    """Object key of an LLDP link: ``<device>/<local port>-<remote>/<remote port>``."""
    return f"{dev_name}/{local_port}-{remote}/{remote_port}"

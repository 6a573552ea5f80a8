"""Device configuration shared by the API (``devices.api``) and the pages (``devices.forms``):
the cross-field checks of SNMP settings and the audit record of a change, whose credentials are
replaced by whether they were set (a secret is never in an audit entry).

Credentials are write-only everywhere: a blank or absent ``community``/``auth_key``/``priv_key``
keeps the stored one; a value replaces it (``Device.set_secret``, encrypted at rest). A device
keeps only the credentials of its SNMP version (:data:`VERSION_SECRETS`): a credential of the other
version sent with a change is refused (:func:`settings_errors`), and one still stored is cleared
by the save (:func:`save_device`; switching v2c → v3 clears the community, v3 → v2c the USM keys),
audited as "(cleared)".
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from django.db import models, transaction
from django.db.models import Q

from accounts import audit

from .. import maplayer
from ..choices import AuthProtocol, PrivProtocol, SnmpVersion
from ..models import SECRET_FIELDS, Device

#: the fields of a device an Admin configures (besides the credentials)
CONFIG_FIELDS = ["fabric", "name", "address", "port", "version", "user", "auth_protocol", "priv_protocol",
                 "context", "timeout_s", "retries", "poll_interval_s", "enabled"]  # fmt: skip


#: the credentials each SNMP version uses; a device stores only those of its version
VERSION_SECRETS = {SnmpVersion.V2C: ("community",), SnmpVersion.V3: ("auth_key", "priv_key")}


def other_version_secrets(version: str) -> tuple[str, ...]:
    """The credentials (names of :data:`SECRET_FIELDS`) a device of SNMP ``version`` ("2c" or
    "3", ``SnmpVersion``) does not use: refused when given, cleared when stored."""
    own = VERSION_SECRETS.get(version, ())
    return tuple(name for name in SECRET_FIELDS if name not in own)


#: the longest poll interval an Admin may set, in seconds (a day); a larger one overflowed the
#: due-time arithmetic of ``devices.services.schedule`` (datetime + timedelta past year 9999)
MAX_POLL_INTERVAL_S = 86400.0

#: one DNS label (RFC 1123 §2.1: letters, digits, hyphens; not at either end; 1-63 characters)
_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")


def address_error(address: str) -> str | None:
    """Why ``address`` is neither an IPv4/IPv6 address nor a DNS host name (RFC 1123: labels of
    letters, digits and inner hyphens, at most 63 characters each and 253 in all, the last one not
    all digits), or None when it is one. Checked before the trap receiver resolves it: a label over
    63 characters or a non-ASCII name raised ``UnicodeError`` from the IDNA codec there."""
    try:
        ipaddress.ip_address(address)
        return None
    except ValueError:
        pass
    name = address[:-1] if address.endswith(".") else address
    labels = name.split(".")
    if not name or len(name) > 253 or not all(_LABEL.fullmatch(x) for x in labels) or labels[-1].isdigit():
        return "an IPv4 or IPv6 address or a DNS host name (letters, digits, hyphens; labels up to 63)"
    return None


def settings_errors(attrs: dict[str, Any], instance: Device | None) -> dict[str, str]:
    """``{field: message}`` of what is wrong with the SNMP settings ``attrs`` (the fields being set,
    credentials included when given) over ``instance`` (None on create): v2c needs a community,
    v3 a user; the address is an IP address or host name (:func:`address_error`), the poll
    interval at most :data:`MAX_POLL_INTERVAL_S`; an auth protocol needs an auth key of at least 8 characters and a privacy protocol
    a priv key of at least 8 and an auth protocol (USM authPriv; pass phrases per RFC 3414 §11.2).
    A credential absent from ``attrs`` counts as set when ``instance`` has one; a non-blank one of
    the other SNMP version is refused (:func:`other_version_secrets`)."""
    inst = instance
    version = attrs.get("version", inst.version if inst else SnmpVersion.V2C)
    auth = attrs.get("auth_protocol", inst.auth_protocol if inst else AuthProtocol.NONE)
    priv = attrs.get("priv_protocol", inst.priv_protocol if inst else PrivProtocol.NONE)

    def has(name):
        return bool(attrs[name]) if name in attrs else bool(inst and inst.has_secret(name))

    def kept(name):
        return name not in attrs and has(name)

    errors = {}
    if "address" in attrs and (why := address_error(attrs["address"])):
        errors["address"] = why
    interval = attrs.get("poll_interval_s")
    if interval is not None and interval > MAX_POLL_INTERVAL_S:
        errors["poll_interval_s"] = f"at most {MAX_POLL_INTERVAL_S:.0f} s (a day)"
    for name in other_version_secrets(version):
        if attrs.get(name):
            label = SnmpVersion(version).label if version in SnmpVersion.values else version
            errors[name] = f"not used by {label}: a device keeps only the credentials of its version"
    if version == SnmpVersion.V2C and not has("community"):
        errors["community"] = "an SNMPv2c device needs a community"
    if version == SnmpVersion.V3:
        if not attrs.get("user", inst.user if inst else ""):
            errors["user"] = "an SNMPv3 device needs a user"
        if auth != AuthProtocol.NONE and len(attrs.get("auth_key", "") or "") < 8 and not kept("auth_key"):
            errors["auth_key"] = "at least 8 characters (RFC 3414 pass phrase) with an auth protocol"
        if priv != PrivProtocol.NONE:
            if auth == AuthProtocol.NONE:
                errors["priv_protocol"] = "privacy needs an authentication protocol (USM authPriv)"
            if len(attrs.get("priv_key", "") or "") < 8 and not kept("priv_key"):
                errors["priv_key"] = "at least 8 characters with a privacy protocol"
    return errors


def create_changes(values: dict[str, Any]) -> dict[str, Any]:
    """Audit ``changes`` of a create: the values, related objects by pk, credentials as "(set)"
    or "(cleared)"."""
    out = {}
    for k, v in values.items():
        if k in SECRET_FIELDS:
            out[k] = "(set)" if v else "(cleared)"
        else:
            out[k] = v.pk if isinstance(v, models.Model) else v
    return out


def update_changes(
    before: Device, after: Device, fields: list[str], secrets: dict[str, str]
) -> dict[str, Any]:
    """Audit ``changes`` of an update: ``{field: [old, new]}`` of ``fields`` that changed, and
    "(changed)"/"(cleared)" for each credential in ``secrets`` (the ones written)."""
    changes = audit.model_changes(before, after, [f for f in fields if f not in SECRET_FIELDS])
    for k, v in secrets.items():
        changes[k] = "(changed)" if v else "(cleared)"
    return changes


def save_device(values: dict[str, Any], secrets: dict[str, str], instance: Device | None = None) -> Device:
    """Create (``instance`` None) or update a device with ``values`` (plain fields) and ``secrets``
    (credentials to write; absent ones are kept), and its audit entry, in one transaction.
    ``values`` and ``secrets`` are validated already (:func:`settings_errors`, field checks).
    Credentials of the other SNMP version still stored (the version changed) are cleared and
    audited as "(cleared)" (:func:`clear_other_version`). Alarms are keyed by the device's name
    (``devices.event_types``, as the fabric app keys by fabric name): a rename moves the device's
    open alarms to the new name (:func:`rekey_alarms`); disabling it or moving it to another
    fabric clears them (:func:`clear_open_alarms`, reason "polling disabled" or "device <name>
    moved to another fabric"), as nothing would clear them any more.

    Raises:
        Device.DoesNotExist: ``instance`` was deleted meanwhile.
    """
    with transaction.atomic():
        if instance is None:
            device = Device(**values)
            for k, v in secrets.items():
                device.set_secret(k, v)
            device.save()
            audit.record("device.create", device, create_changes({**values, **secrets}))
            maplayer.announce(maplayer.fabric_ids([device]))
            return device
        before = Device.objects.select_for_update().get(pk=instance.pk)
        device = Device.objects.get(pk=instance.pk)
        for k, v in values.items():
            setattr(device, k, v)
        for k, v in secrets.items():
            device.set_secret(k, v)
        written = {**secrets, **clear_other_version(device)}
        device.save()
        audit.record("device.update", device, update_changes(before, device, list(values), written))
        if before.enabled and not device.enabled:
            clear_open_alarms(open_alarms(before), "polling disabled")
        elif before.fabric_id != device.fabric_id:
            clear_open_alarms(open_alarms(before), f"device {before.name} moved to another fabric")
        elif before.name != device.name:
            rekey_alarms(before, device.name)
        if (before.fabric_id, before.name, before.enabled) != (device.fabric_id, device.name, device.enabled):
            maplayer.announce(maplayer.fabric_ids([before, device]))
        return device


def clear_other_version(device: Device) -> dict[str, str]:
    """Clear (unsaved) the credentials of ``device`` its SNMP version does not use; returns them
    as ``{name: ""}`` (what :func:`update_changes` audits as "(cleared)")."""
    cleared = {}
    for name in other_version_secrets(device.version):
        if device.has_secret(name):
            device.set_secret(name, "")
            cleared[name] = ""
    return cleared


def open_alarms(device: Device):
    """The open alarms of ``device`` (an ``events.models.Alarm`` queryset): under its fabric, keyed
    by its name or under it (``<name>/<ifName>``, ``<name>/sensor/…``, LLDP links; see
    ``devices.event_types``)."""
    from events.models import Alarm

    return (
        Alarm.objects.open()
        .filter(fabric_id=device.fabric_id)
        .filter(Q(object_key=device.name) | Q(object_key__startswith=device.name + "/"))
    )


def rekey_alarms(before: Device, new_name: str) -> int:
    """Move the open alarms of ``before`` (:func:`open_alarms`, keys ``<old>`` and ``<old>/…``) and
    its threshold states (``events.models.ConditionState``) to ``new_name``: key, the name in
    ``object_repr`` and the link alarms' ``details["device"]``, so that the next poll's events
    (keyed by the new name) raise and clear them. An alarm whose new key is taken by an open one,
    or would not fit the key column, is cleared instead (reason "device <old> renamed to <new>").
    Call inside the rename's transaction. Returns how many alarms moved."""
    from events.models import Alarm, ConditionState

    old = before.name

    def renamed(key: str) -> str:
        return new_name + key[len(old) :]

    limit = Alarm._meta.get_field("object_key").max_length
    moved, stale = [], []
    for alarm in open_alarms(before).select_for_update():
        key = renamed(alarm.object_key)
        taken = (
            Alarm.objects.open().filter(fabric_id=alarm.fabric_id, code=alarm.code, object_key=key).exists()
        )
        if taken or len(key) > limit:
            stale.append(alarm.pk)
            continue
        alarm.object_key = key
        if alarm.object_repr == old or alarm.object_repr.startswith(old + " "):
            alarm.object_repr = renamed(alarm.object_repr)
        if isinstance(alarm.details, dict) and alarm.details.get("device") == old:
            alarm.details = {**alarm.details, "device": new_name}
        moved.append(alarm)
    Alarm.objects.bulk_update(moved, ["object_key", "object_repr", "details"])
    clear_open_alarms(Alarm.objects.filter(pk__in=stale), f"device {old} renamed to {new_name}")
    states = ConditionState.objects.filter(fabric_id=before.fabric_id).filter(
        Q(object_key=old) | Q(object_key__startswith=old + "/")
    )
    for st in states:
        key = renamed(st.object_key)
        ConditionState.objects.filter(fabric_id=st.fabric_id, code=st.code, object_key=key).delete()
        if len(key) <= limit:
            ConditionState.objects.filter(pk=st.pk).update(object_key=key)
        else:
            st.delete()
    return len(moved)


def neighbour_alarms(device: Device):
    """The open ``device.link_down`` alarms of the other devices of ``device``'s fabric whose LLDP
    neighbour (``details["remote"]``, the remote's sysName; ``services.poll._link_spec``) is
    ``device`` (its name or its sysName, case-insensitive)."""
    from events.models import Alarm

    names = {n.lower() for n in (device.name, device.sys_name) if n}
    qs = Alarm.objects.open().filter(fabric_id=device.fabric_id, code="device.link_down")
    return qs.filter(pk__in=[pk for pk, d in qs.values_list("pk", "details")
                             if str((d or {}).get("remote", "")).lower() in names
                             and (d or {}).get("device") != device.name])  # fmt: skip


def clear_open_alarms(alarms, reason: str) -> int:
    """Clear ``alarms`` (an open ``Alarm`` queryset) by the acting user (``accounts.audit``;
    "system" without one) with ``reason`` (``events.services.clear_alarm``: audited, the clear
    notice per policy). Call inside the caller's transaction. Returns how many were cleared."""
    from events.services import clear_alarm

    pks = list(alarms.values_list("pk", flat=True))
    user = audit.current_actor.get().user
    for pk in pks:
        clear_alarm(pk, user if getattr(user, "is_authenticated", False) else None, reason)
    return len(pks)


def delete_device(device: Device) -> dict[str, Any]:
    """Delete ``device`` (its interfaces, sensors and LLDP rows go with it) and write its audit
    entry ``device.delete`` in one transaction; the entry's ``changes`` are the device's settings
    as :func:`create_changes` writes them (credentials only as "(set)"/"(cleared)") plus
    ``history_samples``, the number of its history rows kept, and ``alarms_cleared``: its open
    alarms (key ``<name>`` or ``<name>/…``, ``devices.event_types``) are cleared by the acting
    user with the reason "device <name> deleted" (:func:`clear_open_alarms`), as nothing would
    clear them any more, and so are the other devices' link-down alarms towards it
    (:func:`neighbour_alarms`; "neighbour <name> deleted"). Its history
    (``devices.models.DeviceSample``) is not deleted: it stays, under the device's id, until the
    retention of ``devices.services.history.rollup`` drops it, like an IB port's counter history
    outlives the port. Returns the audit ``changes``.

    Raises:
        Device.DoesNotExist: ``device`` was deleted meanwhile.
    """
    from ..models import DeviceSample

    with transaction.atomic():
        locked = Device.objects.select_for_update().get(pk=device.pk)
        values = {k: getattr(locked, k) for k in CONFIG_FIELDS}
        secrets = {k: "x" if locked.has_secret(k) else "" for k in SECRET_FIELDS}
        alarms = list(open_alarms(locked).values_list("pk", flat=True))
        changes = {
            **create_changes({**values, **secrets}),
            "history_samples": DeviceSample.objects.filter(device_id=locked.pk).count(),
            "alarms_cleared": len(alarms),
        }
        audit.record("device.delete", locked, changes)
        clear_open_alarms(open_alarms(locked).filter(pk__in=alarms), f"device {locked.name} deleted")
        # a link-down on another device towards this one: nothing would clear it any more
        clear_open_alarms(neighbour_alarms(locked), f"neighbour {locked.name} deleted")
        drawn_on = maplayer.fabric_ids([locked])
        locked.delete()
        maplayer.announce(drawn_on)
    return changes

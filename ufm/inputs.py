"""The request bodies and path values of the UFM-compatible API, read into plain records (pure: no
Django, no database).

Rules are UFM's, from its REST API guide ("PKey GUIDs REST API") and what the clients send
(``ufm.views`` cites each client's source):

* a PKey is a hexadecimal *string* between 0x0 and 0x7fff exclusive, written ``0x0005``, ``0x5``,
  ``0X5`` or ``5`` (always hexadecimal, with or without ``0x``: ``"10"`` is 0x10); a JSON number is
  refused (decimal or hex would be a guess). Reading one (``GET /resources/pkeys/0x7fff``) also
  accepts the default partition's 0x7fff;
* a GUID is a hexadecimal string of 16 to 20 characters after an optional ``0x`` (UFM's limits; a
  value must still fit 64 bits and is never 0), any case; Weft stores it canonical
  (``fabric.guid``) and answers in UFM's form, 16 lowercase digits without ``0x``;
* ``index0`` defaults to false, ``ip_over_ib`` to true, ``membership`` to ``"full"``; booleans are
  JSON ``true``/``false`` or the strings ``true``/``false`` in any case (the UFM Slurm plugin sends
  the values of its configuration file as strings); a membership is ``"full"`` or ``"limited"``
  in any case (an older NVIDIA Carbide client sent ``"Full"``); ``memberships`` is a list as long
  as ``guids`` and wins over ``membership`` (the UFM SDK's rule);
* QoS: ``mtu_limit`` 2 or 4 (KiB: 2048 or 4096 bytes), ``service_level`` 0..15, ``rate_limit`` a
  rate UFM lists in Gb/s (2.5, 10, 30, 5, 20, 40, 60, 80, 120, 14, 56, 112, 168, 25, 100, 200, 300,
  and the newer IBTA rates 28, 50, 400, 600, 800, 1200).

Anything else raises :class:`UfmInputError` naming the field, which the views answer with a 400.
A field that is absent is None in the records (so an update changes only what was sent); the
defaults above apply when a partition is created.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fabric.guid import normalize_guid
from fabric.parsers.partitions import DEFAULT_PKEY, MTU_CODES, NAME_RE, RATE_CODES

FULL, LIMITED = "full", "limited"
#: UFM's ``mtu_limit`` (KiB) -> IBTA MTU code, and back
MTU_LIMIT_TO_CODE = {2: 4, 4: 5}
#: IBTA rate code -> Gb/s, and Gb/s -> code (``fabric.parsers.partitions.RATE_CODES``)
RATE_TO_CODE = {float(gbps): code for code, gbps in RATE_CODES.items()}
_PKEY = re.compile(r"^(?:0[xX])?([0-9a-fA-F]{1,4})$")
_GUID = re.compile(r"^(?:0[xX])?([0-9a-fA-F]{16,20})$")
_TRUE, _FALSE = "true", "false"


class UfmInputError(ValueError):
    """A value the UFM API refuses; ``field`` names it, ``str()`` is ``"<field>: <message>"``."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


# -- single values -----------------------------------------------------------------------------


def parse_pkey(value: object, field: str = "pkey", *, allow_default: bool = False) -> int:
    """The 15-bit PKey of ``value`` (see the module docstring). ``allow_default``: 0x7fff, the
    default partition, is accepted (reads); otherwise 0x0001-0x7ffe.

    Raises:
        UfmInputError: not a string, not hexadecimal, or out of range.
    """
    if not isinstance(value, str):
        raise UfmInputError(field, 'must be a hexadecimal string such as "0x5"')
    match = _PKEY.match(value.strip())
    if not match:
        raise UfmInputError(field, f'{value!r} is not a hexadecimal PKey ("0x5", "0x0005" or "5")')
    pkey = int(match.group(1), 16)
    if pkey == DEFAULT_PKEY and allow_default:
        return pkey
    if not 0 < pkey < DEFAULT_PKEY:
        raise UfmInputError(field, f"{value!r} is not between 0x0 and 0x7fff (exclusive)")
    return pkey


def parse_guid(value: object, field: str = "guids") -> str:
    """The canonical GUID (``0x`` + 16 lowercase hex digits) of a UFM GUID string.

    Raises:
        UfmInputError: not a string of 16 to 20 hex digits after an optional ``0x``, over 64
            bits, or 0.
    """
    if not isinstance(value, str):
        raise UfmInputError(field, f"{value!r} is not a GUID string")
    match = _GUID.match(value.strip())
    if not match:
        raise UfmInputError(field, f"{value!r} is not a GUID (16 to 20 hexadecimal characters)")
    number = int(match.group(1), 16)
    if number >= 1 << 64:
        raise UfmInputError(field, f"{value!r} does not fit 64 bits")
    if number == 0:
        raise UfmInputError(field, "a port GUID is never 0")
    return normalize_guid(number)


def ufm_guid(guid: str) -> str:
    """A stored GUID (``0x0002c903...``) as UFM writes it: 16 lowercase hex digits, no ``0x``."""
    return guid[2:] if guid.startswith("0x") else guid


def pkey_text(pkey: int) -> str:
    """A PKey as UFM's keys write it: ``0x`` and lowercase hex, unpadded (``0x5``, ``0x7fff``)."""
    return f"0x{pkey:x}"


def parse_bool(value: object, field: str) -> bool:
    """JSON ``true``/``false``, or the strings ``"true"``/``"false"`` in any case.

    Raises:
        UfmInputError: anything else.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in (_TRUE, _FALSE):
        return value.strip().lower() == _TRUE
    raise UfmInputError(field, f"{value!r} is not true or false")


def parse_membership(value: object, field: str = "membership") -> str:
    """``"full"`` or ``"limited"`` (any case).

    Raises:
        UfmInputError: anything else.
    """
    if isinstance(value, str) and value.strip().lower() in (FULL, LIMITED):
        return value.strip().lower()
    raise UfmInputError(field, f'{value!r} is not "full" or "limited"')


def parse_int(value: object, field: str, lo: int, hi: int) -> int:
    """A JSON integer (or an integral number, ``4.0``) in ``lo..hi``.

    Raises:
        UfmInputError: not a number, not integral, or out of range.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UfmInputError(field, f"{value!r} is not a number")
    if isinstance(value, float) and not value.is_integer():
        raise UfmInputError(field, f"{value!r} is not an integer")
    if not lo <= value <= hi:
        raise UfmInputError(field, f"{value!r} is not between {lo} and {hi}")
    return int(value)


def parse_mtu_limit(value: object, field: str = "mtu_limit") -> int:
    """UFM's ``mtu_limit`` (2 or 4 KiB) as the IBTA MTU code OpenSM takes (4 or 5).

    Raises:
        UfmInputError: another value.
    """
    limit = parse_int(value, field, 0, 1 << 16)
    if limit not in MTU_LIMIT_TO_CODE:
        raise UfmInputError(field, f"{value!r} is not 2 or 4 (KiB)")
    return MTU_LIMIT_TO_CODE[limit]


def parse_rate_limit(value: object, field: str = "rate_limit") -> int:
    """UFM's ``rate_limit`` (Gb/s) as the IBTA rate code OpenSM takes (``10`` -> 3).

    Raises:
        UfmInputError: not a number or not a rate of the table.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UfmInputError(field, f"{value!r} is not a number")
    code = RATE_TO_CODE.get(float(value))
    if code is None:
        rates = ", ".join(f"{g:g}" for g in sorted(RATE_TO_CODE))
        raise UfmInputError(field, f"{value!r} is not one of the IB rates ({rates} Gb/s)")
    return code


def mtu_limit_of(code: int | None) -> int:
    """The ``mtu_limit`` UFM shows for an IBTA MTU code: KiB rounded down (None: OpenSM's
    default for a partition, 2048 bytes, so 2)."""
    return MTU_CODES.get(code or 4, 2048) // 1024


def rate_limit_of(code: int | None) -> float | int:
    """The ``rate_limit`` (Gb/s) UFM shows for an IBTA rate code (None: OpenSM's default, 10)."""
    gbps = RATE_CODES.get(code or 3, 10)
    return int(gbps) if float(gbps).is_integer() else gbps


def parse_name(value: object, field: str = "partition_name") -> str:
    """A partition name OpenSM takes and Weft stores (letters, digits, ``_ . -``, not first a digit,
    at most 64 characters).

    Raises:
        UfmInputError: anything else.
    """
    if not isinstance(value, str) or not NAME_RE.match(value):
        raise UfmInputError(
            field, f"{value!r} is not a partition name (letters, digits, _ . -; not first a digit)"
        )
    return value


# -- request bodies ------------------------------------------------------------------------------


def _object(body: object) -> dict:
    if not isinstance(body, dict):
        raise UfmInputError("body", "must be a JSON object")
    return body


def _optional(body: dict, name: str, parse, *args):
    value = body.get(name)
    return None if value is None else parse(value, name, *args)


@dataclass(frozen=True)
class AddGuids:
    """``POST``/``PUT /resources/pkeys``: ``members`` ``[(canonical GUID, "full"|"limited")]`` in
    the order given; ``index0``/``ip_over_ib`` None when not sent."""

    pkey: int
    members: list[tuple[str, str]] = field(default_factory=list)
    index0: bool | None = None
    ip_over_ib: bool | None = None


def parse_add_guids(body: object) -> AddGuids:
    """Read an add-GUIDs body ``{pkey, guids, membership | memberships, index0, ip_over_ib}``.

    Raises:
        UfmInputError: a missing ``pkey`` or ``guids``, or a bad value (see the module docstring);
            a GUID given twice with two memberships.
    """
    body = _object(body)
    pkey = parse_pkey(body.get("pkey"))
    guids = _guid_list(body.get("guids"))
    memberships = body.get("memberships")
    if memberships is not None:
        if not isinstance(memberships, list):
            raise UfmInputError("memberships", 'must be a list of "full" or "limited"')
        if len(memberships) != len(guids):
            raise UfmInputError(
                "memberships", f"has {len(memberships)} entries for {len(guids)} GUIDs (one per GUID)"
            )
        each = [parse_membership(m, "memberships") for m in memberships]
    else:
        one = FULL if body.get("membership") is None else parse_membership(body["membership"])
        each = [one] * len(guids)
    seen: dict[str, str] = {}
    for guid, membership in zip(guids, each, strict=True):
        if seen.get(guid, membership) != membership:
            raise UfmInputError("guids", f"{ufm_guid(guid)} is given twice with different memberships")
        seen[guid] = membership
    return AddGuids(
        pkey=pkey,
        members=list(seen.items()),
        index0=_optional(body, "index0", parse_bool),
        ip_over_ib=_optional(body, "ip_over_ib", parse_bool),
    )


def _guid_list(value: object, field: str = "guids") -> list[str]:
    if value is None:
        raise UfmInputError(field, "is required (a list of port GUIDs)")
    if not isinstance(value, list):
        raise UfmInputError(field, "must be a list of port GUIDs")
    return [parse_guid(v, field) for v in value]


@dataclass(frozen=True)
class RemoveGuids:
    """``POST /actions/remove_guids_from_pkey``: canonical GUIDs, duplicates dropped."""

    pkey: int
    guids: list[str]


def parse_remove_guids(body: object) -> RemoveGuids:
    """Read ``{pkey, guids}``.

    Raises:
        UfmInputError: a missing or bad ``pkey`` or ``guids``.
    """
    body = _object(body)
    pkey = parse_pkey(body.get("pkey"))
    return RemoveGuids(pkey=pkey, guids=list(dict.fromkeys(_guid_list(body.get("guids")))))


@dataclass(frozen=True)
class Qos:
    """QoS of a partition as IBTA codes (None: not sent): ``mtu`` (4, 5), ``sl`` (0..15), ``rate``."""

    mtu: int | None = None
    sl: int | None = None
    rate: int | None = None


def _qos(body: dict) -> Qos:
    return Qos(
        mtu=_optional(body, "mtu_limit", parse_mtu_limit),
        sl=_optional(body, "service_level", parse_int, 0, 15),
        rate=_optional(body, "rate_limit", parse_rate_limit),
    )


@dataclass(frozen=True)
class EmptyPKey:
    """``POST /resources/pkeys/add``: a partition without members."""

    pkey: int
    name: str | None = None
    index0: bool | None = None
    ip_over_ib: bool | None = None
    qos: Qos = field(default_factory=Qos)


def parse_empty_pkey(body: object) -> EmptyPKey:
    """Read ``{pkey, partition_name, index0, ip_over_ib, mtu_limit, service_level, rate_limit}``
    (only ``pkey`` required).

    Raises:
        UfmInputError: a missing or bad ``pkey``, or a bad optional value.
    """
    body = _object(body)
    return EmptyPKey(
        pkey=parse_pkey(body.get("pkey")),
        name=_optional(body, "partition_name", parse_name),
        index0=_optional(body, "index0", parse_bool),
        ip_over_ib=_optional(body, "ip_over_ib", parse_bool),
        qos=_qos(body),
    )


@dataclass(frozen=True)
class QosUpdate:
    """``PUT /resources/pkeys/qos_conf``."""

    pkey: int
    qos: Qos


def parse_qos_update(body: object) -> QosUpdate:
    """Read ``{pkey, mtu_limit, service_level, rate_limit}`` (only ``pkey`` required).

    Raises:
        UfmInputError: a missing or bad ``pkey``, or a bad QoS value.
    """
    body = _object(body)
    return QosUpdate(pkey=parse_pkey(body.get("pkey")), qos=_qos(body))


@dataclass(frozen=True)
class AddHosts:
    """``POST /resources/pkeys/hosts``: the host list as sent (Slurm syntax, expanded by the
    service with ``scheduler.hostlist.expand``)."""

    pkey: int
    hosts: str
    index0: bool | None = None
    ip_over_ib: bool | None = None


def parse_add_hosts(body: object) -> AddHosts:
    """Read the UFM Slurm plugin's ``{hosts_names, pkey, ip_over_ib, index0}``.

    Raises:
        UfmInputError: a missing or empty ``hosts_names``, a bad ``pkey`` or boolean.
    """
    body = _object(body)
    hosts = body.get("hosts_names")
    if not isinstance(hosts, str) or not hosts.strip():
        raise UfmInputError("hosts_names", 'must be a host list such as "node[01-04]"')
    return AddHosts(
        pkey=parse_pkey(body.get("pkey")),
        hosts=hosts.strip(),
        index0=_optional(body, "index0", parse_bool),
        ip_over_ib=_optional(body, "ip_over_ib", parse_bool),
    )


UNHEALTHY, HEALTHY = "UNHEALTHY", "HEALTHY"
ISOLATE = "isolate"
_PORT_NAME = re.compile(r"^(?:0[xX])?([0-9a-fA-F]{1,16})_(\d{1,3})$")


@dataclass(frozen=True)
class UnhealthyPorts:
    """``PUT /app/unhealthy_ports``: ``ports`` as ``(canonical GUID, port number)``, ``policy``
    ``UNHEALTHY`` or ``HEALTHY``, ``action`` ``isolate``."""

    ports: list[tuple[str, int]]
    policy: str
    action: str = ISOLATE


def parse_port_name(value: object, field: str = "ports") -> tuple[str, int]:
    """A UFM port name ``<GUID>_<port number>`` (the ``name`` of ``/resources/ports``).

    Raises:
        UfmInputError: anything else, a port number above 254 or a zero GUID.
    """
    match = _PORT_NAME.match(value.strip()) if isinstance(value, str) else None
    if not match or not 0 < int(match.group(2)) < 255:
        raise UfmInputError(field, f'{value!r} is not a port name "<guid>_<port>"')
    if int(match.group(1), 16) == 0:
        raise UfmInputError(field, f"{value!r}: a GUID is never 0")
    return normalize_guid(match.group(1)), int(match.group(2))


def parse_unhealthy_ports(body: object) -> UnhealthyPorts:
    """Read ``{"ports": ["<guid>_<port>", ...], "ports_policy": "UNHEALTHY"|"HEALTHY",
    "action": "isolate"}`` (``action`` defaults to isolate; ``ports_policy`` any case).

    Raises:
        UfmInputError: a missing or empty ``ports``, a bad port name, policy or action.
    """
    body = _object(body)
    ports = body.get("ports")
    if not isinstance(ports, list) or not ports:
        raise UfmInputError("ports", 'must be a non-empty list of port names "<guid>_<port>"')
    policy = body.get("ports_policy")
    if not isinstance(policy, str) or policy.strip().upper() not in (UNHEALTHY, HEALTHY):
        raise UfmInputError("ports_policy", f'{policy!r} is not "UNHEALTHY" or "HEALTHY"')
    action = body.get("action", ISOLATE)
    if not isinstance(action, str) or action.strip().lower() != ISOLATE:
        raise UfmInputError("action", f'{action!r} is not supported (only "isolate")')
    return UnhealthyPorts(
        ports=list(dict.fromkeys(parse_port_name(p) for p in ports)),
        policy=policy.strip().upper(),
    )


#: ``POST /actions`` device-health actions -> the ``ports_policy`` they apply
DEVICE_ACTIONS = {"mark_device_unhealthy": UNHEALTHY, "mark_device_healthy": HEALTHY}


@dataclass(frozen=True)
class DeviceHealth:
    """``POST /actions`` ``mark_device_unhealthy``/``mark_device_healthy``: the devices' node
    GUIDs (canonical) and the policy."""

    action: str
    guids: list[str]
    policy: str


def parse_device_action(body: object) -> DeviceHealth:
    """Read UFM's device action ``{"action": "mark_device_unhealthy"|"mark_device_healthy",
    "object_ids": ["<guid>", ...], "object_type": "System", "identifier": "id", "params":
    {"action": "isolate", "device_policy": "UNHEALTHY"}}`` (UFM Enterprise REST API guide,
    "Actions REST API"; the UFM SDK's ``batch_isolate_devices.py`` sends exactly this).
    ``object_type`` defaults to System, ``identifier`` to id (the GUID), ``params.action`` to
    isolate; ``params.device_policy``, when given, must agree with ``action``.

    Raises:
        UfmInputError: another action, object type or identifier, an empty or bad
            ``object_ids``, ``params.action`` other than isolate, a disagreeing policy.
    """
    body = _object(body)
    action = body.get("action")
    if not isinstance(action, str) or action.strip() not in DEVICE_ACTIONS:
        raise UfmInputError(
            "action", f"{action!r} is not supported here (only {', '.join(sorted(DEVICE_ACTIONS))})"
        )
    action = action.strip()
    if str(body.get("object_type", "System")).strip().lower() != "system":
        raise UfmInputError("object_type", f"{body.get('object_type')!r} is not System")
    if str(body.get("identifier", "id")).strip().lower() != "id":
        raise UfmInputError("identifier", f"{body.get('identifier')!r} is not id (the device GUID)")
    ids = body.get("object_ids")
    if not isinstance(ids, list) or not ids:
        raise UfmInputError("object_ids", "must be a non-empty list of device GUIDs")
    params = body.get("params", {})
    if not isinstance(params, dict):
        raise UfmInputError("params", "must be an object")
    how = params.get("action", ISOLATE)
    if not isinstance(how, str) or how.strip().lower() != ISOLATE:
        raise UfmInputError("params.action", f'{how!r} is not supported (only "isolate")')
    policy = DEVICE_ACTIONS[action]
    given = params.get("device_policy", policy)
    if not isinstance(given, str) or given.strip().upper() != policy:
        raise UfmInputError("params.device_policy", f"{given!r} does not match action {action} ({policy})")
    guids = list(dict.fromkeys(parse_guid(g, "object_ids") for g in ids))
    return DeviceHealth(action=action, guids=guids, policy=policy)


def parse_positive(value: str | None, field: str) -> int | None:
    """A query-string positive integer (``page_number``, ``rpp``); None when absent.

    Raises:
        UfmInputError: not decimal digits, 0, or absurdly long.
    """
    if value is None:
        return None
    if not value.isdigit() or len(value) > 12 or int(value) < 1:
        raise UfmInputError(field, f"{value!r} is not a positive integer")
    return int(value)

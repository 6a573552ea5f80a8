"""Ethernet devices managed over SNMP: switches (and anything with IF-MIB), their interfaces,
sensors and LLDP neighbours.

A :class:`Device` belongs to a fabric (``fabric.Fabric``; the Ethernet/RoCE fabric its alarms
and links are kept under, as IB alarms are under theirs) and may manage an IB switch
(``node``: the IB fabric's switch whose name is the device's sysName). Its credentials are
stored encrypted (``devices.crypto``) and are write-only everywhere (API, pages, audit).

Counters follow IF-MIB (RFC 2863): raw values as read, in ``Interface.counters`` (a JSON object
so that 64-bit values up to 2**64-1 stay exact on every database), rates computed by
``telemetry.semantics.derive_wrapping`` (the same module as the IB rates).
"""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.urls import reverse

from core.validators import printable_text
from telemetry.models import Resolution

from . import crypto
from .choices import AuthProtocol, PollStatus, PrivProtocol, SnmpVersion
from .collectors.snmp import Target

#: the credential fields, stored encrypted, written only through :meth:`Device.set_secret`
SECRET_FIELDS = ("community", "auth_key", "priv_key")


class Device(models.Model):
    """An SNMP agent Weft polls: where (``address``, ``port``), how (``version``; v2c community,
    or v3 ``user`` with ``auth_protocol``/``priv_protocol`` and their keys, ``context``), how
    patiently (``timeout_s`` per request, ``retries`` resends; the whole poll of the device gets
    ``timeout_s × (retries + 1) × 8`` at most, ``budget_s``), how often (``poll_interval_s``) and
    whether (``enabled``). Identification (first contact, then every inventory):
    ``sys_descr``/``sys_object_id``/``sys_name``, ``vendor``, chassis ``model``/``serial``.
    Poll state: ``status`` (``devices.choices.PollStatus``), ``last_error`` (what an operator can
    act on), ``unreachable_since``."""

    fabric = models.ForeignKey("fabric.Fabric", on_delete=models.CASCADE, related_name="devices")
    name = models.CharField(max_length=128, unique=True, validators=[printable_text])
    address = models.CharField(max_length=255, help_text="IP address or DNS name of the agent")
    port = models.PositiveIntegerField(
        default=161, validators=[MinValueValidator(1), MaxValueValidator(65535)]
    )
    version = models.CharField(max_length=2, choices=SnmpVersion.choices, default=SnmpVersion.V2C)
    community_enc = models.TextField(blank=True, editable=False)
    user = models.CharField(max_length=64, blank=True, help_text="SNMPv3 USM user (security name)")
    auth_protocol = models.CharField(max_length=8, choices=AuthProtocol.choices, default=AuthProtocol.NONE)
    auth_key_enc = models.TextField(blank=True, editable=False)
    priv_protocol = models.CharField(max_length=8, choices=PrivProtocol.choices, default=PrivProtocol.NONE)
    priv_key_enc = models.TextField(blank=True, editable=False)
    context = models.CharField(max_length=64, blank=True, help_text="SNMPv3 context name")
    timeout_s = models.FloatField(default=2.0, validators=[MinValueValidator(0.1), MaxValueValidator(60.0)])
    retries = models.PositiveSmallIntegerField(default=1, validators=[MaxValueValidator(10)])
    poll_interval_s = models.FloatField(default=60.0, validators=[MinValueValidator(1.0)])
    enabled = models.BooleanField(default=True)

    sys_descr = models.TextField(blank=True, editable=False)
    sys_object_id = models.CharField(max_length=128, blank=True, editable=False)
    sys_name = models.CharField(max_length=255, blank=True, editable=False)
    vendor = models.CharField(max_length=64, blank=True, editable=False)
    model = models.CharField(max_length=128, blank=True, editable=False)
    serial = models.CharField(max_length=128, blank=True, editable=False)
    identified_at = models.DateTimeField(null=True, blank=True, editable=False)
    #: snmpEngineID (hex) read at identification: an SNMPv3 trap's sender is known by it
    engine_id = models.CharField(max_length=66, blank=True, editable=False)
    #: the IB switch this device is the management agent of (sysName = the node's name)
    node = models.ForeignKey(
        "fabric.Node", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", editable=False
    )

    status = models.CharField(
        max_length=12, choices=PollStatus.choices, default=PollStatus.NEVER, editable=False
    )
    last_poll_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_ok_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_poll_s = models.FloatField(null=True, blank=True, editable=False)
    last_error = models.TextField(blank=True, editable=False)
    unreachable_since = models.DateTimeField(null=True, blank=True, editable=False)
    uptime_ticks = models.BigIntegerField(null=True, blank=True, editable=False)
    #: when the sensors were last read (every ``WEFT_SNMP_SENSORS_S``, not every poll)
    sensors_read_at = models.DateTimeField(null=True, blank=True, editable=False)
    #: lldpStatsRemTablesLastChangeTime at the last walk of the LLDP remote table (None: never
    #: walked, or the agent lacks it): the next poll walks the table only when it moved
    lldp_changed_ticks = models.BigIntegerField(null=True, blank=True, editable=False)
    requests = models.PositiveIntegerField(
        default=0, editable=False, help_text="SNMP requests of the last poll"
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("devices:device", args=[self.pk])

    def set_secret(self, name: str, plain: str) -> None:
        """Store credential ``name`` (one of :data:`SECRET_FIELDS`) encrypted; "" clears it."""
        if name not in SECRET_FIELDS:
            raise ValueError(f"{name!r} is not a device credential")
        setattr(self, f"{name}_enc", crypto.encrypt(plain))

    def has_secret(self, name: str) -> bool:
        """Whether credential ``name`` is set (without decrypting it)."""
        return bool(getattr(self, f"{name}_enc"))

    @property
    def budget_s(self) -> float:
        """The longest one poll of this device may take (its requests' timeouts, a few walks)."""
        return min(300.0, self.timeout_s * (self.retries + 1) * 8)

    def target(self) -> Target:
        """How to reach the agent, credentials decrypted (in memory only).

        Raises:
            devices.crypto.CredentialError: a stored credential cannot be decrypted.
        """
        return Target(
            host=self.address,
            port=self.port,
            version=self.version,
            community=crypto.decrypt(self.community_enc),
            user=self.user,
            auth_protocol=self.auth_protocol,
            auth_key=crypto.decrypt(self.auth_key_enc),
            priv_protocol=self.priv_protocol,
            priv_key=crypto.decrypt(self.priv_key_enc),
            context=self.context,
            timeout_s=self.timeout_s,
            retries=self.retries,
        )


#: IF-MIB oper states that are a fault on an admin-up interface (a link down). ``notPresent`` (no
#: transceiver in the cage, the default of unused ports on many switches), ``dormant``,
#: ``testing`` and ``unknown`` are not: one rule for the alarms at first poll, the devices list's
#: "Down" count and the heatmap's down mark (RFC 2863 ifOperStatus)
DOWN_OPER_STATES = frozenset({"down", "lowerLayerDown"})


def is_down(admin_status: str, oper_status: str) -> bool:
    """Whether an interface with these IF-MIB status names is down as a fault (admin up, oper
    in :data:`DOWN_OPER_STATES`)."""
    return admin_status == "up" and oper_status in DOWN_OPER_STATES


class Interface(models.Model):
    """An IF-MIB interface of a device and its rates over the last poll interval.

    ``speed_mbps`` ifHighSpeed (Mb/s); ``admin_status``/``oper_status`` IF-MIB names ("up",
    "down", "lowerLayerDown"…); ``hc`` 64-bit ifHC* counters (else 32-bit, which wrap in
    seconds on fast links); ``counters`` raw values keyed by
    ``telemetry.semantics.ETHERNET_COUNTERS`` (octets, unicast packets, discards, errors, PFC
    frames); ``discontinuity`` ifCounterDiscontinuityTime. Rates (null when none could be
    computed, ``rate_reason`` says why): bytes/s, packets/s, ``utilisation`` 0..1, ``congestion``
    0..1 (``telemetry.semantics`` Ethernet notes), ``error_deltas`` ``{counter: delta}``,
    ``wrapped`` counters that wrapped this interval, ``reset`` the interval was a discontinuity.
    """

    device = models.ForeignKey(Device, on_delete=models.CASCADE, related_name="interfaces")
    if_index = models.PositiveIntegerField()
    name = models.CharField(max_length=128)
    descr = models.CharField(max_length=255, blank=True)
    alias = models.CharField(max_length=255, blank=True)
    if_type = models.PositiveIntegerField(null=True, blank=True)
    speed_mbps = models.FloatField(null=True, blank=True)
    admin_status = models.CharField(max_length=16, blank=True)
    oper_status = models.CharField(max_length=16, blank=True)
    last_change = models.DateTimeField(null=True, blank=True)
    hc = models.BooleanField(default=False)
    counters = models.JSONField(default=dict, blank=True)
    discontinuity = models.BigIntegerField(null=True, blank=True)
    sampled_at = models.DateTimeField(null=True, blank=True)
    interval_s = models.FloatField(null=True, blank=True, help_text="seconds between the last two samples")
    in_bytes_per_s = models.FloatField(null=True, blank=True)
    out_bytes_per_s = models.FloatField(null=True, blank=True)
    in_pkts_per_s = models.FloatField(null=True, blank=True)
    out_pkts_per_s = models.FloatField(null=True, blank=True)
    utilisation = models.FloatField(null=True, blank=True)
    congestion = models.FloatField(null=True, blank=True)
    error_deltas = models.JSONField(null=True, blank=True)
    wrapped = models.JSONField(default=list, blank=True)
    reset = models.BooleanField(default=False)
    rate_reason = models.CharField(max_length=120, blank=True)
    present = models.BooleanField(default=True, help_text="listed by the agent's last inventory")

    class Meta:
        ordering = ["device", "if_index"]
        constraints = [
            models.UniqueConstraint(fields=["device", "if_index"], name="interface_unique_per_device")
        ]

    def __str__(self) -> str:
        return f"{self.device.name} {self.name}"

    @property
    def speed_gbps(self) -> float | None:
        return self.speed_mbps / 1000.0 if self.speed_mbps else None


class Sensor(models.Model):
    """An ENTITY-SENSOR-MIB sensor: ``value`` in ``unit`` (scale and precision applied), ``raw``
    as read, ``kind`` (temperature, fan, power, voltage, current…), ``status`` ok/unavailable/
    nonoperational, ``component`` fan/psu when it belongs to one (``devices.parsers``)."""

    device = models.ForeignKey(Device, on_delete=models.CASCADE, related_name="sensors")
    index = models.PositiveIntegerField(help_text="entPhysicalIndex")
    name = models.CharField(max_length=255)
    kind = models.CharField(max_length=16)
    unit = models.CharField(max_length=8, blank=True)
    sensor_type = models.PositiveSmallIntegerField()
    scale = models.PositiveSmallIntegerField(default=9)
    precision = models.SmallIntegerField(default=0)
    raw = models.BigIntegerField(null=True, blank=True)
    value = models.FloatField(null=True, blank=True)
    status = models.CharField(max_length=16)
    component = models.CharField(max_length=8, blank=True)
    updated = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["device", "kind", "index"]
        constraints = [models.UniqueConstraint(fields=["device", "index"], name="sensor_unique_per_device")]

    def __str__(self) -> str:
        return f"{self.device.name} {self.name}"


class Neighbour(models.Model):
    """An Ethernet link as LLDP sees it from ``device``: its ``interface`` (``local_port`` by
    LLDP name) to the remote system ``sys_name``/``chassis_id`` port ``port_id``. ``remote`` is
    the managed device at the other end when one has that sysName, ``remote_interface`` its
    interface named ``port_id`` or ``port_descr``. Rows come and go with the LLDP table
    (``device.link_up``/``device.link_down`` events)."""

    device = models.ForeignKey(Device, on_delete=models.CASCADE, related_name="neighbours")
    interface = models.ForeignKey(
        Interface, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    local_port = models.CharField(max_length=128)
    chassis_id = models.CharField(max_length=128)
    port_id = models.CharField(max_length=128)
    port_descr = models.CharField(max_length=255, blank=True)
    sys_name = models.CharField(max_length=255, blank=True)
    remote = models.ForeignKey(Device, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    remote_interface = models.ForeignKey(
        Interface, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    first_seen = models.DateTimeField(auto_now_add=True)
    last_seen = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["device", "local_port"]
        constraints = [
            models.UniqueConstraint(
                fields=["device", "local_port", "chassis_id", "port_id"], name="neighbour_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.device.name} {self.local_port} → {self.sys_name or self.chassis_id} {self.port_id}"


class DeviceSample(models.Model):
    """One time step of a device's history: its interfaces' rates and its sensors' readings, packed
    by ``devices.services.history`` (``data``). Raw rows are written by each successful poll
    (``t`` = the interfaces' sample time), per-minute and per-hour rollups (``t`` = the window's
    start, values averaged, errors summed) by ``devices.tasks.rollup_history_task``, with the
    retention of the IB counter history (``WEFT_HISTORY_RAW_HOURS``/``MINUTE``/``HOUR``)."""

    #: no database constraint and nothing done on delete: a deleted device's history stays until
    #: retention drops it (``devices.services.config.delete_device``)
    device = models.ForeignKey(Device, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+")
    resolution = models.PositiveIntegerField(choices=Resolution.choices, default=Resolution.RAW)
    t = models.IntegerField(help_text="epoch seconds (UTC)")
    data = models.BinaryField()

    class Meta:
        indexes = [
            models.Index(fields=["device", "resolution", "t"], name="devsample_dev_res_t"),
            models.Index(fields=["resolution", "t"], name="devsample_res_t"),
        ]

    def __str__(self) -> str:
        return f"{self.device_id} @{self.t} res {self.resolution}"

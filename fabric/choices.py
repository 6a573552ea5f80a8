"""Enumerations of the fabric model, named as in the IBTA spec (Vol 1, ch. 14.2.5)."""

from django.db import models


class NodeType(models.TextChoices):
    """NodeInfo:NodeType (IBTA Vol 1, 14.2.5.3): 1 CA, 2 switch, 3 router."""

    CA = "ca", "CA"
    SWITCH = "switch", "Switch"
    ROUTER = "router", "Router"


class Tier(models.IntegerChoices):
    """Derived position of a node in a fat tree (not an IB attribute).

    Hosts' CAs are tier 0; a switch with at least one CA is a leaf (1); a switch whose
    neighbours are leaves is a spine (2); a switch above spines is core (3); switches not
    reachable from any CA are UNKNOWN.
    """

    HOST = 0, "host"
    LEAF = 1, "leaf"
    SPINE = 2, "spine"
    CORE = 3, "core"
    UNKNOWN = 9, "unknown"


class FabricRole(models.TextChoices):
    """What a fabric, or a switch of a fabric, carries (a site's choice, not an IB attribute).

    Only ``compute`` fabrics and switches make GPU locality (``scheduler.topology``): a storage or
    management fabric reaches the same hosts as the compute one, and a storage switch in a compute
    subnet reaches hosts of many units; neither is a leaf of the placement tree.
    """

    COMPUTE = "compute", "Compute"
    STORAGE = "storage", "Storage"
    MANAGEMENT = "management", "Management"


class PortState(models.IntegerChoices):
    """PortInfo:PortState (IBTA Vol 1, 14.2.5.6): 0 = no state change/unknown."""

    UNKNOWN = 0, "Unknown"
    DOWN = 1, "Down"
    INIT = 2, "Initialize"
    ARMED = 3, "Armed"
    ACTIVE = 4, "Active"


class PhysState(models.IntegerChoices):
    """PortInfo:PortPhysicalState (IBTA Vol 1, 14.2.5.6)."""

    UNKNOWN = 0, "Unknown"
    SLEEP = 1, "Sleep"
    POLLING = 2, "Polling"
    DISABLED = 3, "Disabled"
    TRAINING = 4, "PortConfigurationTraining"
    LINKUP = 5, "LinkUp"
    ERROR_RECOVERY = 6, "LinkErrorRecovery"
    PHY_TEST = 7, "Phy Test"


class SMState(models.IntegerChoices):
    """SMInfo:SMState (IBTA Vol 1, 14.2.5.13)."""

    NOT_ACTIVE = 0, "Not active"
    DISCOVERING = 1, "Discovering"
    STANDBY = 2, "Standby"
    MASTER = 3, "Master"


class DiscoverySource(models.TextChoices):
    LIVE = "live", "Live (ibnetdiscover)"
    FILE = "file", "File import"
    UPLOAD = "upload", "Upload (UI/API)"
    #: a targeted refresh (PortInfo of some ports) after an SM notice or the port-state fallback
    NOTICE = "notice", "SM notice (port refresh)"


class DiscoveryStatus(models.TextChoices):
    RUNNING = "running", "Running"
    OK = "ok", "Complete"
    PARTIAL = "partial", "Partial (some nodes unreachable)"
    FAILED = "failed", "Failed"


class Membership(models.TextChoices):
    """A port's membership of a partition (IBTA Vol 1 10.9.1: the PKey's high bit; OpenSM's
    ``=full``/``=limited``/``=both``, both needing ``allow_both_pkeys``)."""

    FULL = "full", "Full"
    LIMITED = "limited", "Limited"
    BOTH = "both", "Full and limited"


class PartitionSource(models.TextChoices):
    """Who wrote a partition: Weft (API, pools) or an imported ``partitions.conf``."""

    WEFT = "weft", "Weft"
    IMPORTED = "imported", "Imported"


class MemberReason(models.TextChoices):
    """Why a port is a member: configured by hand (``extra``: storage, login nodes), computed from
    a pool's hosts (``pool``, the pools app), or read from an imported file (``imported``)."""

    EXTRA = "extra", "Extra (configured)"
    POOL = "pool", "Pool hosts"
    IMPORTED = "imported", "Imported"


class ApplyState(models.TextChoices):
    """Whether OpenSM runs what Weft stores for a partition (``fabric.services.partitions.apply``)."""

    PENDING = "pending", "Not applied yet"
    APPLIED = "applied", "Applied and verified"
    #: applied to the members in the fabric; some members (GUIDs the fabric does not have, e.g.
    #: SR-IOV virtual functions) cannot be verified: never reported as plain "applied"
    PARTIAL = "partial", "Applied to the members in the fabric, some not verifiable"
    DRIFT = "drift", "Drift (ports disagree)"
    FAILED = "failed", "Apply failed"


class ApplyRunState(models.TextChoices):
    """Where a requested apply of a fabric's partitions is (``fabric.PartitionApply``)."""

    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    COALESCED = "coalesced", "Joined the running apply"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"

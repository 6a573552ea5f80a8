"""A fabric of one dual-port CA, for the partition member checks (Weft API and UFM API alike): its
node GUID (``NODE``), its two port GUIDs (``PORT1``/``PORT2``, LIDs 10 and 11) and a GUID the
fabric does not have (``VF``: an SR-IOV virtual function's, or made up)."""

from __future__ import annotations

from fabric.choices import NodeType
from fabric.models import Fabric, Node, Port

NODE = "0x0002c90300001000"  # a CA's node GUID
PORT1, PORT2 = "0x0002c90300001001", "0x0002c90300001002"
VF = "0xdeadbeefdeadbeef"  # not in the fabric (a VF GUID, or made up)


def one_ca_fabric(name: str = "site") -> Fabric:
    """Fabric ``name`` holding CA ``gpu01 mlx5_0`` (node GUID ``NODE``) with ports ``PORT1``, ``PORT2``."""
    fabric = Fabric.objects.create(name=name)
    node = Node.objects.create(fabric=fabric, node_guid=NODE, node_type=NodeType.CA, name="gpu01 mlx5_0",
                               num_ports=2)  # fmt: skip
    Port.objects.create(node=node, port_num=1, port_guid=PORT1, lid=10)
    Port.objects.create(node=node, port_num=2, port_guid=PORT2, lid=11)
    return fabric

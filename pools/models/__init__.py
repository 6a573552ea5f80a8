"""Models of the pools app: the GPU inventory (``inventory``), tenants, pools and
allocations (``allocation``), and host agents' token bindings (``agents``)."""

from .agents import AgentBinding
from .allocation import Allocation, AllocationItem, Pool, Tenant, TenantMembership
from .inventory import Gpu, HostInventory, MigSlice

__all__ = [
    "AgentBinding",
    "Allocation",
    "AllocationItem",
    "Gpu",
    "HostInventory",
    "MigSlice",
    "Pool",
    "Tenant",
    "TenantMembership",
]

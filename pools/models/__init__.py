"""Models of the pools app: the GPU inventory (``inventory``) and tenants, pools and
allocations (``allocation``)."""

from .allocation import Allocation, AllocationItem, Pool, Tenant, TenantMembership
from .inventory import Gpu, HostInventory, MigSlice

__all__ = [
    "Allocation",
    "AllocationItem",
    "Gpu",
    "HostInventory",
    "MigSlice",
    "Pool",
    "Tenant",
    "TenantMembership",
]

"""Who sees and acts in which tenant (issue 11: "Tenant scoping on every endpoint").

* site **Admins** (``accounts.roles``) see and act in every tenant and configure tenants and pools;
* everyone else sees the tenants they are a member of (:class:`~pools.models.TenantMembership`),
  those tenants' pools, the shared pools, and the allocations made for those tenants: anything
  else is a 404, as if it did not exist;
* allocating and releasing needs the site **Operator** role *and* an ``operator`` membership of
  the tenant the allocation is for (the lower of the two rights counts);
* rows of the lower apps that carry a tenant's data — events of jobs and allocations
  (``Event.tenant_id``), the partitions of a tenant's pools and jobs — are read by Admins, by
  fabric-wide staff (users who belong to no tenant: Operators and Viewers of the whole fabric)
  and by the tenant's members; a tenant member sees the fabric-wide rows and their own tenants'
  only, a host agent (the "Host agent" group) the fabric-wide rows only
  (:func:`scoped_tenant_ids`, :func:`narrow_partitions`, registered with ``accounts.scoping``).
"""

from __future__ import annotations

from django.db.models import Q

from accounts.roles import Role, has_role
from fabric.models import Partition

from .api.permissions import AGENT_GROUP
from .choices import TenantRole
from .models import Tenant, TenantMembership


def is_admin(user) -> bool:
    return has_role(user, Role.ADMIN)


def visible_tenants(user):
    """Tenants ``user`` may read (a QuerySet)."""
    if is_admin(user):
        return Tenant.objects.all()
    return Tenant.objects.filter(memberships__user=user)


def scope_tenants(qs, user):
    return qs if is_admin(user) else qs.filter(memberships__user=user)


def scope_pools(qs, user):
    """Pools of the user's tenants and shared pools."""
    if is_admin(user):
        return qs
    return qs.filter(Q(tenant__isnull=True) | Q(tenant__memberships__user=user))


def scope_allocations(qs, user):
    return qs if is_admin(user) else qs.filter(tenant__memberships__user=user)


def operator_tenant_ids(user) -> set[int]:
    """Tenants in which ``user`` may allocate and release (empty below the site Operator role)."""
    if not has_role(user, Role.OPERATOR):
        return set()
    if is_admin(user):
        return set(Tenant.objects.values_list("pk", flat=True))
    return set(
        TenantMembership.objects.filter(user=user, role=TenantRole.OPERATOR).values_list(
            "tenant_id", flat=True
        )
    )


def can_operate(user, tenant_id: int) -> bool:
    """True when ``user`` may allocate/release for tenant ``tenant_id``."""
    if is_admin(user):
        return True
    return (
        has_role(user, Role.OPERATOR)
        and TenantMembership.objects.filter(user=user, tenant_id=tenant_id, role=TenantRole.OPERATOR).exists()
    )


def pool_tenant_mismatch(pool, tenant_id: int | None) -> str | None:
    """Why ``tenant_id`` (the tenant a request names, None when it names none) may not be used with
    ``pool``, or None when it may: a tenant's pool takes its own tenant only (issue 22: allocate
    ignored another one where job submit refused it). The one rule of both: the allocate API
    and ``scheduler.access.submit_tenant`` answer it with a 400 on the field ``tenant``."""
    if pool.tenant_id is not None and tenant_id not in (None, pool.tenant_id):
        return (
            f"pool {pool.name} is tenant {pool.tenant_id}'s, not tenant {tenant_id}'s: leave tenant out "
            "or name the pool's own"
        )
    return None


class TenantRefused(Exception):
    """Why a user may not allocate for a tenant in a pool (:func:`allocation_tenant`): ``status``
    400 (a tenant the pool does not take, or none named for a shared pool: ``field`` "tenant"),
    404 (a tenant the user does not see) or 403 (no operator membership of it)."""

    def __init__(self, message: str, status: int, field: str = "tenant"):
        super().__init__(message)
        self.status, self.field = status, field


def allocation_tenant(user, pool, tenant_id: int | None, *, what: str = "allocating") -> int:
    """The tenant ``user`` allocates for in ``pool`` (a pool the user sees: :func:`scope_pools`)
    when naming ``tenant_id`` (None: none named): a tenant's pool's own tenant; for a shared pool
    the one named, else the user's one operator tenant. The one rule of the allocate API and the
    pool page's form.

    Raises:
        TenantRefused: 400 (:func:`pool_tenant_mismatch`; a shared pool and no single operator
            tenant of the user), 404 (a tenant the user does not see), 403 (the user may not
            operate in that tenant: :func:`can_operate`).
    """
    mismatch = pool_tenant_mismatch(pool, tenant_id)
    if mismatch:
        raise TenantRefused(mismatch, 400)
    chosen = pool.tenant_id or tenant_id
    if chosen is None:
        mine = operator_tenant_ids(user)
        if len(mine) != 1:
            raise TenantRefused(f"pool {pool.name} is shared: name the tenant", 400)
        chosen = mine.pop()
    if not can_operate(user, chosen):
        if not visible_tenants(user).filter(pk=chosen).exists():
            raise TenantRefused(f"no tenant {chosen}", 404)
        raise TenantRefused(f"{what} needs an operator membership of the tenant", 403)
    return chosen


def partition_tenants(pks: list[int]) -> dict[int, int | None]:
    """``{partition pk: tenant id}`` for the partitions among ``pks`` owned by a tenant's pool or
    by a job (``accounts.scoping.register_row_tenant``); a shared pool's or a fabric's own
    partition is absent (fabric-wide)."""
    rows = Partition.objects.filter(pk__in=pks).values_list("pk", "pool__tenant_id", "job__tenant_id")
    return {pk: pool_t or job_t for pk, pool_t, job_t in rows if (pool_t or job_t) is not None}


def scoped_tenant_ids(user) -> set[int] | None:
    """The tenants whose rows ``user`` reads (``accounts.scoping`` provider): None for all (an
    Admin; a user who belongs to no tenant: fabric-wide staff), else the ids of the user's tenants;
    an empty set for a host agent (a member of the "Host agent" group, ``pools.api.permissions``)
    and for anonymous users."""
    if not (user and user.is_authenticated):
        return set()
    if is_admin(user):
        return None
    if user.groups.filter(name=AGENT_GROUP).exists():
        return set()
    ids = set(TenantMembership.objects.filter(user=user).values_list("tenant_id", flat=True))
    return ids or None


def narrow_partitions(qs, tenant_ids: set[int]):
    """``fabric.Partition`` rows a user of ``tenant_ids`` reads: all but the partitions of other
    tenants' pools and jobs (their names and PKeys are those tenants' data)."""
    ids = sorted(tenant_ids)
    return qs.exclude(Q(pool__tenant_id__isnull=False) & ~Q(pool__tenant_id__in=ids)).exclude(
        Q(job__isnull=False) & ~Q(job__tenant_id__in=ids)
    )

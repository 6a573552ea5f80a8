"""Who sees and acts in which tenant (issue 11: "Tenant scoping on every endpoint").

* site **Admins** (``accounts.roles``) see and act in every tenant and configure tenants and pools;
* everyone else sees the tenants they are a member of (:class:`~pools.models.TenantMembership`),
  those tenants' pools, the shared pools, and the allocations made for those tenants: anything
  else is a 404, as if it did not exist;
* allocating and releasing needs the site **Operator** role *and* an ``operator`` membership of
  the tenant the allocation is for (the lower of the two rights counts).
"""

from __future__ import annotations

from django.db.models import Q

from accounts.roles import Role, has_role

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

"""Who submits for which tenant (shared by the API and the pages; the rules of ``pools.access``):
a tenant pool's jobs are its tenant's; a shared pool's job names its tenant, or is for the one
tenant the user operates; submitting needs an operator membership of that tenant."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied

from pools import access

from .services.queue import InvalidJob


def scope_jobs(qs, user, field: str = "tenant"):
    """Rows of the tenants ``user`` belongs to (an Admin: every row)."""
    return qs if access.is_admin(user) else qs.filter(**{f"{field}__memberships__user": user})


def submit_tenant(user, pool, tenant_id: int | None) -> int:
    """The tenant a job of ``pool`` is submitted for by ``user`` (``tenant_id``: the one asked
    for, or None). Raises :class:`~scheduler.services.queue.InvalidJob` (field ``tenant``: the
    pool is another tenant's, a shared pool without a tenant, a tenant the user cannot see) and
    ``PermissionDenied`` (no operator membership of the tenant)."""
    mismatch = access.pool_tenant_mismatch(pool, tenant_id)
    if mismatch:
        raise InvalidJob(mismatch, field="tenant")
    tenant = pool.tenant_id or tenant_id
    if tenant is None:
        mine = access.operator_tenant_ids(user)
        if len(mine) != 1:
            raise InvalidJob(f"pool {pool.name} is shared: name the tenant", field="tenant")
        tenant = mine.pop()
    if not access.can_operate(user, tenant):
        if not access.visible_tenants(user).filter(pk=tenant).exists():
            raise InvalidJob(f"no tenant {tenant}", field="tenant")
        raise PermissionDenied("submitting needs an operator membership of the tenant")
    return tenant

"""Tenants and pools written by an Admin, shared by the API (``pools.api.views``: ``TenantViewSet``,
``PoolViewSet``) and the pages (``pools.views``: the tenant and pool forms).

The checks of what may be stored are the API serializers' (``pools.api.serializers``:
``TenantSerializer``, ``PoolSerializer``: a user listed twice, a guarantee above its quota, a
PKey that needs a fabric, is taken or lies in a job PKey range, an empty job PKey range), which
the forms run too: one set of checks, one set of messages. What this module owns is the write:
each create, update and delete in one transaction with its ``AuditEntry`` (actions
``tenant.create``/``.update``/``.delete``, ``pool.create``/``.update``/``.delete``, as
``accounts.api.mixins.AuditedWritesMixin`` writes them), and the refusal to delete a tenant or
pool that still holds GPUs or has jobs waiting in the queue (:class:`TenancyConflict`, a 409).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from accounts import audit

from ..choices import HOLDING_STATES
from ..models import Allocation, Pool, Tenant
from .allocation import rebalance_borrowed
from .partitions import set_pool_pkey


class TenancyConflict(Exception):
    """A delete refused while something depends on the row (HTTP 409): the message says what
    and what to do first, e.g. "tenant t1 has 2 queued job(s) waiting to be placed: cancel them
    first"."""

    status = 409


def tenant_members(tenant: Tenant) -> list[dict[str, Any]]:
    """The members of ``tenant`` as audited: ``[{"user": user id, "role": "viewer"|"operator"}]``
    by user id."""
    return [{"user": m.user_id, "role": m.role} for m in tenant.memberships.order_by("user_id")]


def refuse_if_holding(allocations, what: str, owner: Tenant | Pool | None = None) -> None:
    """Raise :class:`TenancyConflict` when ``allocations`` (a queryset) hold GPUs, or ``owner``
    (a pool or tenant) has jobs the scheduler's queue still waits to place (``owner.jobs``:
    deleting it would drop them without a trace; ended jobs go with it, as its allocation history
    does). ``what`` names the owner in the message."""
    n = allocations.filter(state__in=HOLDING_STATES).count()
    if n:
        raise TenancyConflict(f"{what} has {n} active allocations: release them first")
    jobs = getattr(owner, "jobs", None)  # the scheduler's reverse relation (scheduler.Job)
    if jobs is not None:
        waiting = jobs.filter(state="pending").count()
        if waiting:
            raise TenancyConflict(
                f"{what} has {waiting} queued job(s) waiting to be placed: cancel them first"
            )


def _locked(model, pk: int):
    """The row ``pk`` of ``model`` locked for the transaction; ``model.DoesNotExist`` when it was
    deleted since the caller read it (a PATCH racing a DELETE: the API answers 404)."""
    return model._default_manager.select_for_update().get(pk=pk)


def write_tenant(serializer) -> Tenant:
    """Create or update the tenant of a validated ``TenantSerializer`` (``serializer.instance``
    None: create) and its members (``members`` replaces the list when sent), audited
    ``tenant.create`` (name, description, members) or ``tenant.update`` (``{field: [old, new]}``
    of the fields sent that changed; ``members`` the new list when sent), in one transaction.

    Raises:
        Tenant.DoesNotExist: the tenant was deleted meanwhile.
    """
    with transaction.atomic():
        if serializer.instance is None:
            tenant = serializer.save()
            audit.record(
                "tenant.create",
                tenant,
                {"name": tenant.name, "description": tenant.description, "members": tenant_members(tenant)}
                | {
                    k: v
                    for k, v in (
                        ("contacts", tenant.contacts),
                        ("webhook_url", tenant.webhook_url),
                        ("webhook_secret", "(set)" if tenant.webhook_secret else ""),
                    )
                    if v
                },  # fmt: skip
            )
            return tenant
        before = _locked(Tenant, serializer.instance.pk)
        tenant = serializer.save()
        fields = [f for f in serializer.validated_data if f != "memberships"]
        changes = audit.model_changes(before, tenant, fields)
        if "webhook_secret" in changes:  # a secret never goes into the audit log
            changes["webhook_secret"] = "(changed)"
        if "memberships" in serializer.validated_data:
            changes["members"] = tenant_members(tenant)
        audit.record("tenant.update", tenant, changes)
        return tenant


def delete_tenant(tenant: Tenant, *, user=None) -> None:
    """Delete ``tenant`` with its pools (their PKeys taken off the fabric: ``set_pool_pkey``),
    memberships and ended allocations, audited ``tenant.delete``, in one transaction.

    Raises:
        TenancyConflict: it holds GPUs or has queued jobs (:func:`refuse_if_holding`).
        Tenant.DoesNotExist: it was deleted meanwhile.
    """
    with transaction.atomic():
        # its pools, then itself (the order a submit and an allocation lock them in), then the
        # check: a job submitted or an allocation made meanwhile is seen, never cascaded away
        list(
            Pool.objects.select_for_update().filter(tenant=tenant).order_by("pk").values_list("pk", flat=True)
        )
        _locked(Tenant, tenant.pk)
        refuse_if_holding(Allocation.objects.filter(tenant=tenant), f"tenant {tenant}", tenant)
        for pool in tenant.pools.exclude(partition=None):  # the PKeys go with its pools
            set_pool_pkey(pool, None, user=user)
        audit.record("tenant.delete", tenant, user=user)
        tenant.delete()


def _pool_create_changes(serializer, pool: Pool) -> dict[str, Any]:
    return {
        f: getattr(pool, f if f not in ("tenant", "fabric") else f + "_id") for f in serializer.validated_data
    }


def write_pool(serializer, *, user=None) -> Pool:
    """Create or update the pool of a validated ``PoolSerializer`` (its ``save``:
    ``pools.services.partitions.save_pool``, which checks the PKey and job range again under the
    fabric row locks and gives the PKey), audited ``pool.create`` (the fields sent) or ``pool.update``
    (``{field: [old, new]}`` of the fields sent that changed, ``pkey`` as integers), and when an
    update changed the guaranteed share the pool's borrowed flags re-marked
    (``rebalance_borrowed``), in one transaction.

    Raises:
        Pool.DoesNotExist: the pool was deleted meanwhile.
        rest_framework.exceptions.ValidationError: the PKey was taken meanwhile (on ``pkey``).
    """
    with transaction.atomic():
        if serializer.instance is None:
            pool = serializer.save()
            audit.record("pool.create", pool, _pool_create_changes(serializer, pool))
            return pool
        before = _locked(Pool, serializer.instance.pk)
        pool = serializer.save()
        # the PKey before the change is the serializer's (``before``'s partition may be gone now)
        changes = audit.model_changes(before, pool, [f for f in serializer.validated_data if f != "pkey"])
        if serializer.pkey_before != pool.pkey:
            changes["pkey"] = [serializer.pkey_before, pool.pkey]
        audit.record("pool.update", pool, changes)
        if {"guaranteed_gpus", "guaranteed_slices"} & set(serializer.validated_data):
            rebalance_borrowed(pool.pk, user=user)
        return pool


def delete_pool(pool: Pool, *, user=None) -> None:
    """Delete ``pool`` (its PKey taken off the fabric at the next apply) with its ended
    allocations, audited ``pool.delete``, in one transaction.

    Raises:
        TenancyConflict: it holds GPUs or has queued jobs (:func:`refuse_if_holding`).
        Pool.DoesNotExist: it was deleted meanwhile.
    """
    with transaction.atomic():
        _locked(Pool, pool.pk)  # then the check: a submit or an allocation meanwhile is seen
        refuse_if_holding(pool.allocations.all(), f"pool {pool}", pool)
        if pool.partition_id:  # its PKey goes with it (taken off the ports at the apply)
            set_pool_pkey(pool, None, user=user)
        audit.record("pool.delete", pool, user=user)
        pool.delete()


def sync_directory_memberships(user, tenants: dict[str, str | None], *, source: str) -> list[str]:
    """Make ``user``'s memberships of the tenants named in ``tenants`` what a directory sign-in
    gave (``accounts.directory.apply_groups``, through ``accounts.signals.directory_groups_applied``):
    ``{tenant name: "viewer" | "operator" | None}``, None meaning no membership. Tenants not named
    are left alone; a named tenant that does not exist is logged and skipped (the mapping may name
    it before an Admin creates it). Each change is audited ``tenant.member_sync`` (``source``:
    ``ldap``/``oidc``), in the caller's transaction.

    Returns the names of the tenants whose membership changed.
    """
    import logging

    from ..models import TenantMembership

    changed = []
    by_name = {t.name: t for t in Tenant.objects.filter(name__in=list(tenants))}
    current = {
        m.tenant_id: m for m in TenantMembership.objects.filter(user=user, tenant__in=by_name.values())
    }
    for name, wanted in tenants.items():
        tenant = by_name.get(name)
        if tenant is None:
            logging.getLogger("weft.auth").warning(
                "%s tenant mapping names tenant %r, which does not exist: skipped", source, name
            )
            continue
        membership = current.get(tenant.pk)
        before = membership.role if membership else None
        if before == wanted:
            continue
        if wanted is None:
            membership.delete()
        elif membership is None:
            TenantMembership.objects.create(tenant=tenant, user=user, role=wanted)
        else:
            membership.role = wanted
            membership.save(update_fields=["role"])
        audit.record(
            "tenant.member_sync",
            tenant,
            {"user": user.get_username(), "role": [before, wanted], "source": source},
            user=user,
        )
        changed.append(name)
    return changed

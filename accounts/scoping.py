"""Who sees which tenant's rows, as a seam every app can use (issue 22: tenants saw other tenants
through events and partitions while the tenant-scoped endpoints refused the same rows).

The app that owns tenants (pools) plugs in through ``AppConfig.ready()``:

* :func:`register_tenant_scope` — ``provider(user) -> set of tenant ids | None``: None for a user
  who sees every tenant (fabric-wide staff), else the tenants the user sees (empty: none);
* :func:`register_row_scope` — ``(model label, narrow(queryset, tenant ids) -> queryset)`` for
  rows of a lower app that belong to a tenant through a relation that app does not know (a
  ``fabric.Partition`` of a tenant's pool or job);
* :func:`register_row_tenant` — ``(model label, tenants(pks) -> {pk: tenant id | None})``: whose
  data a row of a lower app is, for its writers (the partitions service gives a ``partition.drift``
  event the tenant of the partition's pool or job).

Lower apps (fabric, events) call :func:`visible_tenant_ids` / :func:`scope_rows` and import
nothing of pools. With nothing registered, everyone sees everything.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db.models import QuerySet

TenantScope = Callable[[object], "set[int] | None"]
RowScope = Callable[[QuerySet, "set[int]"], QuerySet]
_providers: list[TenantScope] = []
_row_scopes: dict[str, RowScope] = {}
RowTenants = Callable[["list[int]"], "dict[int, int | None]"]
_row_tenants: dict[str, RowTenants] = {}

#: ``Event.tenant_id`` (and ``Alarm.tenant_id``) of a row that carries the data of several tenants
#: (a fabric-wide partitions apply naming the partitions of two tenants' pools): no tenant's id, so
#: no tenant member reads it; fabric-wide staff do (tenant ids start at 1).
STAFF_ONLY = 0


def register_tenant_scope(provider: TenantScope) -> None:
    """Add ``provider(user) -> set of tenant ids | None`` (once per provider)."""
    if provider not in _providers:
        _providers.append(provider)


def register_row_scope(model_label: str, narrow: RowScope) -> None:
    """Rows of ``model_label`` (``"fabric.Partition"``) a tenant-scoped user may read:
    ``narrow(queryset, tenant ids)``."""
    _row_scopes[model_label] = narrow


def register_row_tenant(model_label: str, tenants: RowTenants) -> None:
    """Rows of ``model_label`` belong to tenants as ``tenants(pks) -> {pk: tenant id or None}``."""
    _row_tenants[model_label] = tenants


def row_tenants(model_label: str, pks) -> dict[int, int | None]:
    """``{pk: tenant id or None}`` for rows ``pks`` of ``model_label`` (None: fabric-wide; every
    pk None when no app registered the model)."""
    pks = sorted(set(pks))
    found = _row_tenants[model_label](pks) if model_label in _row_tenants and pks else {}
    return {pk: found.get(pk) for pk in pks}


def tenant_of_rows(tenant_ids) -> int | None:
    """The ``tenant_id`` of a row (an event, an alarm) that carries data of rows owned by
    ``tenant_ids`` (None: fabric-wide rows): None when none is a tenant's, the tenant when one
    is, :data:`STAFF_ONLY` when several tenants' data meet in it."""
    owners = {t for t in tenant_ids if t is not None}
    if not owners:
        return None
    return owners.pop() if len(owners) == 1 else STAFF_ONLY


def visible_tenant_ids(user) -> set[int] | None:
    """The tenants whose rows ``user`` sees: None for all, else the ids (the intersection of the
    providers' answers)."""
    seen: set[int] | None = None
    for provider in _providers:
        ids = provider(user)
        if ids is None:
            continue
        seen = set(ids) if seen is None else seen & set(ids)
    return seen


def scope_rows(qs: QuerySet, user) -> QuerySet:
    """``qs`` narrowed by the row scope registered for its model, for a tenant-scoped ``user``;
    unchanged for fabric-wide staff or a model with no row scope."""
    narrow = _row_scopes.get(qs.model._meta.label)
    if narrow is None:
        return qs
    ids = visible_tenant_ids(user)
    return qs if ids is None else narrow(qs, ids)

"""Receivers of the pools app (imported in ``PoolsConfig.ready()``).

They live apart from ``pools.signals`` (which only declares the app's signals) because the
services they call import the allocation service, which sends those signals.

* ``pools.signals.allocation_changed`` → :func:`pools.services.partitions.sync_pool_members`: the
  pool's partition members follow the hosts it holds GPUs on (an apply is queued when they
  changed).
* ``fabric.signals.discovery_committed`` → the pools' aftermath of a discovery, in one
  transaction: :func:`pools.services.inventory.resolve_lost_rails` (a CA that came back gives
  the GPUs whose rail was lost with it their rail again) and
  :func:`pools.services.partitions.sync_fabric_pools` (a host's CA ports may have changed).
  Each part runs in a savepoint, so a failure of one is logged and rolled back alone.
* ``accounts.signals.directory_groups_applied`` → :func:`pools.services.tenancy.sync_directory_memberships`:
  a directory user's tenant memberships follow their groups (issue 26), inside the sign-in's
  transaction (a failure there refuses the sign-in rather than leave memberships half-applied).

The first two run on commit of the sender's transaction, in their own transaction, and never raise: the
allocation or discovery is already stored; a failure is logged and the next change or
discovery catches up.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.dispatch import receiver

from accounts.signals import directory_groups_applied
from fabric.signals import discovery_committed

from .services.inventory import resolve_lost_rails
from .services.partitions import sync_fabric_pools, sync_pool_members
from .services.tenancy import sync_directory_memberships
from .signals import allocation_changed

log = logging.getLogger(__name__)


@receiver(allocation_changed, dispatch_uid="pools.sync_pool_partition")
def sync_partition_after_allocation(sender, pool_id: int, **kwargs) -> None:
    """Recompute the ``pool`` members of the pool's partition (when it has one: a sender that
    says the pool had none, ``pool_partition_id`` None, is skipped without a query — a PKey given
    to the pool later waited for the allocation's lock on the pool row and read its GPUs)."""
    if "pool_partition_id" in kwargs and kwargs["pool_partition_id"] is None:
        return
    try:
        sync_pool_members(pool_id)
    except Exception:
        log.exception("could not update the partition members of pool %s", pool_id)


@receiver(discovery_committed, dispatch_uid="pools.after_discovery")
def after_discovery(sender, fabric_id: int, **kwargs) -> None:
    """Resolve the GPU rails the topology lost and got back, and recompute the members of every
    pool partition on the fabric (module docstring), in one transaction."""
    try:
        with transaction.atomic():
            for step, what in ((resolve_lost_rails, "resolve the lost GPU rails"),
                               (sync_fabric_pools, "update the pool partitions")):  # fmt: skip
                try:
                    with transaction.atomic():
                        step(fabric_id)
                except Exception:
                    log.exception("could not %s of fabric %s", what, fabric_id)
    except Exception:
        log.exception("could not commit the pools' aftermath of a discovery of fabric %s", fabric_id)


@receiver(directory_groups_applied, dispatch_uid="pools.directory_memberships")
def directory_memberships(sender, user, source: str, tenants: dict, **kwargs) -> None:
    """A directory user's tenant memberships follow their groups (module docstring)."""
    if tenants:
        sync_directory_memberships(user, tenants, source=source)

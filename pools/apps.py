from django.apps import AppConfig


class PoolsConfig(AppConfig):
    """GPU inventory (GPUs, MIG slices, rails), and later pools, tenants and quotas (issue 11)."""

    name = "pools"

    def ready(self) -> None:
        from events import registry

        from .event_types import EVENT_TYPES

        registry.register(self.label, EVENT_TYPES)

        from accounts.scoping import register_row_scope, register_row_tenant, register_tenant_scope

        from .access import narrow_partitions, partition_tenants, scoped_tenant_ids

        register_tenant_scope(scoped_tenant_ids)  # tenant members read their tenants' rows only
        register_row_scope("fabric.Partition", narrow_partitions)
        register_row_tenant("fabric.Partition", partition_tenants)  # a partition.drift event's tenant

        from . import checks, receivers  # noqa: F401  (registers the checks, connects the receivers)

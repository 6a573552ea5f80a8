"""QuerySets of the GPU inventory (attached with ``Manager.from_queryset``)."""

from __future__ import annotations

from django.db import models


class GpuQuerySet(models.QuerySet):
    def present(self) -> GpuQuerySet:
        """GPUs the host's last report listed (``missing_since`` unset)."""
        return self.filter(missing_since__isnull=True)

    def allocatable(self) -> GpuQuerySet:
        """Present, free, not unhealthy whole GPUs with MIG off: what the allocation service may
        hand out whole. Lock them with ``select_for_update()`` in pk order before writing."""
        return (
            self.present()
            .filter(state="free", mig_mode_current__in=["disabled", "unsupported"])
            .exclude(health="unhealthy")
        )

    def with_host(self) -> GpuQuerySet:
        return self.select_related("host", "host__fabric", "rail_node")


class MigSliceQuerySet(models.QuerySet):
    def present(self) -> MigSliceQuerySet:
        """Slices the last report listed, on GPUs it listed (a missing GPU's slices are unknown)."""
        return self.filter(missing_since__isnull=True, gpu__missing_since__isnull=True)

    def allocatable(self) -> MigSliceQuerySet:
        """Present, free slices of present GPUs that are not unhealthy."""
        return self.present().filter(state="free").exclude(gpu__health="unhealthy")

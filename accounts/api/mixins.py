"""Viewset mixins shared by the apps' REST APIs."""

from __future__ import annotations

from typing import Any

from django.db import models, transaction
from rest_framework.exceptions import NotFound

from .. import audit


class AuditedWritesMixin:
    """Create, update and destroy of a model viewset, each in one transaction with its audit entry.

    A change and its ``AuditEntry`` (``accounts.audit.record``) commit together or not at all: an
    audit write that fails rolls the change back and the request fails (NetBox wraps
    ``perform_create``/``perform_update``/``perform_destroy`` in ``transaction.atomic`` the same way
    for its change log). ``on_commit`` work (signals, tasks) runs only after both are stored.

    The actions are ``f"{audit_prefix}.create"`` / ``.update`` / ``.delete``; what an entry's
    ``changes`` hold is chosen by :meth:`audit_create_changes` and :meth:`audit_update_changes`.
    Custom ``@action`` writes call a service that does the same (e.g. ``fabric.services.requests``).
    A row deleted between the request's read and its write (a PATCH racing a DELETE) is a 404.
    """

    #: e.g. ``"fabric"`` for ``fabric.create``, ``fabric.update``, ``fabric.delete``.
    audit_prefix: str = ""

    def audit_create_changes(self, serializer, instance: models.Model) -> dict[str, Any]:
        """``changes`` of a create entry: the validated fields (JSON-serialisable ones)."""
        return dict(serializer.validated_data)

    def audit_update_changes(self, serializer, before: models.Model, after: models.Model) -> dict[str, Any]:
        """``changes`` of an update entry: ``{field: [old, new]}`` of the fields sent that changed."""
        return audit.model_changes(before, after, list(serializer.validated_data))

    def perform_create(self, serializer) -> None:
        with transaction.atomic():
            instance = serializer.save()
            audit.record(
                f"{self.audit_prefix}.create", instance, self.audit_create_changes(serializer, instance)
            )

    def perform_update(self, serializer) -> None:
        with transaction.atomic():
            model = type(serializer.instance)
            before = model._default_manager.select_for_update().filter(pk=serializer.instance.pk).first()
            if before is None:  # deleted since the request read it (a PATCH racing a DELETE)
                raise NotFound(f"{model._meta.verbose_name} {serializer.instance.pk} no longer exists")
            instance = serializer.save()
            audit.record(
                f"{self.audit_prefix}.update",
                instance,
                self.audit_update_changes(serializer, before, instance),
            )

    def perform_destroy(self, instance: models.Model) -> None:
        with transaction.atomic():
            model = type(instance)
            if not model._default_manager.select_for_update().filter(pk=instance.pk).exists():
                raise NotFound(f"{model._meta.verbose_name} {instance.pk} no longer exists")
            audit.record(f"{self.audit_prefix}.delete", instance)
            instance.delete()

"""Audit log of who changed what, and the API tokens of users.

The audit log is append-only for everyone: an entry is written once by ``accounts.audit.record`` (or ``record_many``, in bulk)
and never changed or deleted through the ORM (``save`` of an existing row, ``delete``, and the
queryset's ``update``/``delete``/``bulk_update`` raise :class:`AuditLogIsAppendOnly`), the Django
admin (view only) or the API (read-only). On PostgreSQL a trigger refuses the same at the
database (migration ``0002``). The one write allowed after creation is the database's own
``ON DELETE SET NULL`` of ``user`` when a user is deleted; ``username`` keeps the name.
"""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.db import models
from django.utils import timezone

from core.validators import printable_text


class AuditLogIsAppendOnly(Exception):
    """Raised on any attempt to change or delete an :class:`AuditEntry` through the ORM."""


class AuditEntryQuerySet(models.QuerySet):
    """Queries of the audit log; the bulk writes that would change or remove entries raise.

    It is also the base manager's queryset (``Meta.base_manager_name``), the one Django's deletion
    collector uses, so no ORM path deletes entries. The collector's one update, ``user=None`` when a
    user is deleted (``on_delete=SET_NULL``), is let through.
    """

    def update(self, **kwargs):
        if kwargs.keys() == {"user"} and kwargs["user"] is None:
            return super().update(**kwargs)
        raise AuditLogIsAppendOnly("audit entries cannot be changed")

    def delete(self):
        raise AuditLogIsAppendOnly("audit entries cannot be deleted")

    def _raw_delete(self, using):  # the collector's fast path for cascades
        raise AuditLogIsAppendOnly("audit entries cannot be deleted")

    def bulk_update(self, objs, fields, batch_size=None):
        raise AuditLogIsAppendOnly("audit entries cannot be changed")


class AuditEntry(models.Model):
    """One change made by a user (or by the system when ``user`` is null).

    ``changes`` is a JSON object ``{field: [old, new]}`` or free-form details of an action
    (``{"fabric": "lab", "reset_counters": true}``). Append-only (see the module docstring).
    """

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    username = models.CharField(max_length=150, blank=True, help_text="Kept when the user is deleted.")
    action = models.CharField(max_length=64, db_index=True)
    object_type = models.CharField(max_length=100, blank=True)
    object_id = models.CharField(max_length=64, blank=True)
    object_repr = models.CharField(max_length=300, blank=True)
    changes = models.JSONField(default=dict, blank=True)
    remote_addr = models.GenericIPAddressField(null=True, blank=True)

    objects = AuditEntryQuerySet.as_manager()

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name_plural = "audit entries"
        base_manager_name = "objects"

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.username or 'system'} {self.action} {self.object_repr}"

    def save(self, *args, **kwargs) -> None:
        """Insert a new entry.

        Raises:
            AuditLogIsAppendOnly: the entry is already stored (an update).
        """
        if not self._state.adding:
            raise AuditLogIsAppendOnly("audit entries cannot be changed")
        kwargs["force_insert"] = True
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        """Raises:
        AuditLogIsAppendOnly: always.
        """
        raise AuditLogIsAppendOnly("audit entries cannot be deleted")


def hash_token_key(key: str) -> str:
    """Return the SHA-256 hex digest under which a token key is stored (keys are 160 random bits,
    so a fast hash is enough: there is nothing to guess)."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


class ApiTokenQuerySet(models.QuerySet):
    def live(self, now=None):
        """Tokens that have not expired at ``now`` (default: now)."""
        now = now or timezone.now()
        return self.filter(models.Q(expires_at__isnull=True) | models.Q(expires_at__gt=now))


class ApiToken(models.Model):
    """An API token of one user (``Authorization: Token <key>``), created by
    ``accounts.tokens.create_token``.

    Only the SHA-256 of the key is stored (``key_hash``); ``prefix`` (the key's first 8
    characters) tells tokens apart in lists. ``expires_at`` is null for a token that does not
    expire (``WEFT_TOKEN_TTL_DAYS`` = 0). A user has any number of tokens; they are deleted
    (revoked) by their owner or an Admin, and all at once when the user's password changes.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(
        max_length=100, blank=True, validators=[printable_text], help_text="What the token is for."
    )
    prefix = models.CharField(max_length=8, db_index=True)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-id"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name or 'token'})"

    @property
    def expired(self) -> bool:
        """True when ``expires_at`` has passed."""
        return self.expires_at is not None and self.expires_at <= timezone.now()


class DirectorySource(models.TextChoices):
    """Where a directory user signs in (issue 26)."""

    LDAP = "ldap", "LDAP / Active Directory"
    OIDC = "oidc", "OpenID Connect"


class DirectoryAccount(models.Model):
    """Marks a user whose identity and role come from the site's directory (``accounts.directory``).

    Written at each of their sign-ins by :func:`accounts.directory.apply_groups` only. A user
    without this row is a local account: the directory backends never sign it in or change it
    (break-glass accounts keep their Weft password). ``subject``: the LDAP DN or the OIDC ``sub``;
    ``groups``: the mapped groups the last sign-in found; ``suspended``: Weft deactivated the user
    because the directory gave them none of Weft's groups (the next sign-in in a group activates
    them again; a user an Admin deactivated stays so)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="directory_account"
    )
    source = models.CharField(max_length=8, choices=DirectorySource.choices)
    subject = models.CharField(max_length=500)
    groups = models.JSONField(default=list, blank=True)
    synced = models.DateTimeField(default=timezone.now)
    suspended = models.BooleanField(default=False)

    def __str__(self) -> str:
        return f"{self.user} ({self.source}: {self.subject})"

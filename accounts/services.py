"""Account changes with their guards and audit entries: the one path of the users API
(``accounts.api.views``) and the users pages (``accounts.views``).

Each function takes a validated :class:`accounts.api.serializers.UserSerializer` (or a token) and
the acting user, checks ``accounts.guards`` (a refusal is audited as ``user.change_refused`` /
``user.token.revoke_refused`` and raised as ``PermissionDenied``), then writes in one
transaction with its audit entry. The re-check under the Admins' lock (an actor whose Admin role
another Admin withdrew meanwhile: the guard that keeps the site from losing its last Admin) is
audited the same way, after its transaction rolled back, so the entry stays.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Q

from . import audit
from .guards import check_token_revocation, check_user_change
from .models import ApiToken
from .roles import Role, role_of
from .tokens import IssuedToken, create_token, revoke_token


def _record_refusal(actor, target, fields, delete: bool, exc: PermissionDenied) -> None:
    """The ``user.change_refused`` entry of a refused change of ``target`` by ``actor``
    (``{"fields": [...], "delete": bool, "reason": str}``), written in its own transaction."""
    audit.record(
        "user.change_refused",
        target,
        {"fields": sorted(fields), "delete": delete, "reason": str(exc)},
        user=actor,
    )


def guard_user_change(actor, target, fields=(), *, delete: bool = False) -> None:
    """``accounts.guards.check_user_change``, auditing a refusal (``user.change_refused``) before
    raising it: the attempt stays in the log even though nothing changed.

    Raises:
        PermissionDenied: as ``check_user_change``.
    """
    try:
        check_user_change(actor, target, fields, delete=delete)
    except PermissionDenied as exc:
        _record_refusal(actor, target, fields, delete, exc)
        raise


def changed_fields(serializer) -> set[str]:
    """Names of the fields whose value a validated update changes (a password always does)."""
    user = serializer.instance
    changed = set()
    for name, value in serializer.validated_data.items():
        if name == "password":
            changed.add(name)
        elif name == "role":
            if Role.parse(value) != role_of(user):
                changed.add(name)
        elif getattr(user, name) != value:
            changed.add(name)
    return changed


def _lock_admins_and_recheck(actor) -> None:
    """Inside the caller's transaction: lock the rows of every active Admin (pk order) and re-read
    ``actor``'s role under the lock. Two Admins demoting or deactivating each other at once were
    both allowed (each was an Admin when the page checked) and left the site without one; now the
    second waits for the first and is refused.

    Raises:
        PermissionDenied: ``actor`` is no longer an active Admin.
    """
    users = get_user_model()
    admins = users.objects.filter(is_active=True).filter(
        Q(is_superuser=True) | Q(groups__name=Role.ADMIN.group_name)
    )
    list(
        users.objects.filter(pk__in=admins.values("pk")).order_by("pk").select_for_update().values_list("pk")
    )
    if role_of(users.objects.get(pk=actor.pk)) < Role.ADMIN:
        raise PermissionDenied("Your admin role was withdrawn meanwhile: nothing changed.")


def create_user(serializer):
    """Save a validated new-user serializer; audited ``user.create`` with its role. Returns the user."""
    with transaction.atomic():
        user = serializer.save()
        audit.record("user.create", user, {"role": serializer.validated_data.get("role", "viewer")})
    return user


def update_user(actor, serializer):
    """Save a validated user update by ``actor``, guarded; audited ``user.update`` (a new
    password as ``"changed"``). Returns the user.

    Raises:
        PermissionDenied: ``accounts.guards`` refuses (a superuser by a non-superuser; one's own
            role or active flag), or ``actor`` lost the Admin role meanwhile (re-read under a
            lock of the Admins' rows: two Admins demoting each other cannot leave none). Every
            refusal is audited as ``user.change_refused`` (fields, reason, the actor).
    """
    fields = changed_fields(serializer)
    guard_user_change(actor, serializer.instance, fields)
    try:
        with transaction.atomic():
            _lock_admins_and_recheck(actor)
            user = serializer.save()
            changes = {k: v for k, v in serializer.validated_data.items() if k != "password"}
            if "password" in serializer.validated_data:
                changes["password"] = "changed"
            audit.record("user.update", user, changes)
    except PermissionDenied as exc:  # rolled back: the refusal is written after, so it stays
        _record_refusal(actor, serializer.instance, fields, False, exc)
        raise
    return user


def delete_user(actor, user) -> None:
    """Delete ``user``, guarded; audited ``user.delete``.

    Raises:
        PermissionDenied: as :func:`guard_user_change` with ``delete``, or ``actor`` lost the
            Admin role meanwhile (audited ``user.change_refused`` too).
    """
    guard_user_change(actor, user, delete=True)
    try:
        with transaction.atomic():
            _lock_admins_and_recheck(actor)
            audit.record("user.delete", user)
            user.delete()
    except PermissionDenied as exc:  # rolled back: the refusal is written after, so it stays
        _record_refusal(actor, user, (), True, exc)
        raise


def revoke_token_by(actor, token: ApiToken) -> None:
    """Revoke ``token`` for ``actor`` (its owner or an Admin: the caller checks the role).

    Raises:
        PermissionDenied: a superuser's token and ``actor`` is another user who is not one
            (audited ``user.token.revoke_refused``).
    """
    try:
        check_token_revocation(actor, token.user)
    except PermissionDenied as exc:
        audit.record("user.token.revoke_refused", token.user, {"token": token.pk, "reason": str(exc)})
        raise
    own = token.user_id == actor.pk
    revoke_token(token, reason="revoked by its owner" if own else "revoked by an admin")


def issue_token_for(actor, owner, name: str = "") -> IssuedToken:
    """Issue a token for ``owner`` on ``actor``'s request (the users page: an Admin for an
    integration account); the same rule as revoking: only a superuser acts on a superuser's.

    Raises:
        PermissionDenied: ``owner`` is a superuser and ``actor`` another user who is not.
    """
    check_token_revocation(actor, owner)
    return create_token(owner, name, reason="users page" if owner.pk != actor.pk else "ui", actor=actor)

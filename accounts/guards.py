"""Who may change which account (the API's user endpoints, token revocation, the Django admin).

* Only a superuser changes, deactivates, deletes, or revokes the tokens of a superuser: a Weft
  Admin who is not one could otherwise set a superuser's password and sign in as them.
* Nobody changes their own role or active flag, or deletes themselves, through the API: an Admin
  cannot lock themselves (or the site) out, nor undo a demotion another Admin made. Their own
  name, e-mail and password they may change.

The rules raise ``django.core.exceptions.PermissionDenied``, which DRF answers with 403.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.core.exceptions import PermissionDenied

#: Fields of a user one may not change on oneself, and how a refusal names them.
SELF_PROTECTED_FIELDS = {"role": "role", "is_active": "active flag"}


def check_user_change(actor, target, fields: Iterable[str] = (), *, delete: bool = False) -> None:
    """Allow ``actor`` to change ``fields`` of ``target`` (or delete it), or raise.

    Args:
        actor: the requesting user.
        target: the user to change.
        fields: the names of the fields that would change (those whose value differs).
        delete: the change is a deletion.

    Raises:
        PermissionDenied: ``target`` is a superuser and ``actor`` is not, or ``actor`` is
            ``target`` and deletes itself or changes its role or active flag.
    """
    fields = set(fields)
    if target.is_superuser and not actor.is_superuser:
        raise PermissionDenied("Only a superuser can change or delete a superuser.")
    if actor.pk == target.pk:
        if delete:
            raise PermissionDenied("You cannot delete your own account.")
        protected = sorted(SELF_PROTECTED_FIELDS[f] for f in fields if f in SELF_PROTECTED_FIELDS)
        if protected:
            raise PermissionDenied(f"You cannot change your own {' and '.join(protected)}.")


def check_token_revocation(actor, owner) -> None:
    """Allow ``actor`` to revoke a token of ``owner`` (role checks are the caller's), or raise.

    Raises:
        PermissionDenied: ``owner`` is a superuser and ``actor`` is another user who is not.
    """
    if owner.pk != actor.pk and owner.is_superuser and not actor.is_superuser:
        raise PermissionDenied("Only a superuser can revoke a superuser's tokens.")

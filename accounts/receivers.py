"""Create the role groups after migrations; audit sign-ins, failed sign-ins and lock-outs;
revoke a user's API tokens when their password changes or when they are deactivated; tell the
sign-in page and the log (one line) when the LDAP directory fails (``accounts.ldap_auth``)."""

from __future__ import annotations

import logging

from axes.signals import user_locked_out
from django.conf import settings
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.db.models.signals import post_migrate, post_save, pre_save
from django.dispatch import receiver
from django_auth_ldap.backend import ldap_error

log = logging.getLogger("weft.auth")


@receiver(post_migrate)
def create_role_groups(sender, **kwargs) -> None:
    if getattr(sender, "name", "") != "accounts":
        return
    from .roles import ensure_groups

    ensure_groups()


def _remote_addr(request) -> str | None:
    return request.META.get("REMOTE_ADDR") if request is not None else None


@receiver(user_logged_in)
def audit_login(sender, request, user, **kwargs) -> None:
    from .audit import record

    record("user.login", user, user=user, remote_addr=_remote_addr(request))


@receiver(user_login_failed)
def audit_login_failure(sender, credentials, request=None, **kwargs) -> None:
    """Log and audit a failed sign-in (``user.login_failed``): the user name tried, the client
    address, where (the path) and when (the entry's time). No password is recorded."""
    from django.contrib.auth import get_user_model

    from .audit import record
    from .login_throttle import recorded_username

    username = recorded_username(credentials.get("username"))
    address = _remote_addr(request)
    path = getattr(request, "path", "")
    log.warning("failed sign-in for user name %r from %s at %s", username, address or "?", path or "?")
    target = get_user_model().objects.filter(username=username).first() if username else None
    record(
        "user.login_failed",
        target,
        {"username": username, "path": path},
        username=username,
        remote_addr=address,
        object_repr=username,
    )


@receiver(user_locked_out)
def audit_lockout(sender, request=None, username=None, ip_address=None, **kwargs) -> None:
    """Log and audit a sign-in refused or stopped by the lock-out (``user.lockout``)."""
    from .audit import record

    log.warning(
        "sign-in locked out: user name %r from %s (limit %s failures, %s min)",
        username,
        ip_address,
        settings.WEFT_LOGIN_FAILURE_LIMIT,
        settings.WEFT_LOGIN_COOLOFF_MIN,
    )
    record(
        "user.lockout",
        None,
        {"username": username or "", "path": getattr(request, "path", "")},
        username=username or "",
        remote_addr=ip_address or _remote_addr(request),
        object_repr=username or "",
    )


@receiver(post_save, sender=settings.AUTH_USER_MODEL)
def revoke_tokens_on_password_change(sender, instance, created, raw=False, **kwargs) -> None:
    """Revoke every API token of a user whose password was just set.

    ``AbstractBaseUser.set_password`` keeps the new raw password in ``_password`` until the
    following ``save()`` has run (this signal runs inside it): that is Django's own "password
    changed" mark (``password_validation.password_changed`` is called on it), set by every path
    that changes a password (the API, the admin's form, ``changepassword``, ``set_role
    --password``) and *not* by the hash upgrade on sign-in, which clears it before saving. The
    sessions need nothing: Django ends them itself (the session hash includes the password).
    """
    if created or raw or getattr(instance, "_password", None) is None:
        return
    from .tokens import revoke_user_tokens

    revoke_user_tokens(instance, reason="password changed")


@receiver(pre_save, sender=settings.AUTH_USER_MODEL)
def note_deactivation(sender, instance, raw=False, update_fields=None, **kwargs) -> None:
    """Mark a save that deactivates a user (stored active, saved inactive) for
    :func:`revoke_tokens_on_deactivation`. One query, only when the instance is inactive and
    ``is_active`` is saved."""
    instance._weft_deactivated = False
    if raw or instance.pk is None or instance.is_active:
        return
    if update_fields is not None and "is_active" not in update_fields:
        return
    instance._weft_deactivated = sender.objects.filter(pk=instance.pk, is_active=True).exists()


@receiver(post_save, sender=settings.AUTH_USER_MODEL)
def revoke_tokens_on_deactivation(sender, instance, created, raw=False, **kwargs) -> None:
    """Revoke every API token of a user who was just deactivated (issue 22), in the save's
    transaction, audited ``user.token.revoke`` (reason ``user deactivated``): an inactive user's
    tokens are refused anyway (``accounts.tokens.check_key``), but reactivating the account must
    not bring them back. Every path that saves the user (the users API and page, the admin, the
    shell) goes through here; a queryset ``update()`` does not."""
    if created or raw or not getattr(instance, "_weft_deactivated", False):
        return
    instance._weft_deactivated = False
    from .tokens import revoke_user_tokens

    revoke_user_tokens(instance, reason="user deactivated")


@receiver(ldap_error)
def directory_error(sender, context, user=None, request=None, exception=None, **kwargs) -> None:
    """django-auth-ldap caught an LDAP error (the directory down, a refused service bind): one
    WARNING line and a message for the sign-in page; the sign-in goes on to the next backend."""
    from .ldap_auth import note_ldap_error

    note_ldap_error(request, exception, context)

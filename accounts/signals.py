"""Create the role groups after migrations, and audit logins."""

from __future__ import annotations

from django.contrib.auth.signals import user_logged_in
from django.db.models.signals import post_migrate
from django.dispatch import receiver


@receiver(post_migrate)
def create_role_groups(sender, **kwargs) -> None:
    if getattr(sender, "name", "") != "accounts":
        return
    from .roles import ensure_groups

    ensure_groups()


@receiver(user_logged_in)
def audit_login(sender, request, user, **kwargs) -> None:
    from .audit import record

    record("user.login", user, user=user, remote_addr=request.META.get("REMOTE_ADDR") if request else None)

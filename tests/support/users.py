"""The test users: one active user per role (the root conftest's ``users`` fixture, and the rows a
test module builds once, :mod:`tests.support.module_rows`)."""

from __future__ import annotations

#: The users of ``users``: username per role (password ``pw-<username>``, mail ``<username>@example.org``).
USERNAMES = {"viewer": "vic", "operator": "olga", "admin": "ada"}


def create_role_users() -> dict:
    """Create :data:`USERNAMES` in the database; returns ``{"viewer": vic, "operator": olga,
    "admin": ada}`` (each user's role set with ``accounts.roles.set_role``)."""
    from django.contrib.auth import get_user_model

    from accounts.roles import set_role

    out = {}
    for role, name in USERNAMES.items():
        user = get_user_model().objects.create_user(name, email=f"{name}@example.org", password="pw-" + name)
        set_role(user, role)
        out[role] = user
    return out

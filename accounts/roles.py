"""Roles: Viewer (read), Operator (acknowledge alarms, run discovery, manage jobs), Admin
(configuration, pools, users).

Roles are Django groups named after :class:`Role`; they are ordered, so an Admin can do all an
Operator can, and an Operator all a Viewer can. Superusers are Admins. Every authenticated user
is at least a Viewer.
"""

from __future__ import annotations

from enum import IntEnum

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, Group


class Role(IntEnum):
    """Ordered roles; compare with ``>=``."""

    NONE = 0
    VIEWER = 1
    OPERATOR = 2
    ADMIN = 3

    @property
    def group_name(self) -> str:
        return self.name.capitalize()

    @classmethod
    def parse(cls, value: str | Role) -> Role:
        """Return the role for ``"viewer"``/``"Operator"``/``Role.ADMIN``.

        Raises:
            ValueError: an unknown role name.
        """
        if isinstance(value, Role):
            return value
        try:
            return cls[value.strip().upper()]
        except KeyError as exc:
            raise ValueError(f"unknown role {value!r}: use viewer, operator or admin") from exc


ROLE_GROUPS = [Role.VIEWER, Role.OPERATOR, Role.ADMIN]


def ensure_groups() -> None:
    """Create the role groups if they are missing."""
    for role in ROLE_GROUPS:
        Group.objects.get_or_create(name=role.group_name)


def role_of(user: AbstractBaseUser | AnonymousUser | None) -> Role:
    """Return the highest role of ``user`` (``Role.NONE`` for anonymous or inactive users)."""
    if user is None or not user.is_authenticated or not user.is_active:
        return Role.NONE
    if user.is_superuser:
        return Role.ADMIN
    cached = getattr(user, "_weft_role", None)
    if cached is not None:
        return cached
    names = set(user.groups.values_list("name", flat=True))
    role = Role.VIEWER
    for candidate in ROLE_GROUPS:
        if candidate.group_name in names:
            role = max(role, candidate)
    user._weft_role = role
    return role


def has_role(user, required: Role | str) -> bool:
    """True when ``user``'s role is at least ``required``."""
    return role_of(user) >= Role.parse(required)


def set_role(user, role: Role | str) -> None:
    """Make ``user`` a member of exactly the group of ``role``."""
    role = Role.parse(role)
    ensure_groups()
    user.groups.remove(*Group.objects.filter(name__in=[r.group_name for r in ROLE_GROUPS]))
    if role is not Role.NONE:
        user.groups.add(Group.objects.get(name=role.group_name))
    if hasattr(user, "_weft_role"):
        del user._weft_role

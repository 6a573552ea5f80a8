"""Sign-in through the site's directory (issue 26): what a directory's groups give a user in Weft.

Two sources sign users in: LDAP / Active Directory (``accounts.ldap_auth``, django-auth-ldap) and
OpenID Connect (``accounts.oidc_auth``, mozilla-django-oidc). Both hand the groups they found to
:func:`apply_groups`, which makes Weft follow the directory at every sign-in:

* the role is the highest of the roles whose groups the user is in (``WEFT_LDAP_ROLE_GROUPS``,
  ``WEFT_OIDC_ROLE_GROUPS``); removed from a group, the user loses its role at the next sign-in;
* in none of them, the sign-in is refused and the user is deactivated (``suspended``: their
  sessions and API tokens end, as for any deactivation); back in a group, the next sign-in
  activates them again. A user an Admin deactivated in Weft stays deactivated;
* tenant memberships follow ``WEFT_*_TENANT_GROUPS`` for the tenants named there (others are
  left as an Admin set them; ``pools.receivers``).

A user without a :class:`~accounts.models.DirectoryAccount` is local: the directory never signs it
in nor changes it, so a break-glass Admin keeps signing in with its Weft password
(``ModelBackend`` runs after the directory backends), also while the directory is down.

:class:`GroupMapping` is pure (no database); a refusal is told to the sign-in page through
:func:`note_problem`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from . import audit
from .models import DirectoryAccount
from .roles import ROLE_GROUPS, Role, set_role
from .signals import directory_groups_applied

log = logging.getLogger("weft.auth")

TENANT_ROLES = ("viewer", "operator")
#: ``tenant`` or ``tenant:viewer`` / ``tenant:operator`` (the keys of ``WEFT_*_TENANT_GROUPS``)
TENANT_KEY = r"[^:\s][^:]{0,63}(:(viewer|operator))?"


def normalize_dn(dn: str) -> str:
    """An LDAP DN compared case- and space-insensitively: ``CN=Weft Admins, OU=Groups`` →
    ``cn=weft admins,ou=groups`` (attribute types and most directory values compare without case,
    RFC 4517 distinguishedNameMatch; spaces around ``,`` and ``=`` are not part of a value)."""
    return re.sub(r"\s*([,=+])\s*", r"\1", dn.strip()).lower()


@dataclass(frozen=True)
class GroupMapping:
    """Directory groups → a Weft role and tenant memberships.

    ``roles``: ``((role, group), ...)`` with role ``viewer``/``operator``/``admin``;
    ``tenants``: ``((tenant name, tenant role, group), ...)``; ``dn``: groups are LDAP DNs
    (compared with :func:`normalize_dn`), else OIDC claim values (compared exactly).
    """

    roles: tuple[tuple[str, str], ...] = ()
    tenants: tuple[tuple[str, str, str], ...] = ()
    dn: bool = False

    @classmethod
    def from_pairs(cls, role_pairs, tenant_pairs, *, dn: bool) -> GroupMapping:
        """From the settings' ``(key, group)`` pairs (``weft.env.env_pairs``): tenant keys are
        ``name`` (a viewer) or ``name:operator``."""
        tenants = []
        for key, group in tenant_pairs:
            name, _, tenant_role = key.partition(":")
            tenants.append((name.strip(), tenant_role or "viewer", group))
        return cls(roles=tuple(role_pairs), tenants=tuple(tenants), dn=dn)

    def _key(self, group: str) -> str:
        return normalize_dn(group) if self.dn else group

    def matched(self, groups: Iterable[str]) -> list[str]:
        """The groups of ``groups`` this mapping names (as configured, sorted)."""
        have = {self._key(g) for g in groups}
        named = {g for _, g in self.roles} | {g for _, _, g in self.tenants}
        return sorted(g for g in named if self._key(g) in have)

    def role_for(self, groups: Iterable[str]) -> Role:
        """The highest role whose group is in ``groups``; ``Role.NONE`` when none is."""
        have = {self._key(g) for g in groups}
        best = Role.NONE
        for name, group in self.roles:
            if self._key(group) in have:
                best = max(best, Role.parse(name))
        return best

    def tenants_for(self, groups: Iterable[str]) -> dict[str, str | None]:
        """``{tenant: "viewer" | "operator" | None}`` for every tenant the mapping names: the
        highest tenant role its groups in ``groups`` give, ``None`` when in none."""
        have = {self._key(g) for g in groups}
        out: dict[str, str | None] = {}
        for tenant, tenant_role, group in self.tenants:
            current = out.setdefault(tenant, None)
            if self._key(group) in have and (
                current is None or TENANT_ROLES.index(tenant_role) > TENANT_ROLES.index(current)
            ):
                out[tenant] = tenant_role
        return out


#: a directory sign-in whose user name two Weft accounts have in different case
AMBIGUOUS = (
    "Several Weft accounts have this user name in other upper and lower case, so the directory "
    "cannot sign it in: ask a Weft administrator."
)
NO_GROUP = "Your directory account is in none of the groups that give a role in Weft: ask your administrator."


class DirectorySignInRefused(Exception):
    """The directory authenticated the user but Weft refuses the sign-in (the message says why,
    for the sign-in page)."""


def note_problem(request, message: str) -> None:
    """Tell the sign-in page why a directory sign-in did not happen (``request`` may be None)."""
    if request is not None:
        problems = request.__dict__.setdefault("_weft_sign_in_problems", [])
        if message not in problems:
            problems.append(message)


def problems_of(request) -> list[str]:
    """What :func:`note_problem` noted on ``request``."""
    return list(getattr(request, "_weft_sign_in_problems", []))


def directory_account(user) -> DirectoryAccount | None:
    """The user's :class:`DirectoryAccount`, or None for a local account (or an unsaved user)."""
    if user.pk is None:
        return None
    return DirectoryAccount.objects.filter(user=user).first()


def is_local(user) -> bool:
    """True for a stored user the directory must not sign in: one without a DirectoryAccount."""
    return user.pk is not None and directory_account(user) is None


def _stored_role(user) -> Role:
    """The highest role group ``user`` is in (``Role.NONE``: none), whatever their activity."""
    names = set(user.groups.values_list("name", flat=True))
    return max((r for r in ROLE_GROUPS if r.group_name in names), default=Role.NONE)


def apply_groups(user, *, source: str, subject: str, groups: Iterable[str], mapping: GroupMapping) -> Role:
    """Make ``user`` (saved) follow the directory's ``groups`` at a sign-in through ``source``
    (``"ldap"``/``"oidc"``), in one transaction: the role (:func:`accounts.roles.set_role`), the
    tenants (``directory_groups_applied``), the activity (module docstring) and the
    :class:`DirectoryAccount`; audited ``user.directory_sync`` when the role or activity changes
    or the account is new.

    Returns the role given. Raises:
        DirectorySignInRefused: the groups give no role (the user is left with none, no tenant,
            and suspended), or an Admin deactivated the user in Weft (nothing is changed).
    """
    groups = list(groups)
    role = mapping.role_for(groups)
    with transaction.atomic():
        account, created = DirectoryAccount.objects.select_for_update().get_or_create(
            user=user, defaults={"source": source, "subject": subject[:500]}
        )
        before = (_stored_role(user), user.is_active)
        if not user.is_active and not account.suspended and not created:
            raise DirectorySignInRefused("This account is deactivated in Weft: ask a Weft administrator.")
        if role is Role.NONE and user.is_active:
            account.suspended = True
        elif role is not Role.NONE and account.suspended:
            account.suspended = False
        user.is_active = role is not Role.NONE
        user.save(update_fields=["is_active"])
        set_role(user, role)
        tenants = mapping.tenants_for(groups if role else ())
        directory_groups_applied.send(sender=source, user=user, source=source, tenants=tenants)
        account.source, account.subject = source, subject[:500]
        account.groups = mapping.matched(groups)[:200]
        account.synced = timezone.now()
        account.save()
        after = (role, user.is_active)
        if before != after or created:
            audit.record(
                "user.directory_sync",
                user,
                {
                    "source": source,
                    "role": [before[0].name.lower(), role.name.lower()],
                    "active": [before[1], user.is_active],
                    "groups": account.groups,
                },
                user=user,
            )
    if role is Role.NONE:
        log.warning(
            "directory sign-in of %r through %s refused: in none of Weft's groups",
            user.get_username(),
            source,
        )
        raise DirectorySignInRefused(NO_GROUP)
    return role

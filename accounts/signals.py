"""Signals of the accounts app (declarations only; receivers live in each app's ``receivers.py``)."""

from django.dispatch import Signal

#: A directory user's groups were applied at their sign-in (``accounts.directory.apply_groups``),
#: inside its transaction. Arguments: ``user``; ``source`` (``"ldap"``/``"oidc"``); ``tenants``,
#: ``{tenant name: "viewer" | "operator" | None}`` for every tenant the source's mapping names
#: (``None``: the user is in none of that tenant's groups and is no member). The pools app keeps
#: tenant memberships to it (``pools.receivers``).
directory_groups_applied = Signal()

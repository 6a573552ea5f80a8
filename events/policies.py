"""Event policies: a registered type's defaults (``events.registry``) overridden by the admin's
``EventPolicy`` row, and the recipients of its mail."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Q

from accounts.roles import Role

from . import registry
from .models import EventPolicy


@dataclass
class Policy:
    """An event type's effective policy: the registered default overridden by its ``EventPolicy``."""

    code: str
    name: str
    category: str
    severity: str
    enabled: bool
    raise_alarm: bool
    email: bool
    notify_clear: bool
    digest: bool
    ttl_s: int
    threshold: float | None
    consecutive: int
    clears: tuple[str, ...]
    clear_scope: str
    recipients: list[str] = field(default_factory=list)
    clear_consecutive: int = 1
    clear_factor: float = 1.0


def default_recipients() -> list[str]:
    """The recipients of alarm mail for a policy without its own: ``settings.WEFT_ALERT_EMAILS``
    when set, else the e-mail addresses of the active Admins (superusers and members of the
    Admin role group, ``accounts.roles``), sorted, without duplicates or empty addresses. Read
    from the database at each call, so an Admin added or given an address gets the next mail."""
    if settings.WEFT_ALERT_EMAILS:
        return list(settings.WEFT_ALERT_EMAILS)
    admins = (
        get_user_model()
        .objects.filter(is_active=True)
        .filter(Q(is_superuser=True) | Q(groups__name=Role.ADMIN.group_name))
        .exclude(email="")
        .values_list("email", flat=True)
    )
    return sorted(set(admins), key=str.lower)


def load_policies() -> dict[str, Policy]:
    """Return ``{code: Policy}`` for every registered code and every stored policy row."""
    rows = {
        p.code: p
        for p in EventPolicy.objects.prefetch_related("recipient_users", "recipient_groups__user_set")
    }
    fallback = default_recipients()
    out: dict[str, Policy] = {}
    for code in {t.code for t in registry.all_types()} | set(rows):
        t = registry.get(code)
        row = rows.get(code)
        policy = Policy(
            code=code,
            name=t.name,
            category=t.category,
            severity=t.severity,
            enabled=True,
            raise_alarm=t.raise_alarm,
            email=t.email,
            notify_clear=t.notify_clear,
            digest=False,
            ttl_s=t.ttl_s,
            threshold=t.threshold,
            consecutive=t.consecutive,
            clears=t.clears,
            clear_scope=t.clear_scope,
            recipients=list(fallback),
            clear_consecutive=t.clear_consecutive,
            clear_factor=t.clear_factor,
        )
        if row is not None:
            policy.severity = row.severity
            policy.enabled = row.enabled
            policy.raise_alarm = row.raise_alarm
            policy.email = row.email
            policy.notify_clear = row.notify_clear
            policy.digest = row.digest
            policy.ttl_s = row.ttl_s
            policy.threshold = row.threshold
            policy.consecutive = max(1, row.consecutive)
            policy.clear_consecutive = max(1, row.clear_consecutive)
            policy.clear_factor = row.clear_factor
            policy.recipients = policy_recipients(row) or list(fallback)
        out[code] = policy
    return out


def policy_recipients(row: EventPolicy) -> list[str]:
    """Addresses of a policy: its explicit addresses, its users' and its groups' members' emails
    (active users with an address only), deduplicated case-insensitively, in that order."""
    seen: dict[str, str] = {}
    raw = row.recipient_emails.replace(";", ",").replace("\n", ",")
    candidates = [a.strip() for a in raw.split(",")]
    candidates += [u.email for u in row.recipient_users.all() if u.is_active]
    for group in row.recipient_groups.all():
        candidates += [u.email for u in group.user_set.all() if u.is_active]
    for address in candidates:
        if address and "@" in address:
            seen.setdefault(address.lower(), address)
    return list(seen.values())


def ensure_policies() -> int:
    """Create the missing ``EventPolicy`` rows from the registered defaults; returns how many.

    Runs after ``migrate`` (``events.receivers``), never inside a GET handler."""
    existing = set(EventPolicy.objects.values_list("code", flat=True))
    rows = [
        EventPolicy(
            code=t.code,
            severity=t.severity,
            threshold=t.threshold,
            consecutive=t.consecutive,
            clear_consecutive=t.clear_consecutive,
            clear_factor=t.clear_factor,
            ttl_s=t.ttl_s,
            raise_alarm=t.raise_alarm,
            email=t.email,
            notify_clear=t.notify_clear,
        )
        for t in registry.all_types()
        if t.code not in existing
    ]
    EventPolicy.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


def policy_for(code: str, policies: dict[str, Policy] | None = None) -> Policy:
    """The effective policy of ``code``: from ``policies`` (a :func:`load_policies` result) when
    given, else loaded; an unregistered code without a row gets an enabled, event-only policy
    with the :func:`events.registry.get` defaults."""
    found = (policies if policies is not None else load_policies()).get(code)
    if found is not None:
        return found
    t = registry.get(code)
    return Policy(code, t.name, t.category, t.severity, True, False, False, False, False, 0,
                  None, 1, (), "key")  # fmt: skip

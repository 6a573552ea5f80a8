"""System checks of the events app (registered in ``EventsConfig.ready()``).

``events.W001`` (tag ``deploy``: ``manage.py check --deploy``, the README's production block):
alarm mail would go to nobody. A policy without its own recipients mails
``events.policies.default_recipients()``: ``WEFT_ALERT_EMAILS``, else the active Admins' e-mail
addresses. The warning is given when ``WEFT_ALERT_EMAILS`` is empty and no active Admin has an
address (read from the database; before the first ``migrate`` there are no users to read, and
the README's next lines create the first Admin with ``--email``, so nothing is said then), or when
the mail backend is Django's dummy one (mail is dropped).
"""

from __future__ import annotations

from django.conf import settings
from django.core import checks
from django.db import DatabaseError

HINT = (
    "set WEFT_ALERT_EMAILS=oncall@example.org (comma-separated), or give an Admin an e-mail "
    "address (manage.py createsuperuser --email ..., or the user's page in the admin)"
)


@checks.register(checks.Tags.compatibility, deploy=True)
def alarm_mail_has_recipients(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """``events.W001`` when alarm mail would reach nobody (module docstring)."""
    if settings.EMAIL_BACKEND == "django.core.mail.backends.dummy.EmailBackend":
        return [
            checks.Warning(
                "alarm mail is dropped: the mail backend is the dummy one",
                hint="set EMAIL_URL to the site's SMTP server (smtp://host:25)",
                id="events.W001",
            )
        ]
    if settings.WEFT_ALERT_EMAILS:
        return []
    from .policies import default_recipients

    try:
        recipients = default_recipients()
    except DatabaseError:  # no users table yet (before the first migrate) or no database
        return []
    if recipients:
        return []
    return [
        checks.Warning(
            "alarm mail goes to nobody: WEFT_ALERT_EMAILS is empty and no active Admin has an "
            "e-mail address (policies without their own recipients mail those)",
            hint=HINT,
            id="events.W001",
        )
    ]

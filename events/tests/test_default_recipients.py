"""Alarm mail in production: with ``WEFT_ALERT_EMAILS`` empty, policies without their own
recipients mail the active Admins (``events.policies.default_recipients``); the Policies page says
so; ``check --deploy`` warns (``events.W001``) when that is nobody."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core import checks
from django.urls import reverse

from accounts.roles import set_role
from events.checks import alarm_mail_has_recipients
from events.policies import default_recipients, load_policies

pytestmark = pytest.mark.django_db


def ids(messages) -> list[str]:
    return [m.id for m in messages]


def test_admins_are_the_default_recipients_and_the_check_says_when_nobody_is(settings, users, client_for):
    settings.WEFT_ALERT_EMAILS = []
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    # users: vic (Viewer), olga (Operator), ada (Admin), each with <name>@example.org
    assert default_recipients() == ["ada@example.org"]
    assert load_policies()["link.down"].recipients == ["ada@example.org"]
    assert alarm_mail_has_recipients() == []
    page = client_for("admin").get(reverse("events:eventpolicy_list")).content.decode()
    assert "default: ada@example.org (the Admins; WEFT_ALERT_EMAILS is empty)" in page

    root = get_user_model().objects.create_superuser("root", email="Root@example.org", password="x")
    gone = get_user_model().objects.create_user(
        "gone", email="gone@example.org", password="x", is_active=False
    )
    set_role(gone, "admin")
    assert default_recipients() == ["ada@example.org", "Root@example.org"]

    users["admin"].email = ""
    users["admin"].save()
    root.delete()
    assert default_recipients() == []
    [warning] = alarm_mail_has_recipients()
    assert warning.id == "events.W001" and warning.level == checks.WARNING
    assert "goes to nobody" in warning.msg and "WEFT_ALERT_EMAILS" in warning.hint
    assert "events.W001" in ids(checks.run_checks(include_deployment_checks=True))
    assert "events.W001" not in ids(checks.run_checks())  # a deployment check only

    settings.WEFT_ALERT_EMAILS = ["oncall@example.org"]
    assert default_recipients() == ["oncall@example.org"] and alarm_mail_has_recipients() == []
    settings.EMAIL_BACKEND = "django.core.mail.backends.dummy.EmailBackend"
    assert "dummy" in alarm_mail_has_recipients()[0].msg

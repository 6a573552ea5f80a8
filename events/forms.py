"""Forms of the events pages."""

from __future__ import annotations

from django import forms
from django.core.validators import validate_email

from .models import EventPolicy


class EventPolicyForm(forms.ModelForm):
    class Meta:
        model = EventPolicy
        fields = ["enabled", "severity", "threshold", "consecutive", "ttl_s", "raise_alarm", "email",
                  "notify_clear", "digest", "recipient_emails", "recipient_users", "recipient_groups"]  # fmt: skip
        widgets = {"recipient_emails": forms.Textarea(attrs={"rows": 2})}

    def clean_recipient_emails(self) -> str:
        value = self.cleaned_data["recipient_emails"]
        for address in [a.strip() for a in value.replace(";", ",").replace("\n", ",").split(",")]:
            if address:
                try:
                    validate_email(address)
                except forms.ValidationError:
                    raise forms.ValidationError(f"{address!r} is not an email address")
        return value

    def clean_consecutive(self) -> int:
        value = self.cleaned_data["consecutive"]
        if value < 1:
            raise forms.ValidationError("at least 1 sweep")
        return value

"""Forms of the events pages."""

from __future__ import annotations

from django import forms
from django.core.validators import validate_email

from .models import EventPolicy


class EventPolicyForm(forms.ModelForm):
    class Meta:
        model = EventPolicy
        fields = ["enabled", "severity", "threshold", "consecutive", "clear_consecutive",
                  "clear_factor", "ttl_s", "raise_alarm", "email",
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

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in ("clear_consecutive", "clear_factor"):  # left out: kept as they are
            self.fields[name].required = False

    def clean_clear_consecutive(self) -> int:
        value = self.cleaned_data["clear_consecutive"]
        if value is None:
            return self.instance.clear_consecutive
        if value < 1:
            raise forms.ValidationError("at least 1 sweep")
        return value

    def clean_clear_factor(self) -> float:
        value = self.cleaned_data["clear_factor"]
        if value is None:
            return self.instance.clear_factor
        if not 0 < value <= 1:
            raise forms.ValidationError("a factor in (0, 1]: the clear level is threshold × factor")
        return value

    def clean_consecutive(self) -> int:
        value = self.cleaned_data["consecutive"]
        if value < 1:
            raise forms.ValidationError("at least 1 sweep")
        return value

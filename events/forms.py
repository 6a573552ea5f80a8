"""Forms of the events pages."""

from __future__ import annotations

from django import forms
from django.core.validators import validate_email

from . import registry
from .models import AlertTarget, EventPolicy

#: Labels of the policy form in the field's terms (Django's defaults read "Ttl s", "Clear factor").
LABELS = {
    "enabled": "Enabled",
    "severity": "Severity",
    "consecutive": "Evaluations over the threshold before the alarm opens",
    "clear_consecutive": "Evaluations at or below the clear level before it clears",
    "clear_factor": "Clear level (× threshold, 0–1)",
    "ttl_s": "Alarm lifetime after its last raise (seconds; 0 = until cleared)",
    "raise_alarm": "Raise an alarm",
    "email": "Mail when the alarm opens (event-only types: per event)",
    "notify_clear": "Mail when the alarm clears",
    "digest": "List in the daily digest",
    "recipient_emails": "Recipients: e-mail addresses (comma or line separated)",
    "recipient_users": "Recipients: users",
    "recipient_groups": "Recipients: groups (e.g. the Operator role)",
}
#: Fields a condition rule reads; other types ignore them.
CONDITION_FIELDS = ("threshold", "consecutive", "clear_consecutive", "clear_factor")


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
        for name, label in LABELS.items():
            self.fields[name].label = label
        unit = registry.get(self.instance.code).threshold_unit if self.instance.code else ""
        self.fields["threshold"].label = f"Threshold ({unit})" if unit else "Threshold"
        if not unit:
            for name in CONDITION_FIELDS:
                self.fields[name].help_text = "not used: this event type has no condition rule"
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


class AlertTargetForm(forms.ModelForm):
    """Create or edit an alert target; the URL is checked against the kind (``AlertTarget.clean``).
    An empty secret on edit keeps the stored one."""

    secret = forms.CharField(
        required=False, max_length=200, widget=forms.PasswordInput(render_value=False),
        help_text="HMAC-SHA256 key of X-Weft-Signature (HTTP kinds); empty on edit keeps the stored one",
    )  # fmt: skip

    class Meta:
        model = AlertTarget
        fields = ["name", "kind", "url", "secret", "min_severity", "enabled"]
        labels = {
            "url": "URL (syslog: udp://host:port or tcp://host:port)",
            "min_severity": "Minimum severity",
        }

    def clean_secret(self) -> str:
        value = self.cleaned_data["secret"]
        return value if value or not self.instance.pk else self.instance.secret

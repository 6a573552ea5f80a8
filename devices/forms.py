"""The Admin's device form (``devices:device_add`` / ``devices:device_edit``): where and how to
poll a device, and its SNMP credentials.

Credentials are write-only: their inputs are password fields that never render a value back
(not even after a failed submit); left blank they keep what is stored; the form says only
whether one is set. Cross-field checks are those of the API (``devices.services.config``).
"""

from __future__ import annotations

from django import forms

from .models import SECRET_FIELDS, Device
from .services.config import CONFIG_FIELDS, settings_errors

V3_FIELDS = ("user", "auth_protocol", "auth_key", "priv_protocol", "priv_key", "context")
_LABELS = {
    "community": "Community (SNMPv2c)",
    "auth_key": "Auth key (SNMPv3)",
    "priv_key": "Privacy key (SNMPv3)",
}


class DeviceForm(forms.ModelForm):
    """A device's settings plus ``community``/``auth_key``/``priv_key`` (write-only, blank keeps).
    ``secrets()`` after validation: the credentials to write ``{name: value}``."""

    community = forms.CharField(required=False, strip=False, max_length=255)
    auth_key = forms.CharField(required=False, strip=False, max_length=255)
    priv_key = forms.CharField(required=False, strip=False, max_length=255)

    class Meta:
        model = Device
        fields = CONFIG_FIELDS

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        editing = self.instance.pk is not None
        for name in SECRET_FIELDS:
            field = self.fields[name]
            field.label = _LABELS[name]
            field.widget = forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"})
            is_set = editing and self.instance.has_secret(name)
            field.help_text = "set; leave blank to keep it" if is_set else "not set"
            field.widget.attrs["data-secret-set"] = "1" if is_set else "0"

    def device_fields(self) -> list:
        """Bound fields of the first fieldset (where, how often, how patiently)."""
        return [self[n] for n in CONFIG_FIELDS if n not in V3_FIELDS]

    def v3_fields(self) -> list:
        """Bound fields of the SNMPv3 fieldset."""
        return [self[n] for n in V3_FIELDS]

    def secrets(self) -> dict[str, str]:
        """The credentials entered (non-blank) in this submit."""
        return {k: self.cleaned_data[k] for k in SECRET_FIELDS if self.cleaned_data.get(k)}

    def values(self) -> dict:
        """The plain fields, validated."""
        return {k: self.cleaned_data[k] for k in CONFIG_FIELDS if k in self.cleaned_data}

    def clean(self):
        data = super().clean()
        attrs = {k: v for k, v in data.items() if k in CONFIG_FIELDS}
        attrs.update(self.secrets())
        # self.instance still holds the stored settings here (the form fills it after clean())
        for field, message in settings_errors(attrs, self.instance if self.instance.pk else None).items():
            self.add_error(field, message)
        return data

"""The Admin's tenant and pool forms (``pools:tenant_add``/``tenant_edit``,
``pools:pool_add``/``pool_edit``).

The forms only render inputs and carry what was typed: every check is the API serializer's
(``pools.api.serializers.TenantSerializer``/``PoolSerializer``, run in :meth:`clean`), and its
messages are filed under the field they name, so a page and ``/api/pools/`` refuse the same input
with the same words. An edit sends the serializer only the fields that changed (as a ``PATCH``):
an unrelated edit is not refused for an overlap stored before, and the audit entry lists what
changed. The write is ``pools.services.tenancy`` (the API's writer).

Members are typed one per line, ``<username> <role>`` (role ``viewer`` or ``operator``, default
``viewer``); a user name that does not exist is refused on its line.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth import get_user_model

from fabric.models import Fabric

from .api.serializers import AllocateRequestSerializer, PoolSerializer, TenantSerializer
from .choices import AllocationKind, OnFault, TenantRole
from .models import Pool, Tenant


def _messages(errors: Any) -> list[str]:
    """Flat messages of a serializer error value (a list, or nested dicts/lists of them)."""
    if isinstance(errors, dict):
        return [f"{k}: {m}" for k, v in errors.items() for m in _messages(v)]
    if isinstance(errors, list):
        return [m for e in errors for m in _messages(e)]
    return [str(errors)]


class _SerializerForm(forms.Form):
    """A form whose :meth:`clean` runs ``serializer_class`` over :meth:`payload` (partial for an
    edit); ``self.serializer`` is the validated serializer for ``pools.services.tenancy``."""

    serializer_class: type = None

    def __init__(self, *args, instance=None, **kwargs):
        self.instance = instance
        if instance is not None:
            kwargs["initial"] = {**self.initial_for(instance), **(kwargs.get("initial") or {})}
        super().__init__(*args, **kwargs)
        self.serializer = None

    def initial_for(self, instance) -> dict:
        return {name: getattr(instance, name) for name in self.base_fields}

    def payload(self) -> dict:
        """The serializer's input: every field on create, the changed ones on an edit."""
        names = self.changed_data if self.instance is not None else list(self.fields)
        return {n: self.value(n) for n in names if n in self.cleaned_data}

    def value(self, name: str):
        return self.cleaned_data[name]

    def row_error(self, field: str, messages: list[str]) -> None:
        for m in messages:
            self.add_error(field if field in self.fields else None, m)

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        ser = self.serializer_class(self.instance, data=self.payload(), partial=self.instance is not None)
        if not ser.is_valid():
            for field, errs in ser.errors.items():
                self.row_error(field, self.field_messages(field, errs))
            return data
        self.serializer = ser
        return data

    def field_messages(self, field: str, errs) -> list[str]:
        return _messages(errs)


class TenantForm(_SerializerForm):
    """Name, description, members, contacts and webhook of a tenant (``TenantSerializer``).
    Contacts are typed one per line (or separated by commas); the webhook secret is never shown
    and left unchanged when left blank."""

    serializer_class = TenantSerializer

    name = forms.CharField(required=False)
    description = forms.CharField(required=False)
    members = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 6, "cols": 40}),
        help_text="one per line: <username> viewer|operator (viewer when left out)",
    )
    contacts = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 40}),
        help_text="e-mail addresses told when its jobs are degraded, requeued, replaced or failed (one per line)",
    )
    webhook_url = forms.CharField(required=False, help_text="signed POST of its jobs' state changes")
    webhook_secret = forms.CharField(
        required=False, widget=forms.PasswordInput, help_text="HMAC-SHA256 key (blank: unchanged)"
    )

    def initial_for(self, tenant: Tenant) -> dict:
        lines = [
            f"{m.user.username} {m.role}"
            for m in tenant.memberships.select_related("user").order_by("user__username")
        ]
        return {"name": tenant.name, "description": tenant.description, "members": "\n".join(lines),
                "contacts": "\n".join(tenant.contacts or []), "webhook_url": tenant.webhook_url}  # fmt: skip

    def payload(self) -> dict:
        out = super().payload()
        if not out.get("webhook_secret"):  # blank: keep the stored one
            out.pop("webhook_secret", None)
        return out

    def clean_members(self) -> list[tuple[int, str, str]]:
        """``[(line number, username, role)]`` of the lines that are not blank (the role as
        typed: the serializer checks it)."""
        out = []
        for n, line in enumerate(self.cleaned_data["members"].splitlines(), 1):
            words = line.split()
            if not words:
                continue
            if len(words) > 2:
                raise forms.ValidationError(f"line {n}: '<username> <role>', got {line.strip()!r}")
            out.append((n, words[0], words[1] if len(words) == 2 else TenantRole.VIEWER))
        self.member_lines = out
        return out

    def value(self, name: str):
        if name == "contacts":
            self.contact_list = [a for a in self.cleaned_data["contacts"].replace(",", "\n").split() if a]
            return self.contact_list
        if name != "members":
            return self.cleaned_data[name]
        lines = self.cleaned_data["members"]
        users = dict(
            get_user_model()
            .objects.filter(username__in=[u for _, u, _ in lines])
            .values_list("username", "pk")
        )
        unknown = [f"line {n}: no user {u!r}" for n, u, _ in lines if u not in users]
        if unknown:
            self.row_error("members", unknown)
        return [{"user": users.get(u, 0), "role": role} for _, u, role in lines]

    def field_messages(self, field: str, errs) -> list[str]:
        if field == "contacts" and isinstance(errs, dict):  # {index of the address: [messages]}
            sent = getattr(self, "contact_list", [])  # named by the address typed, not "0: ..."
            return [
                f"{sent[i]!r}: {m}" if isinstance(i, int) and 0 <= i < len(sent) else f"{i}: {m}"
                for i, v in errs.items()
                for m in _messages(v)
            ]
        if field == "members" and isinstance(errs, list):  # one error dict per line sent
            lines = getattr(self, "member_lines", [])
            out = []
            for i, e in enumerate(errs):
                if isinstance(e, dict) and e:
                    where = f"line {lines[i][0]}: " if i < len(lines) else ""
                    if not (self.has_error("members") and "user" in e and len(e) == 1):  # named above
                        out += [where + m for m in _messages(e)]
                elif e and not isinstance(e, dict):
                    out += _messages(e)
            return out
        return _messages(errs)


class PoolForm(_SerializerForm):
    """What an Admin sets on a pool (``PoolSerializer``): name, description, owner tenant (blank:
    shared), fabric and GPU model filters, quotas and guarantees in GPUs and MIG slices, borrowing
    priority, PKey (``0x0123`` or decimal; blank: none) and per-job isolation with its PKey range."""

    serializer_class = PoolSerializer
    NULLABLE = ("tenant", "fabric", "quota_gpus", "quota_slices", "pkey")

    name = forms.CharField(required=False)
    description = forms.CharField(required=False)
    tenant = forms.CharField(required=False, widget=forms.Select, help_text="blank: shared by every tenant")
    fabric = forms.CharField(
        required=False, widget=forms.Select, help_text="only GPUs of this fabric's hosts"
    )
    gpu_model = forms.CharField(
        required=False, label="GPU model", help_text="product name contains this; blank: any"
    )
    quota_gpus = forms.CharField(required=False, label="Quota (GPUs)", help_text="hard cap; blank: none")
    guaranteed_gpus = forms.CharField(
        required=False, label="Guaranteed GPUs", help_text="reclaimed from borrowers when needed"
    )
    quota_slices = forms.CharField(required=False, label="Quota (MIG slices)", help_text="blank: none")
    guaranteed_slices = forms.CharField(required=False, label="Guaranteed MIG slices")
    priority_weight = forms.CharField(
        required=False, help_text="borrowing: a lower weight loses borrowed GPUs first"
    )
    pkey = forms.CharField(
        required=False, label="PKey", help_text="0x0001-0x7ffe, unique on the fabric; blank: none"
    )
    job_isolation = forms.BooleanField(
        required=False, help_text="each job gets its own partition of its hosts"
    )
    job_pkey_min = forms.CharField(required=False, label="Job PKey range from")
    job_pkey_max = forms.CharField(required=False, label="to")
    on_fault = forms.ChoiceField(
        choices=OnFault.choices, required=False, label="When a job's fabric fails",
        help_text="its jobs' default: notify, requeue, or replace the failed host",
    )  # fmt: skip

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["tenant"].widget.choices = [("", "— shared —")] + [
            (str(t.pk), t.name) for t in Tenant.objects.order_by("name")
        ]
        self.fields["fabric"].widget.choices = [("", "— any fabric —")] + [
            (str(f.pk), f.name) for f in Fabric.objects.order_by("name")
        ]

    def quota_fields(self) -> list:
        """Bound fields of the quotas, guarantees and borrowing fieldset."""
        return [
            self[n]
            for n in ("quota_gpus", "guaranteed_gpus", "quota_slices", "guaranteed_slices", "priority_weight")
        ]

    def isolation_fields(self) -> list:
        """Bound fields of the fabric isolation fieldset (PKey, per-job partitions)."""
        return [self[n] for n in ("pkey", "job_isolation", "job_pkey_min", "job_pkey_max")]

    def initial_for(self, pool: Pool) -> dict:
        out = {n: getattr(pool, n) for n in self.base_fields if n not in ("tenant", "fabric", "pkey")}
        out |= {"tenant": pool.tenant_id or "", "fabric": pool.fabric_id or ""}
        out["pkey"] = f"0x{pool.pkey:04x}" if pool.pkey is not None else ""
        for n in ("job_pkey_min", "job_pkey_max"):
            out[n] = f"0x{getattr(pool, n):04x}"
        return {k: "" if v is None else v if isinstance(v, bool) else str(v) for k, v in out.items()}

    def value(self, name: str):
        v = self.cleaned_data[name]
        if isinstance(v, str):
            v = v.strip()
        if v == "" and name in self.NULLABLE:
            return None
        return v

    def payload(self) -> dict:
        out = super().payload()
        if self.instance is None:  # blank numbers on create: the model's defaults
            out = {k: v for k, v in out.items() if v != "" or k in ("name",)}
        if out.get("on_fault") == "":  # not sent (a form without it): unchanged
            out.pop("on_fault")
        return out


class AllocateForm(forms.Form):
    """What the pool page's "Allocate" asks (``AllocateRequestSerializer``, the allocate API's
    checks, run in :meth:`clean`): ``kind`` (whole GPUs, MIG slices of a profile, or a fraction of
    one GPU: memory MiB and compute %), ``count``, the job reference, a lease in hours (blank:
    none; the API's ``lease_s``), and for a shared pool the tenant (``tenants``: ``[(id, name)]``
    the user may allocate for; a tenant's pool takes its own). After :meth:`is_valid`:
    ``self.request_data`` (the serializer's validated data)."""

    kind = forms.ChoiceField(choices=AllocationKind.choices, initial=AllocationKind.GPU)
    count = forms.CharField(required=False, initial="1", help_text="GPUs or MIG slices (1 for a fraction)")
    mig_profile = forms.CharField(required=False, label="MIG profile", help_text="e.g. 1g.10gb; MIG only")
    memory_mib = forms.CharField(required=False, label="Memory (MiB)", help_text="fraction only")
    compute_pct = forms.CharField(required=False, label="Compute (%)", help_text="fraction only, 1-100")
    job = forms.CharField(required=False, help_text="a job reference (Slurm id, name)")
    lease_h = forms.CharField(required=False, label="Lease (hours)", help_text="blank: until released")
    tenant = forms.ChoiceField(required=False, help_text="on whose behalf (a shared pool)")

    def __init__(self, *args, pool: Pool, tenants: list[tuple[int, str]], **kwargs):
        super().__init__(*args, **kwargs)
        self.pool = pool
        self.fields["tenant"].choices = [(str(pk), name) for pk, name in tenants]
        if pool.tenant_id is not None:
            del self.fields["tenant"]
        self.request_data: dict = {}

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        body: dict[str, Any] = {"pool": self.pool.pk, "kind": data["kind"], "job": data["job"].strip()}
        for name in ("count", "memory_mib", "compute_pct", "mig_profile"):
            if data[name].strip():
                body[name] = data[name].strip()
        lease = data["lease_h"].strip()
        if lease:
            try:
                body["lease_s"] = float(lease) * 3600
            except ValueError:
                self.add_error("lease_h", "a number of hours, e.g. 2 or 0.5")
                return data
        if data.get("tenant"):
            body["tenant"] = data["tenant"]
        ser = AllocateRequestSerializer(data=body)
        if not ser.is_valid():
            for field, errs in ser.errors.items():
                name = "lease_h" if field == "lease_s" else field
                for m in _messages(errs):
                    self.add_error(name if name in self.fields else None, m)
            return data
        self.request_data = ser.validated_data
        return data

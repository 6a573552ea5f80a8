"""The Admin's partition form (``fabric:partition_add``/``partition_edit``).

The form renders inputs and carries what was typed; the partition's own fields are checked by the
API serializer (``fabric.api.serializers.PartitionSerializer``, run in :meth:`PartitionForm.clean`,
partial on an edit: only what changed is sent), so a page and ``/api/fabric/partitions/`` refuse
the same input with the same words, filed under the field they name. The writes are the API's:
``fabric.services.partitions`` (``save_partition``, ``set_members``; their refusals, a PKey or a
name taken, a node GUID given for a port's, are filed under their field by the view).

Members come from two inputs, as an Admin thinks of them:

* ``hosts``: hosts of the fabric; each adds its HCA ports (the port GUIDs of its CA nodes) with
  the membership ``host_membership``;
* ``members``: one per line, ``<port GUID or keyword> [full|limited|both]`` (full when left out),
  for ports no host names (a storage target, an SR-IOV virtual function, ``ALL``). A line that is
  no GUID or keyword, or names a bad membership, is refused on its line.

Semantics of GUIDs, keywords and memberships: ``man opensm`` "PARTITION CONFIGURATION".
"""

from __future__ import annotations

from collections import Counter, defaultdict

from django import forms

from .api.serializers import PartitionSerializer
from .choices import MemberReason, Membership, NodeType
from .guid import normalize_guid
from .models import Fabric, Host, Partition, Port
from .parsers.partitions import KEYWORDS, MTU_CODES, RATE_CODES


def host_ports(fabric: Fabric) -> dict[int, list[str]]:
    """``{host id: sorted port GUIDs of its CA nodes}`` of ``fabric``'s hosts with at least one
    (the HCA ports a host adds to a partition). One query."""
    out: dict[int, list[str]] = defaultdict(list)
    rows = (
        Port.objects.filter(node__fabric=fabric, node__node_type=NodeType.CA, node__host__isnull=False)
        .exclude(port_guid="")
        .values_list("node__host_id", "port_guid")
        .order_by("port_guid")
    )
    for host_id, guid in rows:
        out[host_id].append(guid)
    return dict(out)


def _messages(errors) -> list[str]:
    """Flat messages of a serializer error value (a list, or nested dicts/lists of them: a list
    field's ``{index: [messages]}`` as ``"item N: message"``, N from 1)."""
    if isinstance(errors, dict):
        return [
            f"item {k + 1 if isinstance(k, int) else k}: {m}" for k, v in errors.items() for m in _messages(v)
        ]
    if isinstance(errors, list):
        return [m for e in errors for m in _messages(e)]
    return [str(errors)]


class _PartitionSerializer(PartitionSerializer):
    """The API's checks without the generic ``(fabric, pkey)`` unique-together message: the
    service says which PKey is taken, under ``pkey`` (``save_partition``'s ``PartitionError``)."""

    def get_unique_together_validators(self):
        return []


class PartitionForm(forms.Form):
    """Name, PKey, description, IPoIB flags (``ipoib``, ``mtu``, ``rate``, ``sl``, ``scope``) and
    members (hosts and port GUIDs, see the module docstring) of a partition.

    ``fabric``: the partition's fabric (its hosts are offered). ``instance``: the partition edited
    (None: a new one). ``member_reason``: the members the form replaces (None: all of them;
    ``extra`` for a partition a pool or a job owns, whose ``pool`` members follow their owner).
    After :meth:`is_valid`: ``self.serializer`` (validated, for the write) and
    :attr:`wanted_members` (``[(GUID or keyword, membership)]``).
    """

    name = forms.CharField(required=False, max_length=64)
    pkey = forms.CharField(required=False, label="PKey", help_text="0x0001-0x7ffe, unique on the fabric")
    description = forms.CharField(required=False, max_length=200)
    ipoib = forms.BooleanField(required=False, label="IPoIB", help_text="create the IPoIB broadcast group")
    mtu = forms.ChoiceField(
        required=False, label="MTU",
        choices=[("", "OpenSM's default")] + [(str(c), f"{c} ({b} bytes)") for c, b in MTU_CODES.items()],
    )  # fmt: skip
    rate = forms.ChoiceField(
        required=False,
        choices=[("", "OpenSM's default")]
        + [(str(c), f"{c} ({g:g} Gb/s)") for c, g in sorted(RATE_CODES.items(), key=lambda i: i[1])],
    )
    sl = forms.CharField(required=False, label="SL", help_text="service level 0-15; blank: OpenSM's default")
    scope = forms.CharField(required=False, help_text="MGID scope nibbles 1-15, comma-separated, e.g. 2")
    hosts = forms.MultipleChoiceField(required=False, help_text="each adds its HCA ports")
    host_membership = forms.ChoiceField(
        choices=Membership.choices, initial=Membership.FULL, label="Hosts' membership"
    )
    members = forms.CharField(
        required=False,
        label="Port GUIDs",
        widget=forms.Textarea(attrs={"rows": 5, "cols": 48}),
        help_text="one per line: <port GUID or keyword> full|limited|both (full when left out)",
    )

    #: the partition fields the serializer checks (the others are members)
    PARTITION_FIELDS = ("name", "pkey", "description", "ipoib", "mtu", "rate", "sl", "scope")

    def __init__(self, *args, fabric: Fabric, instance: Partition | None = None,
                 member_reason: str | None = None, **kwargs):  # fmt: skip
        self.fabric, self.instance, self.member_reason = fabric, instance, member_reason
        self.ports_of = host_ports(fabric)
        hosts = Host.objects.filter(fabric=fabric, pk__in=list(self.ports_of)).order_by("name")
        self.host_names = dict(hosts.values_list("pk", "name"))
        if instance is not None:
            kwargs["initial"] = {**self.initial_for(instance), **(kwargs.get("initial") or {})}
        super().__init__(*args, **kwargs)
        self.fields["hosts"].choices = [(str(pk), name) for pk, name in self.host_names.items()]
        self.serializer = None
        self.wanted_members: list[tuple[str, str]] = []

    # -- initial values of an edit ----------------------------------------------------------------

    def edited_members(self, partition: Partition):
        """The member rows the form shows and replaces (see ``member_reason``)."""
        rows = partition.members.all()
        return rows.filter(reason=self.member_reason) if self.member_reason else rows

    def initial_for(self, p: Partition) -> dict:
        """The stored partition as the form shows it: its flags, the hosts all of whose HCA ports
        are members with one membership (the most hosts' one), the other members as lines."""
        out = {
            "name": p.name, "pkey": p.pkey_hex, "description": p.description, "ipoib": p.ipoib,
            "mtu": "" if p.mtu is None else str(p.mtu), "rate": "" if p.rate is None else str(p.rate),
            "sl": "" if p.sl is None else str(p.sl), "scope": ", ".join(str(s) for s in p.scope or []),
        }  # fmt: skip
        members = dict(self.edited_members(p).values_list("port_guid", "membership"))
        whole: dict[int, str] = {}
        for host_id, guids in self.ports_of.items():
            kinds = {members.get(g) for g in guids}
            if len(kinds) == 1 and None not in kinds:
                whole[host_id] = kinds.pop()
        membership = Counter(whole.values()).most_common(1)[0][0] if whole else Membership.FULL
        chosen = [h for h, m in whole.items() if m == membership]
        taken = {g for h in chosen for g in self.ports_of[h]}
        lines = [
            g if m == Membership.FULL else f"{g} {m}" for g, m in sorted(members.items()) if g not in taken
        ]
        out |= {"hosts": [str(h) for h in chosen], "host_membership": membership, "members": "\n".join(lines)}
        return out

    # -- checks -------------------------------------------------------------------------------------

    def clean_members(self) -> list[tuple[str, str]]:
        """``[(canonical GUID or keyword, membership)]`` of the lines; every bad line named (a
        GUID given twice too)."""
        out, bad, seen = [], [], {}
        for n, line in enumerate(self.cleaned_data["members"].splitlines(), 1):
            words = line.replace(",", " ").replace("=", " ").split()
            if not words:
                continue
            if len(words) > 2:
                bad.append(f"line {n}: '<port GUID> full|limited|both', got {line.strip()[:80]!r}")
                continue
            guid = words[0].upper() if words[0].upper() in KEYWORDS else words[0]
            membership = words[1].lower() if len(words) == 2 else Membership.FULL
            if guid not in KEYWORDS:
                try:
                    guid = normalize_guid(guid)
                except ValueError as exc:
                    bad.append(f"line {n}: {words[0][:40]!r}: {exc}")
                    continue
            if membership not in Membership.values:
                bad.append(
                    f"line {n}: membership {words[1][:20]!r} is not one of {', '.join(Membership.values)}"
                )
                continue
            if guid in seen:  # two memberships for one port: one of them would be dropped silently
                bad.append(f"line {n}: {guid} is listed on line {seen[guid]} already")
                continue
            seen[guid] = n
            out.append((guid, membership))
        if bad:
            raise forms.ValidationError(bad)
        return out

    def clean_scope(self) -> list[int] | str:
        text = self.cleaned_data["scope"].replace(",", " ").split()
        try:
            return [int(s, 0) for s in text]
        except ValueError:
            raise forms.ValidationError("scope nibbles are numbers 1-15, e.g. 2 or 2, 5") from None

    def payload(self) -> dict:
        """The serializer's input: every partition field on create, the changed ones on an edit."""
        names = [n for n in self.PARTITION_FIELDS if n in self.cleaned_data]
        if self.instance is not None:
            names = [n for n in names if n in self.changed_data]
        out = {}
        for n in names:
            v = self.cleaned_data[n]
            if isinstance(v, str):
                v = v.strip()
            out[n] = None if v == "" and n in ("mtu", "rate", "sl") else v
        if self.instance is None:
            out["fabric"] = self.fabric.pk
        return out

    def clean(self):
        data = super().clean()
        if "members" in data and "hosts" in data:
            picked = [(g, data.get("host_membership") or Membership.FULL)
                      for h in data["hosts"] for g in self.ports_of.get(int(h), [])]  # fmt: skip
            # a GUID typed on a line keeps the line's membership over its host's
            typed = {g for g, _ in data["members"]}
            self.wanted_members = [m for m in picked if m[0] not in typed] + data["members"]
        payload = self.payload()
        if not payload or any(n in self.errors for n in self.PARTITION_FIELDS):
            return data
        ser = _PartitionSerializer(self.instance, data=payload, partial=self.instance is not None)
        if not ser.is_valid():
            for field, errs in ser.errors.items():
                for m in _messages(errs):
                    self.add_error(field if field in self.fields else None, m)
            return data
        self.serializer = ser
        return data

    def member_reason_label(self) -> str:
        return dict(MemberReason.choices).get(self.member_reason, "")

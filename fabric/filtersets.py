"""django-filter filtersets of the fabric API (and the pages' search).

GUID filters compare 64-bit numbers: the input is normalised with ``fabric.guid.normalize_guid``
(``2c903000a1b2c``, ``0x0002C903000A1B2C`` and ``0x2c903000a1b2c`` are the same GUID), several
values may be given comma-separated or repeated. Enumerations (port state, tier, node type)
accept the number or the name (``state=4`` or ``state=active``).
"""

from __future__ import annotations

from django import forms
from django.db.models import Q, QuerySet
from django_filters import rest_framework as filters
from django_filters.fields import ModelMultipleChoiceField
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field

from core.fields import BoundedIsoDateTimeFilter
from core.params import MAX_ID, int_param

from .choices import NodeType, PhysState, PortState, SMState, Tier
from .guid import normalize_guid
from .lookup import node_q
from .models import CableInfo, Discovery, Fabric, Host, Link, Node, Partition, Port, SubnetManager


class GUIDListField(forms.CharField):
    """Comma-separated GUIDs → list of canonical GUIDs; a bad one is a 400 naming it."""

    def clean(self, value):
        value = super().clean(value)
        if not value:
            return []
        values = value if isinstance(value, list) else [value]
        out = []
        for item in values:
            for part in str(item).split(","):
                part = part.strip()
                if not part:
                    continue
                try:
                    out.append(normalize_guid(part))
                except ValueError as exc:
                    raise forms.ValidationError("%(error)s", params={"error": str(exc)}) from None
        return out


@extend_schema_field(OpenApiTypes.STR)
class GUIDFilter(filters.Filter):
    """Filter on one or more GUID fields (OR between fields) with normalised input."""

    field_class = GUIDListField

    def __init__(self, *args, fields: tuple[str, ...] = (), **kwargs):
        self.guid_fields = fields
        super().__init__(*args, **kwargs)

    def filter(self, qs: QuerySet, value: list[str]) -> QuerySet:
        if not value:
            return qs
        q = Q()
        for name in self.guid_fields or (self.field_name,):
            q |= Q(**{f"{name}__in": value})
        return qs.filter(q).distinct() if len(self.guid_fields) > 1 else qs.filter(q)


class EnumListField(forms.CharField):
    """Comma-separated numbers or names of an enumeration → list of values."""

    def __init__(self, *args, enum=None, **kwargs):
        self.enum = enum
        super().__init__(*args, **kwargs)

    def clean(self, value):
        value = super().clean(value)
        if not value:
            return []
        out = []
        lookup = {}
        for member in self.enum:
            lookup[str(member.value).lower()] = member.value
            lookup[str(member.label).lower()] = member.value
            lookup[member.name.lower()] = member.value
        for part in str(value).split(","):
            part = part.strip().lower()
            if not part:
                continue
            if part not in lookup:
                names = ", ".join(f"{m.value}/{m.name.lower()}" for m in self.enum)
                raise forms.ValidationError(
                    "%(value)s is not one of %(names)s", params={"value": repr(part), "names": names}
                )
            out.append(lookup[part])
        return out


@extend_schema_field(OpenApiTypes.STR)
class EnumFilter(filters.Filter):
    """``field__in`` on an enumeration given by numbers or names."""

    field_class = EnumListField

    def __init__(self, *args, enum=None, **kwargs):
        kwargs.setdefault(
            "help_text",
            "number or name, comma-separated: " + ", ".join(f"{m.value}={m.name.lower()}" for m in enum),
        )
        super().__init__(*args, enum=enum, **kwargs)

    def filter(self, qs: QuerySet, value: list) -> QuerySet:
        if not value:
            return qs
        return qs.filter(**{f"{self.field_name}__in": value})


class CharInFilter(filters.BaseInFilter, filters.CharFilter):
    """Comma-separated strings (``speed=HDR,NDR``), case-insensitive for speeds/widths."""

    def filter(self, qs, value):
        if not value:
            return qs
        q = Q()
        for item in value:
            q |= Q(**{f"{self.field_name}__iexact": item.strip()})
        return qs.filter(q)


class NumberInFilter(filters.BaseInFilter, filters.NumberFilter):
    """Comma-separated numbers within 64 bits (a larger one overflowed SQLite: a 500, now a 400)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("min_value", -MAX_ID - 1)
        kwargs.setdefault("max_value", MAX_ID)
        super().__init__(*args, **kwargs)


class BoundedModelMultipleChoiceField(ModelMultipleChoiceField):
    """Ids that are not 64-bit integers are invalid choices before any query runs (on SQLite a
    20-digit id raised OverflowError in the validation query: a 500)."""

    def _check_values(self, value):
        for pk in value:
            if pk not in self.empty_values and int_param(str(pk)) is None:
                raise forms.ValidationError(
                    self.error_messages["invalid_pk_value"], code="invalid_pk_value", params={"pk": pk}
                )
        return super()._check_values(value)


class ModelIdsFilter(filters.ModelMultipleChoiceFilter):
    field_class = BoundedModelMultipleChoiceField


class FabricFilterSet(filters.FilterSet):
    name = filters.CharFilter(lookup_expr="iexact")
    q = filters.CharFilter(method="search", label="search name/description")

    class Meta:
        model = Fabric
        fields = ["id", "name", "discovery_enabled", "polling_enabled"]

    def search(self, qs, name, value):
        return qs.filter(Q(name__icontains=value) | Q(description__icontains=value)) if value else qs


class NodeFilterSet(filters.FilterSet):
    fabric = ModelIdsFilter(queryset=Fabric.objects.all())
    fabric_name = filters.CharFilter(field_name="fabric__name", lookup_expr="iexact")
    guid = GUIDFilter(label="node GUID", field_name="node_guid")
    system_image_guid = GUIDFilter(field_name="system_image_guid")
    port_guid = GUIDFilter(label="GUID of any of its ports", field_name="ports__port_guid")
    lid = NumberInFilter(method="filter_lid", label="LID of the node (switch port 0) or of any port")
    description = filters.CharFilter(lookup_expr="icontains")
    name = filters.CharFilter(lookup_expr="icontains", label="name (node-name map, else description)")
    type = filters.MultipleChoiceFilter(field_name="node_type", choices=NodeType.choices)
    tier = EnumFilter(enum=Tier)
    host = ModelIdsFilter(queryset=Host.objects.all())
    host_name = filters.CharFilter(field_name="host__name", lookup_expr="iexact")
    q = filters.CharFilter(method="search", label="search GUID, LID, name or description")
    reachable = filters.BooleanFilter(
        field_name="unreachable_since", lookup_expr="isnull", label="reached by the last discovery"
    )
    aggregation_node = filters.BooleanFilter(label="a SHARP Aggregation Node (the CA inside a switch)")
    aggregation_switch = GUIDFilter(
        label="the SHARP Aggregation Nodes of this switch GUID", field_name="aggregation_switch_guid"
    )

    class Meta:
        model = Node
        fields = ["id", "vendor_id", "device_id"]

    def filter_lid(self, qs, name, value):
        if not value:
            return qs
        ids = Port.objects.filter(lid__in=value).values("node_id")
        return qs.filter(Q(lid__in=value) | Q(pk__in=ids))

    def search(self, qs, name, value):
        if not value or not value.strip():
            return qs
        return qs.filter(node_q(value, description="icontains"))


class PortFilterSet(filters.FilterSet):
    fabric = ModelIdsFilter(field_name="node__fabric", queryset=Fabric.objects.all())
    node = ModelIdsFilter(queryset=Node.objects.all())
    guid = GUIDFilter(label="port GUID", field_name="port_guid")
    node_guid = GUIDFilter(field_name="node__node_guid")
    lid = NumberInFilter(method="filter_lid", label="port LID (switch ports: the switch's LID)")
    port_num = NumberInFilter()
    description = filters.CharFilter(field_name="node__description", lookup_expr="icontains")
    name = filters.CharFilter(field_name="node__name", lookup_expr="icontains", label="node name")
    type = filters.MultipleChoiceFilter(field_name="node__node_type", choices=NodeType.choices)
    tier = EnumFilter(field_name="node__tier", enum=Tier)
    state = EnumFilter(enum=PortState)
    phys_state = EnumFilter(enum=PhysState)
    speed = CharInFilter(label="lane speed, e.g. HDR or EDR,HDR")
    width = CharInFilter(label="link width, e.g. 4x")
    connected = filters.BooleanFilter(method="filter_connected", label="has a link")

    class Meta:
        model = Port
        fields = ["id", "rate_gbps", "label"]

    def filter_lid(self, qs, name, value):
        if not value:
            return qs
        return qs.filter(Q(lid__in=value) | Q(lid__isnull=True, node__lid__in=value))

    def filter_connected(self, qs, name, value):
        if value is None:
            return qs
        linked = Q(link_as_a__isnull=False) | Q(link_as_b__isnull=False)
        return qs.filter(linked) if value else qs.exclude(linked)


class LinkFilterSet(filters.FilterSet):
    fabric = ModelIdsFilter(queryset=Fabric.objects.all())
    node = filters.NumberFilter(
        method="filter_node", label="node id at either end", min_value=0, max_value=MAX_ID
    )
    guid = GUIDFilter(
        fields=("port_a__node__node_guid", "port_b__node__node_guid"), label="node GUID at either end"
    )
    port_guid = GUIDFilter(fields=("port_a__port_guid", "port_b__port_guid"), label="port GUID at either end")
    lid = NumberInFilter(method="filter_lid", label="LID at either end")
    description = filters.CharFilter(method="filter_description", label="node description at either end")
    name = filters.CharFilter(method="filter_name", label="node name at either end")
    speed = CharInFilter()
    width = CharInFilter()
    state = EnumFilter(method="filter_state", enum=PortState, label="port state at either end")
    tier = EnumFilter(method="filter_tier", enum=Tier, label="node tier at either end")
    type = filters.MultipleChoiceFilter(method="filter_type", choices=NodeType.choices)

    class Meta:
        model = Link
        fields = ["id", "rate_gbps"]

    def _either(self, qs, lookup, value):
        return qs.filter(Q(**{f"port_a__{lookup}": value}) | Q(**{f"port_b__{lookup}": value}))

    def filter_node(self, qs, name, value):
        return qs if value is None else self._either(qs, "node_id", value)

    def filter_lid(self, qs, name, value):
        if not value:
            return qs
        return self._either(qs, "lid__in", value) | self._either(qs, "node__lid__in", value)

    def filter_description(self, qs, name, value):
        return qs if not value else self._either(qs, "node__description__icontains", value)

    def filter_name(self, qs, name, value):
        return qs if not value else self._either(qs, "node__name__icontains", value)

    def filter_state(self, qs, name, value):
        return qs if not value else self._either(qs, "state__in", value)

    def filter_tier(self, qs, name, value):
        return qs if not value else self._either(qs, "node__tier__in", value)

    def filter_type(self, qs, name, value):
        return qs if not value else self._either(qs, "node__node_type__in", value)


class HostFilterSet(filters.FilterSet):
    fabric = ModelIdsFilter(queryset=Fabric.objects.all())
    name = filters.CharFilter(lookup_expr="icontains")

    class Meta:
        model = Host
        fields = ["id"]


class SubnetManagerFilterSet(filters.FilterSet):
    fabric = ModelIdsFilter(queryset=Fabric.objects.all())
    guid = GUIDFilter(field_name="guid")
    lid = NumberInFilter()
    state = EnumFilter(enum=SMState)

    class Meta:
        model = SubnetManager
        fields = ["id", "priority"]


class DiscoveryFilterSet(filters.FilterSet):
    fabric = ModelIdsFilter(queryset=Fabric.objects.all())
    source = filters.MultipleChoiceFilter(choices=Discovery._meta.get_field("source").choices)
    status = filters.MultipleChoiceFilter(choices=Discovery._meta.get_field("status").choices)
    started_after = BoundedIsoDateTimeFilter(field_name="started", lookup_expr="gte")
    started_before = BoundedIsoDateTimeFilter(field_name="started", lookup_expr="lt")
    changed = filters.BooleanFilter(method="filter_changed", label="has added/removed/changed items")

    class Meta:
        model = Discovery
        fields = ["id"]

    def filter_changed(self, qs, name, value):
        if value is None:
            return qs
        q = Q(added__gt=0) | Q(removed__gt=0) | Q(changed__gt=0)
        return qs.filter(q) if value else qs.exclude(q)


class PartitionFilterSet(filters.FilterSet):
    """Partitions by fabric, PKey (decimal or ``0x`` hex), name, applied state, source, or a member's
    port GUID (``member``)."""

    fabric = ModelIdsFilter(queryset=Fabric.objects.all())
    pkey = filters.CharFilter(method="filter_pkey")
    name = filters.CharFilter(lookup_expr="icontains")
    applied_state = filters.MultipleChoiceFilter(choices=Partition._meta.get_field("applied_state").choices)
    source = filters.MultipleChoiceFilter(choices=Partition._meta.get_field("source").choices)
    member = GUIDFilter(field_name="members__port_guid")

    class Meta:
        model = Partition
        fields = ["id", "is_default"]

    def filter_pkey(self, qs: QuerySet, name: str, value: str) -> QuerySet:
        """``?pkey=0x8a01`` or decimal: the partition of that PKey, either membership (the top bit
        is ignored). 400 for what is not a number or not 16 bits."""
        from rest_framework.exceptions import ValidationError

        try:
            pkey = int(value, 16) if value.lower().startswith("0x") else int(value)
        except ValueError:
            raise ValidationError({"pkey": ["a number (decimal or 0x hex)"]}) from None
        if not 0 <= pkey <= 0xFFFF:
            raise ValidationError(
                {"pkey": ["a PKey is 16 bits: 0-0xffff (the top bit, full membership, is ignored)"]}
            )
        return qs.filter(pkey=pkey & 0x7FFF)


class CableInfoFilterSet(filters.FilterSet):
    """Cable readings by fabric, node, port, node GUID and port number, source, serial or part
    number; ``latest=true`` keeps each port's latest reading only."""

    fabric = ModelIdsFilter(field_name="port__node__fabric", queryset=Fabric.objects.all())
    node = ModelIdsFilter(field_name="port__node", queryset=Node.objects.all())
    port = ModelIdsFilter(queryset=Port.objects.all())
    node_guid = GUIDFilter(field_name="port__node__node_guid")
    port_num = NumberInFilter(field_name="port__port_num")
    serial_number = filters.CharFilter(field_name="data__serial_number", label="module serial number")
    part_number = filters.CharFilter(field_name="data__part_number", label="module part number")
    latest = filters.BooleanFilter(method="filter_latest", label="only each port's latest reading")

    class Meta:
        model = CableInfo
        fields = ["id", "source"]

    def filter_latest(self, qs, name, value):
        if not value:
            return qs
        from django.db.models import OuterRef, Subquery

        newest = CableInfo.objects.filter(port=OuterRef("port")).order_by("-taken", "-pk").values("pk")[:1]
        return qs.filter(pk=Subquery(newest))

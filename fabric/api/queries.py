"""Querysets of the fabric API and pages, shaped so that a list costs a fixed number of queries.

Each function returns a queryset with the ``select_related``/``prefetch_related`` the matching
serializer reads (no N+1: ``fabric/tests/test_api.py`` checks with
``django_assert_max_num_queries``).
"""

from __future__ import annotations

from django.db.models import Count, IntegerField, OuterRef, Prefetch, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce

from ..choices import NodeType
from ..models import Discovery, Fabric, Host, Link, Node, Port, SubnetManager

#: Joins that give a port its link and the remote port with its node in one query.
PORT_LINK_RELATED = (
    "link_as_a__port_b__node",
    "link_as_b__port_a__node",
)


def _count(model, **filters) -> Coalesce:
    sub = (
        model.objects.filter(fabric=OuterRef("pk"), **filters)
        .order_by()
        .values("fabric")
        .annotate(c=Count("*"))
        .values("c")
    )
    return Coalesce(Subquery(sub, output_field=IntegerField()), Value(0))


def fabric_queryset() -> QuerySet[Fabric]:
    """Fabrics annotated with ``n_switches``, ``n_cas``, ``n_routers``, ``n_links``."""
    return Fabric.objects.select_related("last_discovery").annotate(
        n_switches=_count(Node, node_type=NodeType.SWITCH),
        n_cas=_count(Node, node_type=NodeType.CA),
        n_routers=_count(Node, node_type=NodeType.ROUTER),
        n_links=_count(Link),
    )


def fabric_counts(fabric: Fabric) -> dict[str, int]:
    """``{"switches", "cas", "routers", "links"}`` of one fabric (two queries)."""
    by_type = dict(
        Node.objects.filter(fabric=fabric).order_by().values_list("node_type").annotate(c=Count("*"))
    )
    return {
        "switches": by_type.get(NodeType.SWITCH, 0),
        "cas": by_type.get(NodeType.CA, 0),
        "routers": by_type.get(NodeType.ROUTER, 0),
        "links": Link.objects.filter(fabric=fabric).count(),
    }


def node_queryset() -> QuerySet[Node]:
    return Node.objects.select_related("fabric", "host")


def node_detail_queryset() -> QuerySet[Node]:
    """Nodes with their ports, each port's link and remote port (three queries per page)."""
    ports = Port.objects.select_related(*PORT_LINK_RELATED).order_by("port_num")
    return node_queryset().prefetch_related(Prefetch("ports", queryset=ports))


def port_queryset() -> QuerySet[Port]:
    return Port.objects.select_related("node", *PORT_LINK_RELATED)


def link_queryset() -> QuerySet[Link]:
    return Link.objects.select_related("fabric", "port_a__node", "port_b__node")


def host_queryset() -> QuerySet[Host]:
    return Host.objects.select_related("fabric").prefetch_related(
        Prefetch("nodes", queryset=Node.objects.order_by("description"))
    )


def discovery_queryset() -> QuerySet[Discovery]:
    return Discovery.objects.select_related("fabric")


def subnet_manager_queryset() -> QuerySet[SubnetManager]:
    return SubnetManager.objects.select_related("fabric")

"""QuerySets of the fabric models, attached with ``Manager.from_queryset`` (Saleor ``StockQuerySet``).

The API viewsets and the pages read through these, so a list costs a fixed number of queries
whichever way it is shown: each ``with_*`` method adds the ``select_related``/``prefetch_related``
that the serializers and templates read (``fabric/tests/test_api.py`` checks with
``django_assert_max_num_queries``).

Related models are reached through ``_meta`` (``fabric.models`` imports this module).
"""

from __future__ import annotations

from django.db import models
from django.db.models import Count, IntegerField, OuterRef, Prefetch, Subquery, Value
from django.db.models.functions import Coalesce

from .choices import NodeType

#: Joins that give a port its link and the remote port with its node in one query
#: (what ``Port.link`` and ``Port.remote`` read).
PORT_LINK_RELATED = (
    "link_as_a__port_b__node",
    "link_as_b__port_a__node",
)


def _related(model: type[models.Model], accessor: str) -> type[models.Model]:
    return model._meta.get_field(accessor).related_model


def _count_per_fabric(model: type[models.Model], **filters) -> Coalesce:
    """A subquery counting ``model`` rows of the outer fabric (0 when none)."""
    sub = (
        model.objects.filter(fabric=OuterRef("pk"), **filters)
        .order_by()
        .values("fabric")
        .annotate(c=Count("*"))
        .values("c")
    )
    return Coalesce(Subquery(sub, output_field=IntegerField()), Value(0))


class FabricQuerySet(models.QuerySet):
    def with_counts(self) -> FabricQuerySet:
        """Fabrics with their last discovery, annotated with ``n_switches``, ``n_cas``,
        ``n_routers`` and ``n_links`` (one query for a whole list)."""
        node, link = _related(self.model, "nodes"), _related(self.model, "links")
        return self.select_related("last_discovery").annotate(
            n_switches=_count_per_fabric(node, node_type=NodeType.SWITCH),
            n_cas=_count_per_fabric(node, node_type=NodeType.CA),
            n_routers=_count_per_fabric(node, node_type=NodeType.ROUTER),
            n_links=_count_per_fabric(link),
        )


def topology_counts(fabric: models.Model) -> dict[str, int]:
    """``{"switches", "cas", "routers", "links"}`` of one ``Fabric`` (two queries); what
    :meth:`FabricQuerySet.with_counts` annotates, for an instance read without it."""
    by_type = dict(fabric.nodes.order_by().values_list("node_type").annotate(c=Count("*")))
    return {
        "switches": by_type.get(NodeType.SWITCH, 0),
        "cas": by_type.get(NodeType.CA, 0),
        "routers": by_type.get(NodeType.ROUTER, 0),
        "links": fabric.links.count(),
    }


class NodeQuerySet(models.QuerySet):
    def switches(self) -> NodeQuerySet:
        return self.filter(node_type=NodeType.SWITCH)

    def cas(self) -> NodeQuerySet:
        return self.filter(node_type=NodeType.CA)

    def with_fabric_and_host(self) -> NodeQuerySet:
        """Nodes with their fabric and host (one query)."""
        return self.select_related("fabric", "host")

    def with_linked_ports(self) -> NodeQuerySet:
        """Nodes with their fabric, host, and ports in port order, each with its link and remote
        port (three queries per page)."""
        port = _related(self.model, "ports")
        ports = port.objects.with_link().order_by("port_num")
        return self.with_fabric_and_host().prefetch_related(Prefetch("ports", queryset=ports))


class PortQuerySet(models.QuerySet):
    def with_link(self) -> PortQuerySet:
        """Ports with their node, link and remote port with its node (one query)."""
        return self.select_related("node", *PORT_LINK_RELATED)


class LinkQuerySet(models.QuerySet):
    def with_ends(self) -> LinkQuerySet:
        """Links with their fabric and both ports with their nodes (one query)."""
        return self.select_related("fabric", "port_a__node", "port_b__node")


class HostQuerySet(models.QuerySet):
    def with_nodes(self) -> HostQuerySet:
        """Hosts with their fabric and their nodes by name (two queries)."""
        node = _related(self.model, "nodes")
        return self.select_related("fabric").prefetch_related(
            Prefetch("nodes", queryset=node.objects.order_by("name"))
        )


class FabricScopedQuerySet(models.QuerySet):
    """Rows that belong to a fabric (discoveries, subnet managers)."""

    def with_fabric(self) -> FabricScopedQuerySet:
        return self.select_related("fabric")

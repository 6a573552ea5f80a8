from django.apps import AppConfig


class FabricConfig(AppConfig):
    """Topology: fabrics, nodes, ports, links, SMs, discovery and import."""

    name = "fabric"

"""``/api/fabric/``: fabrics, nodes, ports, links, discoveries, hosts, subnet-managers, partitions, cables."""

from rest_framework.routers import DefaultRouter

from . import views

app_name = "fabric-api"
router = DefaultRouter()
router.register("fabrics", views.FabricViewSet)
router.register("nodes", views.NodeViewSet)
router.register("ports", views.PortViewSet)
router.register("links", views.LinkViewSet)
router.register("discoveries", views.DiscoveryViewSet)
router.register("hosts", views.HostViewSet)
router.register("subnet-managers", views.SubnetManagerViewSet)
router.register("partitions", views.PartitionViewSet)
router.register("partition-applies", views.PartitionApplyViewSet)
router.register("cables", views.CableInfoViewSet)
urlpatterns = router.urls

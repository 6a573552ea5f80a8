"""Fabric pages (namespace ``fabric``)."""

from django.urls import path

import core.converters  # noqa: F401  (registers <pk:>)

from . import views

app_name = "fabric"
urlpatterns = [
    path("fabric/", views.FabricListView.as_view(), name="fabric_list"),
    path("fabric/<pk:pk>/", views.FabricView.as_view(), name="fabric"),
    path("fabric/<pk:pk>/discover/", views.FabricDiscoverView.as_view(), name="fabric_discover"),
    path("fabric/<pk:pk>/compare/", views.CompareView.as_view(), name="compare"),
    path("fabric/<pk:pk>/names/", views.FabricNamesView.as_view(), name="fabric_names"),
    path("fabric/<pk:pk>/subnet-managers/", views.SubnetManagersView.as_view(), name="subnet_managers"),
    path("fabric/compare/", views.CompareIndexView.as_view(), name="compare_index"),
    path("fabric/map/", views.MapView.as_view(), name="map"),
    path("fabric/nodes/<pk:pk>/", views.NodeView.as_view(), name="node"),
    path("fabric/ports/<pk:pk>/", views.PortView.as_view(), name="port"),
    path("fabric/ports/<pk:pk>/action/", views.PortActionView.as_view(), name="port_action"),
    path("fabric/changes/", views.ChangesView.as_view(), name="changes"),
    path("fabric/isolated/", views.IsolatedPortsView.as_view(), name="isolated"),
    path("fabric/import/", views.ImportView.as_view(), name="import"),
    path("fabric/partitions/", views.PartitionListView.as_view(), name="partition_list"),
    path("fabric/partitions/<pk:pk>/", views.PartitionView.as_view(), name="partition"),
    path("fabric/partitions/new/", views.PartitionFormView.as_view(), name="partition_add"),
    path("fabric/partitions/<pk:pk>/edit/", views.PartitionFormView.as_view(), name="partition_edit"),
    path("fabric/partitions/<pk:pk>/delete/", views.PartitionDeleteView.as_view(), name="partition_delete"),
    path("fabric/partitions/<pk:pk>/apply/", views.PartitionApplyView.as_view(), name="partition_apply"),
]

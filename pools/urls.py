"""Pool and host pages (namespace ``pools``)."""

from django.urls import path

import weft.converters  # noqa: F401  (registers <pk:>)

from . import views

app_name = "pools"
urlpatterns = [
    path("pools/", views.PoolListView.as_view(), name="pool_list"),
    path("pools/<pk:pk>/", views.PoolView.as_view(), name="pool"),
    path("pools/hosts/", views.HostListView.as_view(), name="host_list"),
    path("pools/hosts/find/", views.HostFindView.as_view(), name="host_find"),
    path("pools/hosts/<pk:pk>/", views.HostView.as_view(), name="host"),
]

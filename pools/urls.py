"""Pool, host and tenant pages, the Admin's tenant and pool forms (namespace ``pools``)."""

from django.urls import path

import core.converters  # noqa: F401  (registers <pk:>)

from . import views

app_name = "pools"
urlpatterns = [
    path("pools/", views.PoolListView.as_view(), name="pool_list"),
    path("pools/<pk:pk>/", views.PoolView.as_view(), name="pool"),
    path("pools/<pk:pk>/allocate/", views.PoolAllocateView.as_view(), name="pool_allocate"),
    path("pools/allocations/<pk:pk>/release/", views.ReleaseView.as_view(), name="allocation_release"),
    path("pools/hosts/", views.HostListView.as_view(), name="host_list"),
    path("pools/hosts/find/", views.HostFindView.as_view(), name="host_find"),
    path("pools/hosts/<pk:pk>/", views.HostView.as_view(), name="host"),
]
urlpatterns += [
    path("pools/new/", views.PoolFormView.as_view(), name="pool_add"),
    path("pools/<pk:pk>/edit/", views.PoolFormView.as_view(), name="pool_edit"),
    path("pools/<pk:pk>/delete/", views.PoolDeleteView.as_view(), name="pool_delete"),
    path("pools/tenants/", views.TenantListView.as_view(), name="tenant_list"),
    path("pools/tenants/new/", views.TenantFormView.as_view(), name="tenant_add"),
    path("pools/tenants/<pk:pk>/edit/", views.TenantFormView.as_view(), name="tenant_edit"),
    path("pools/tenants/<pk:pk>/delete/", views.TenantDeleteView.as_view(), name="tenant_delete"),
]

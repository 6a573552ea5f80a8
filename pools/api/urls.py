"""``/api/pools/``: gpus, mig-slices, hosts (GPU inventories), agent (host reports), tenants,
pools, allocations (allocate/release), agent-tokens (the hosts an agent token may report for)."""

from django.urls import path
from rest_framework.routers import DefaultRouter

from . import views

app_name = "pools-api"
router = DefaultRouter()
router.register("gpus", views.GpuViewSet)
router.register("mig-slices", views.MigSliceViewSet)
router.register("hosts", views.HostInventoryViewSet)
router.register("tenants", views.TenantViewSet)
router.register("pools", views.PoolViewSet)
router.register("allocations", views.AllocationViewSet)
router.register("agent-tokens", views.AgentTokenViewSet, basename="agenttoken")
urlpatterns = [path("agent/", views.AgentReportView.as_view(), name="agent"), *router.urls]

"""``/api/devices/``: devices, interfaces, sensors, neighbours (LLDP links)."""

from rest_framework.routers import DefaultRouter

from . import views

app_name = "devices-api"
router = DefaultRouter()
router.register("devices", views.DeviceViewSet)
router.register("interfaces", views.InterfaceViewSet)
router.register("sensors", views.SensorViewSet)
router.register("neighbours", views.NeighbourViewSet)
urlpatterns = router.urls

app_name = "telemetry-api"
urlpatterns: list = []

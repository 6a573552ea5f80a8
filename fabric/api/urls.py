app_name = "fabric-api"
urlpatterns: list = []

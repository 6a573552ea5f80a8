app_name = "events-api"
urlpatterns: list = []

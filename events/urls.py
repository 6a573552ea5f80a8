app_name = "events"
urlpatterns: list = []

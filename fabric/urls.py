app_name = "fabric"
urlpatterns: list = []

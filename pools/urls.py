"""Pool pages (namespace ``pools``)."""

from django.urls import path

from . import views

app_name = "pools"
urlpatterns = [path("pools/", views.PoolListView.as_view(), name="pool_list")]

from django.contrib.auth import views as auth_views
from django.urls import path

import core.converters  # noqa: F401  (registers <pk:>)

from . import views

app_name = "accounts"
urlpatterns = [
    path("login/", views.SignInView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("users/", views.UserListView.as_view(), name="user_list"),
    path("users/<pk:pk>/", views.UserView.as_view(), name="user"),
    path("audit/", views.AuditLogView.as_view(), name="audit_log"),
]

"""OpenID Connect sign-in (``accounts.oidc_auth``), at the root (``/oidc/...``): mozilla-django-oidc
reverses these names without a namespace. The provider's redirect URI is ``<Weft>/oidc/callback/``."""

from django.urls import path

from . import oidc_auth

urlpatterns = [
    path("authenticate/", oidc_auth.SignInStartView.as_view(), name="oidc_authentication_init"),
    path("callback/", oidc_auth.SignInCallbackView.as_view(), name="oidc_authentication_callback"),
]

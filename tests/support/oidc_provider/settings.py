"""Settings of the test OpenID Connect provider (``tests.support.oidc_provider``): its own
database (``$OIDC_TEST_DB``) and site URL (``$OIDC_TEST_SITE_URL``), nothing of Weft's."""

import os
from pathlib import Path

SECRET_KEY = "oidc-test-provider-not-secret-0123456789abcdef"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oidc_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
ROOT_URLCONF = "tests.support.oidc_provider.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [Path(__file__).parent / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["OIDC_TEST_DB"]}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
USE_TZ = True
LOGIN_URL = "/accounts/login/"
# cookies are per host, not per port: with Weft's names on the same 127.0.0.1 the provider's
# session would replace Weft's in a browser
SESSION_COOKIE_NAME = "idp_sessionid"
CSRF_COOKIE_NAME = "idp_csrftoken"
SITE_URL = os.environ["OIDC_TEST_SITE_URL"]
OIDC_USERINFO = "tests.support.oidc_provider.claims.userinfo"
OIDC_EXTRA_SCOPE_CLAIMS = "tests.support.oidc_provider.claims.GroupsScopeClaims"
LOGGING = {"version": 1, "root": {"level": "WARNING"}}

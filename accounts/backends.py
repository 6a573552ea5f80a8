"""Weft's password backend (``AUTHENTICATION_BACKENDS``)."""

from __future__ import annotations

from django.contrib.auth.backends import ModelBackend


class UserNameCheckedBackend(ModelBackend):
    """Django's :class:`~django.contrib.auth.backends.ModelBackend` that does not look up a user
    name no user can have: one holding a NUL (PostgreSQL refuses it in a query: the lookup was a
    DataError, a 500 of ``/dologin`` and the UFM API's Basic, which pass the name as sent). Such a
    sign-in fails as a wrong password does (``None``: counted by axes, audited)."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if isinstance(username, str) and "\x00" in username:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)

"""URLs of the UFM-compatible API, included three times by ``weft.urls``: under ``/ufmRest/``
(HTTP Basic), ``/ufmRestV3/`` (UFM token) and ``/ufmRestV2/`` (``/dologin`` session), the same
handlers with the authentication of their prefix (``ufm.auth``). Every path is matched with and
without a trailing slash: clients call both ``.../pkeys`` and ``.../pkeys/?...``, and a redirect
would lose a POST's body."""

from __future__ import annotations

from django.urls import re_path
from rest_framework.authentication import SessionAuthentication

from . import views
from .auth import UfmBasicAuthentication, UfmTokenAuthentication

#: (path regex without the trailing slash, view, name); ``(?P<...>)`` groups are the handler's arguments
ROUTES = [
    (r"app/ufm_version", views.VersionView, "version"),
    (r"app/tokens", views.TokenView, "tokens"),
    (r"app/smconf", views.SmConfView, "smconf"),
    (r"app/versioning", views.VersioningView, "versioning"),
    (r"app/events", views.EventsView, "events"),
    (r"app/events/(?P<event_id>[0-9]{1,12})", views.EventView, "event"),
    (r"app/alarms", views.AlarmsView, "alarms"),
    (r"app/unhealthy_ports", views.UnhealthyPortsView, "unhealthy-ports"),
    (r"resources/ports", views.PortsView, "ports"),
    (r"resources/systems", views.SystemsView, "systems"),
    (r"resources/systems/(?P<system>[^/]+)", views.SystemView, "system"),
    (r"resources/links", views.LinksView, "links"),
    (r"resources/pkeys", views.PKeysView, "pkeys"),
    (r"resources/pkeys/add", views.PKeyAddView, "pkey-add"),
    (r"resources/pkeys/qos_conf", views.PKeyQosView, "pkey-qos"),
    (r"resources/pkeys/hosts", views.PKeyHostsView, "pkey-hosts"),
    (
        r"resources/pkeys/(?P<pkey>[^/]+)/hosts/(?P<hosts>[^/]+)",
        views.PKeyHostsDeleteView,
        "pkey-hosts-delete",
    ),
    (r"resources/pkeys/(?P<pkey>[^/]+)", views.PKeyView, "pkey"),
    (r"actions/remove_guids_from_pkey", views.RemoveGuidsView, "remove-guids"),
    (r"actions", views.ActionsView, "actions"),
    (r"jobs/(?P<job_id>[0-9]{1,12})", views.JobView, "job"),
]

#: the authentication of each prefix (``weft.urls`` includes ``patterns(kind)`` under it)
AUTHENTICATION = {
    "basic": [UfmBasicAuthentication],
    "token": [UfmTokenAuthentication],
    "session": [SessionAuthentication],
}


def patterns(kind: str) -> list:
    """The URL patterns of the API with the authentication of ``kind`` (``basic``, ``token``,
    ``session``)."""
    auth = AUTHENTICATION[kind]
    return [re_path(rf"^{regex}/?$", view.as_view(authentication_classes=auth), name=name)
            for regex, view, name in ROUTES]  # fmt: skip

"""Errors under ``/api/`` answer JSON, elsewhere the styled pages (``core.api.errors`` as the
project's ``handler400/403/404/500``): an API client that mistypes an endpoint or hits a server
fault gets ``{"detail": …}``, never the HTML page."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied
from django.test import RequestFactory

from core.api import errors as api_errors


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path",
    ["/api/nonexistent/", "/api/fabric/no-such-thing/", "/api/fabric/fabrics/x/y/z/", "/ufmRest/no/such/call",
     "/ufmRestV3/resources/nothing-here"],
)  # fmt: skip
def test_an_unknown_api_path_is_a_json_404(viewer, anonymous, path):
    for client in (viewer, anonymous):
        response = client.get(path)
        assert response.status_code == 404
        assert response["Content-Type"] == "application/json"
        assert response.json() == {"detail": "Not found."}


@pytest.mark.django_db
def test_an_unknown_page_is_still_the_html_404(viewer):
    response = viewer.get("/no-such-page/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")
    html = response.content.decode()
    assert 'id="error-page" data-status="404"' in html and "/no-such-page/" in html
    # a missing object under a page (Http404 raised by a view) is the page too
    response = viewer.get("/fabric/999999/compare/")
    assert response.status_code == 404 and 'data-status="404"' in response.content.decode()


@pytest.mark.django_db
def test_a_server_fault_under_the_api_is_a_json_500(client_for, monkeypatch):
    from fabric.api.views import FabricViewSet

    def boom(self, request, *args, **kwargs):
        raise RuntimeError("a bug, not the user's fault")

    monkeypatch.setattr(FabricViewSet, "list", boom)
    client = client_for("viewer", raise_request_exception=False)
    response = client.get("/api/fabric/fabrics/")
    assert response.status_code == 500
    assert response.json() == {"detail": "Server error."}
    assert "a bug" not in response.content.decode()


def test_403_400_500_handlers_split_api_and_pages(db):
    rf = RequestFactory()
    api, page = rf.get("/api/fabric/fabrics/"), rf.get("/fabric/")
    denied = api_errors.permission_denied(api, PermissionDenied("no"))
    assert denied.status_code == 403 and denied["Content-Type"] == "application/json"
    assert b"permission" in denied.content
    assert api_errors.bad_request(api).status_code == 400
    assert api_errors.server_error(api)["Content-Type"] == "application/json"
    denied = api_errors.permission_denied(page, PermissionDenied("no"))
    assert denied.status_code == 403 and denied["Content-Type"].startswith("text/html")
    assert api_errors.server_error(page)["Content-Type"].startswith("text/html")

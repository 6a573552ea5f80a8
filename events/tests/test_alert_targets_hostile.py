"""Alert targets (issue 26 §2) as a careless Admin or a curious Viewer would use them: URLs no
receiver has, the "send test" button by a role that may not press it, and a receiver that
redirects the test elsewhere. Each is a clear 4xx or a failed delivery that says why; nothing is
stored from a refused request."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from events.models import AlertTarget

API = "/api/fabric/alert-targets/"


@pytest.mark.parametrize(
    "kind, url, said",
    [
        ("webhook", "file:///etc/passwd", "an http:// or https:// URL with a host"),
        ("webhook", "gopher://127.0.0.1:70/_x", "an http:// or https:// URL with a host"),
        ("slack", "http:///no-host", "an http:// or https:// URL with a host"),
        ("alertmanager", "http://127.0.0.1:9093/api v2", "without spaces or control characters"),
        ("webhook", "http://127.0.0.1:9/hook\nX-Injected: 1", "without spaces or control characters"),
        ("webhook", "http://127.0.0.1:9/ho\tok", "without spaces or control characters"),
        ("syslog", "udp://127.0.0.1:55\r14", "without spaces or control characters"),
        ("syslog", "syslog://127.0.0.1:514", "udp://host:port or tcp://host:port"),
    ],
)
def test_a_url_no_receiver_has_is_a_400_on_the_api_and_the_page(users, client_for, kind, url, said):
    """A tab or a line break inside the URL passed the check (urlsplit drops them silently) and
    every send then failed in http.client; the others were refused already."""
    admin = client_for("admin")
    answer = admin.post(API, {"name": "t", "kind": kind, "url": url}, format="json")
    assert answer.status_code == 400 and said in str(answer.json()["url"]), answer.content
    page = admin.post(
        "/alert-targets/add/", {"name": "t", "kind": kind, "url": url, "min_severity": "warning"}
    )
    assert page.status_code == 400 and said in page.content.decode()
    assert not AlertTarget.objects.exists()


def test_send_test_and_the_delivery_log_are_refused_below_admin(users, client_for):
    target = AlertTarget.objects.create(name="noc", kind="webhook", url="http://127.0.0.1:9/hook")
    for role in ("viewer", "operator"):
        client = client_for(role)
        assert client.post(f"{API}{target.pk}/test/").status_code == 403
        assert client.get(f"{API}{target.pk}/deliveries/").status_code == 403
        assert client.post(f"/alert-targets/{target.pk}/test/").status_code == 403
        assert client.post(f"/alert-targets/{target.pk}/delete/").status_code == 403
    assert AlertTarget.objects.filter(pk=target.pk).exists()
    from outbound.models import WebhookDelivery

    assert not WebhookDelivery.objects.exists()  # nothing was sent


def test_send_test_to_a_redirecting_receiver_says_where_it_was_sent(users, client_for):
    """The receiver answers 302 to a page that answers 200: the test said "delivered"."""
    got: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            got.append(f"POST {self.path}")
            self.send_response(302)
            self.send_header("Location", "/elsewhere")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self):
            got.append(f"GET {self.path}")
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        target = AlertTarget.objects.create(name="moved", kind="slack", url=url)
        result = client_for("admin").post(f"{API}{target.pk}/test/").json()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
    assert (result["status"], result["response_code"]) == ("failed", 302)
    assert "redirected to /elsewhere, not followed" in result["last_error"]
    assert got == ["POST /hook"]

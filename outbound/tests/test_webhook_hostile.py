"""Webhook receivers that misbehave (issue 26 §2), real ones on loopback: a receiver that
redirects, and one that answers a byte at a time. Neither may make a delivery count as delivered
when it was not, nor hold the worker (or the "send test" request) beyond the attempt's bound."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from outbound.models import WebhookDelivery
from outbound.services import deliver, queue_webhook


class _Server:
    """A loopback HTTP server whose handler is ``handler_class``; records ``(method, path)``."""

    def __init__(self, make_handler):
        self.got: list[tuple[str, str]] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(self))
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


def _landing(outer: _Server):
    class Handler(BaseHTTPRequestHandler):
        def _any(self):
            outer.got.append((self.command, self.path))
            self.send_response(200)
            self.send_header("Content-Length", "9")
            self.end_headers()
            self.wfile.write(b"<html/>ok")

        do_GET = do_POST = _any

        def log_message(self, *args):
            pass

    return Handler


def _redirecting(to: str):
    def make(outer: _Server):
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                outer.got.append((self.command, self.path))
                self.send_response(302)
                self.send_header("Location", to)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        return Handler

    return make


@pytest.fixture
def landing():
    server = _Server(_landing)
    yield server
    server.close()


@pytest.mark.django_db
def test_a_redirect_is_not_followed_and_the_delivery_gives_up_saying_where(landing):
    """urllib followed a 302 by sending a GET without the signed body to the Location, and its
    200 (a login page, say) counted the alarm as delivered."""
    redirect = _Server(_redirecting(f"{landing.base}/login"))
    try:
        row = queue_webhook(f"{redirect.base}/hook", "k", "alarm.raised", {"alarm": {"id": 1}})
        assert deliver(row.pk) == "failed"
    finally:
        redirect.close()
    row = WebhookDelivery.objects.get(pk=row.pk)
    assert (row.status, row.response_code, row.attempts, row.delivered_at) == ("failed", 302, 1, None)
    assert f"redirected to {landing.base}/login, not followed" in row.last_error
    assert redirect.got == [("POST", "/hook")] and landing.got == []


class _Trickler:
    """A TCP server that answers every connection with a status line and then one header byte
    every ``step_s`` seconds, for up to ``for_s`` seconds, then ends the answer properly: each
    read gets a byte well within any socket timeout."""

    def __init__(self, step_s: float = 0.2, for_s: float = 20.0):
        self.stop = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/hook"
        self.step_s, self.for_s = step_s, for_s
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.listener.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
                steps = int(self.for_s / self.step_s)
                for _ in range(steps):
                    if self.stop.wait(self.step_s):
                        return
                    conn.sendall(b"x")
                conn.sendall(b"\r\nContent-Length: 0\r\n\r\n")
            except OSError:
                pass  # the client closed the connection

    def close(self) -> None:
        self.stop.set()
        self.listener.close()
        self.thread.join(5)


@pytest.mark.django_db
def test_a_receiver_answering_a_byte_at_a_time_is_cut_off(settings):
    """Each byte comes within the socket timeout, so urllib's timeout never fired: the attempt
    lasted as long as the receiver liked (here 20 s, then "delivered"). The whole answer must
    come within ``WEFT_WEBHOOK_TIMEOUT_S`` of the connection: the attempt fails and is retried."""
    settings.WEFT_WEBHOOK_TIMEOUT_S = 1.0
    slow = _Trickler()
    try:
        row = queue_webhook(slow.url, "k", "alarm.raised", {"alarm": {"id": 2}})
        assert deliver(row.pk) == "pending"
    finally:
        slow.close()
    row = WebhookDelivery.objects.get(pk=row.pk)
    assert (row.status, row.response_code, row.attempts) == ("pending", None, 1)
    assert row.last_error == "TimeoutError: no complete answer within 1 s (connection closed)"

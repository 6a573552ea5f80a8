"""Signed outbound webhooks (``outbound.services``) against a real HTTP receiver on loopback
(stdlib ``http.server`` in a thread): the signature a receiver can verify, the headers, retries
with back-off on 5xx and on a refused connection, giving up on a 4xx and after the last attempt,
and a job's state changes posted to its tenant's webhook."""

from __future__ import annotations

import json
import socket
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.utils import timezone

from outbound.models import WebhookDelivery
from outbound.services import backoff_s, deliver, prune, queue_webhook, retry_due, sign, verify


class Receiver:
    """A loopback HTTP server that records every POST and answers the next code of ``codes``
    (the last one repeated)."""

    def __init__(self, codes=(200,)):
        self.codes = list(codes)
        self.got: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.got.append({"headers": dict(self.headers), "body": body})
                code = outer.codes.pop(0) if len(outer.codes) > 1 else outer.codes[0]
                self.send_response(code)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def test_sign_is_hmac_sha256_of_the_body():
    # RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?"
    assert sign("Jefe", b"what do ya want for nothing?") == (
        "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    )
    assert verify("Jefe", b"what do ya want for nothing?", sign("Jefe", b"what do ya want for nothing?"))
    assert not verify("Jefe", b"what do ya want for nothing!", sign("Jefe", b"what do ya want for nothing?"))


def test_a_delivery_is_signed_logged_and_verifiable_by_the_receiver(db, receiver):
    row = queue_webhook(receiver.url, "s3cret", "job.degraded", {"job": {"id": 33}}, source="job:33")
    assert deliver(row.pk) == "delivered"
    (req,) = receiver.got
    h = {k.lower(): v for k, v in req["headers"].items()}
    assert verify("s3cret", req["body"], h["x-weft-signature"])
    assert not verify("other", req["body"], h["x-weft-signature"])
    body = json.loads(req["body"])
    assert body == {"event": "job.degraded", "timestamp": int(h["x-weft-timestamp"]), "delivery": row.pk,
                    "data": {"job": {"id": 33}}}  # fmt: skip
    assert h["x-weft-event"] == "job.degraded" and h["x-weft-delivery"] == str(row.pk)
    row.refresh_from_db()
    assert (row.status, row.attempts, row.response_code, row.next_attempt_at) == ("delivered", 1, 200, None)
    assert deliver(row.pk) == "skipped" and len(receiver.got) == 1  # never sent twice
    assert queue_webhook("", "x", "job.degraded", {}) is None


def test_5xx_is_retried_with_back_off_and_4xx_gives_up(db, settings):
    settings.WEFT_WEBHOOK_BACKOFF_S = 10
    r = Receiver(codes=(503, 502, 200))
    try:
        row = queue_webhook(r.url, "k", "job.requeued", {"n": 1})
        t0 = timezone.now()
        assert deliver(row.pk, now=t0) == "pending"
        row.refresh_from_db()
        assert row.attempts == 1 and row.response_code == 503 and "503" in row.last_error
        wait = (row.next_attempt_at - t0).total_seconds()
        assert backoff_s(1) == 10 <= wait < 15
        assert retry_due(now=t0 + timedelta(seconds=5)) == {}  # not due yet
        assert retry_due(now=t0 + timedelta(seconds=15)) == {"pending": 1}
        row.refresh_from_db()
        assert (
            row.attempts == 2
            and 20 <= (row.next_attempt_at - t0 - timedelta(seconds=15)).total_seconds() < 25
        )
        assert retry_due(now=t0 + timedelta(seconds=60)) == {"delivered": 1}
        row.refresh_from_db()
        assert (row.status, row.attempts, row.response_code) == ("delivered", 3, 200)
        assert len(r.got) == 3 and len({g["body"] for g in r.got}) == 1  # the same bytes each time
    finally:
        r.close()
    r = Receiver(codes=(404,))
    try:
        row = queue_webhook(r.url, "k", "job.failed", {})
        assert deliver(row.pk) == "failed"
        row.refresh_from_db()
        assert (row.status, row.attempts, row.response_code, row.next_attempt_at) == ("failed", 1, 404, None)
    finally:
        r.close()


def test_a_receiver_that_is_down_is_tried_until_the_last_attempt(db, settings):
    settings.WEFT_WEBHOOK_MAX_ATTEMPTS = 2
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    row = queue_webhook(f"http://127.0.0.1:{port}/x", "k", "job.degraded", {})
    t0 = timezone.now()
    assert deliver(row.pk, now=t0) == "pending"
    row.refresh_from_db()
    assert row.response_code is None and "refused" in row.last_error.lower()
    assert retry_due(now=t0 + timedelta(hours=1)) == {"failed": 1}
    assert WebhookDelivery.objects.get(pk=row.pk).attempts == 2


def test_a_jobs_state_changes_go_to_its_tenants_webhook(db, receiver):
    from scheduler.services import faults
    from scheduler.services.queue import JobSpec, run_pass, start, submit
    from tests.support.jobs import gpu_cluster

    c = gpu_cluster(1, 2, 8, name="hook")
    c.tenant.webhook_url, c.tenant.webhook_secret = receiver.url, "tenant-key"
    c.tenant.save()
    job = submit(JobSpec(name="train", pool_id=c.pool.pk, count=8, gpus_per_host=8))
    run_pass()
    start(job.pk)
    faults.announce(job.pk, "running", "placed", "start")  # what scheduler.signals does on commit
    job.webhook_url, job.webhook_secret = receiver.url, "job-key"  # a job's own webhook wins
    job.save()
    faults.announce(job.pk, "degraded", "running", "fault")
    rows = list(WebhookDelivery.objects.order_by("pk"))
    assert [(r.event, r.source) for r in rows] == [
        ("job.running", f"job:{job.pk}"),
        ("job.degraded", f"job:{job.pk}"),
    ]
    assert retry_due() == {"delivered": 2}
    first, second = receiver.got
    assert verify("tenant-key", first["body"], first["headers"]["X-Weft-Signature"])
    assert verify("job-key", second["body"], second["headers"]["X-Weft-Signature"])
    data = json.loads(second["body"])["data"]
    assert data["job"]["id"] == job.pk and data["job"]["previous"] == "running" and data["source"] == "fault"


def test_prune_keeps_pending_and_recent_deliveries(db, settings):
    settings.WEFT_WEBHOOK_RETENTION_DAYS = 10
    old, recent, waiting = (queue_webhook("http://127.0.0.1:9/x", "k", "job.failed", {}) for _ in range(3))
    WebhookDelivery.objects.filter(pk__in=[old.pk, waiting.pk]).update(
        created=timezone.now() - timedelta(days=11)
    )
    WebhookDelivery.objects.filter(pk__in=[old.pk, recent.pk]).update(
        status="delivered", next_attempt_at=None
    )
    assert prune() == 1
    assert set(WebhookDelivery.objects.values_list("pk", flat=True)) == {recent.pk, waiting.pk}

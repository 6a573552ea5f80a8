"""Signed outbound webhooks (and syslog): queue a message in the caller's transaction, send it after commit,
retry with back-off (issue 24; issue 26 sends alarms through the same path).

Use it from any app::

    from outbound.services import queue_webhook
    queue_webhook(url, secret, "job.degraded", {"job": {...}}, source="job:33")

inside the transaction of the change it announces. The message is a JSON object
``{"event", "timestamp", "delivery", "data"}``; the request is ``POST url`` with
``Content-Type: application/json`` and the headers

* ``X-Weft-Event``: the event name;
* ``X-Weft-Delivery``: the delivery id (a receiver drops a repeat it has seen);
* ``X-Weft-Timestamp``: epoch seconds when queued (also in the body: a receiver may refuse old
  messages, a replay);
* ``X-Weft-Signature``: ``sha256=`` and the hex HMAC-SHA256 of the raw body under the shared
  secret (RFC 2104; the form GitHub's ``X-Hub-Signature-256`` uses). A receiver recomputes it
  over the bytes it got and compares in constant time (``hmac.compare_digest``):
  :func:`verify` does exactly that.

Delivery (:func:`deliver`): one attempt per call; a 2xx answer is delivered; a network error, a
timeout (``WEFT_WEBHOOK_TIMEOUT_S``), a 408, 429 or 5xx is tried again after
``WEFT_WEBHOOK_BACKOFF_S`` × 2^(attempts-1) seconds (at most an hour) until
``WEFT_WEBHOOK_MAX_ATTEMPTS`` attempts; any other answer (the receiver refuses it) gives up at
once, a redirect (3xx) too: it is not followed (:class:`_NoRedirect`). An attempt takes at most
twice ``WEFT_WEBHOOK_TIMEOUT_S`` (the connection, then the whole answer), however slowly the
receiver answers. A ``syslog+udp://`` or ``syslog+tcp://`` URL sends the body's lines as RFC 5424
messages instead (``outbound.syslog``): delivered when the transport took them (``response_code``
0), retried the same way on a refused connection or a timeout. Every attempt updates the delivery row (status, attempts, response code, error). The first
attempt is queued on commit (``outbound.tasks.deliver_task``); retries are picked up by
``outbound.tasks.retry_due_task`` (beat, every ``WEFT_WEBHOOK_RETRY_INTERVAL_S``). An attempt
claims its row for the timeout (``next_attempt_at`` moved past it) so two workers never send
one delivery at once.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import logging
import socket
import threading
import time
import urllib.error
import urllib.request
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.utils import timezone

from core import enqueue

from . import syslog
from .models import DeliveryStatus, WebhookDelivery

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Weft-Signature"
TIMESTAMP_HEADER = "X-Weft-Timestamp"
EVENT_HEADER = "X-Weft-Event"
DELIVERY_HEADER = "X-Weft-Delivery"
#: answers that are tried again (besides no answer at all)
RETRY_STATUSES = frozenset({408, 429})
#: the longest wait between two attempts, seconds
MAX_BACKOFF_S = 3600.0


def sign(secret: str, body: bytes) -> str:
    """``sha256=<hex>``: HMAC-SHA256 of ``body`` under ``secret`` (UTF-8), RFC 2104."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify(secret: str, body: bytes, signature: str) -> bool:
    """Whether ``signature`` (the ``X-Weft-Signature`` value) is ``body``'s under ``secret``
    (constant-time compare): what a receiver does."""
    return hmac.compare_digest(sign(secret, body), signature or "")


def queue_webhook(
    url: str, secret: str, event: str, data: dict[str, Any], *, source: str = "", target: str = "",
    now: datetime | None = None, send_on_commit: bool = True,
) -> WebhookDelivery | None:  # fmt: skip
    """Write a pending delivery of ``data`` to ``url`` in the caller's transaction and queue its
    first attempt on commit. ``secret`` signs it (an empty secret: ``sha256=`` of the empty key,
    still a checksum); ``target`` names the configured receiver (its delivery log);
    ``send_on_commit`` as for :func:`queue_message`. Returns the row, or None when ``url`` is
    empty (nothing to send)."""
    if not url:
        return None
    now = now or timezone.now()
    ts = int(now.timestamp())

    def envelope(row: WebhookDelivery) -> str:
        return json.dumps(
            {"event": event, "timestamp": ts, "delivery": row.pk, "data": data},
            cls=DjangoJSONEncoder, separators=(",", ":"), sort_keys=True,
        )  # fmt: skip

    return _queue(url, secret, event, envelope, source=source, target=target, now=now,
                  send_on_commit=send_on_commit)  # fmt: skip


def queue_message(
    url: str, secret: str, event: str, body: str, *, source: str = "", target: str = "",
    content_type: str = "application/json", now: datetime | None = None, send_on_commit: bool = True,
) -> WebhookDelivery | None:  # fmt: skip
    """As :func:`queue_webhook`, with the body given as it is to be sent (a receiver's own
    format: Slack's message, Alertmanager's alert list, syslog lines for a ``syslog+udp://`` or
    ``syslog+tcp://`` URL). It is signed the same way (``X-Weft-Signature``) for HTTP.
    ``send_on_commit=False``: the caller makes the first attempt itself (:func:`deliver`, e.g.
    a "send test" that shows its result); the retry sweep sends it if the caller does not."""
    if not url:
        return None
    return _queue(url, secret, event, lambda row: body, source=source, target=target,
                  content_type=content_type, now=now or timezone.now(), send_on_commit=send_on_commit)  # fmt: skip


def _queue(url, secret, event, make_body, *, source, target, now, content_type="application/json",
           send_on_commit=True):  # fmt: skip
    with transaction.atomic():
        row = WebhookDelivery.objects.create(
            url=url, event=event[:64], source=source[:64], target=target[:64], body="", signature="",
            timestamp=int(now.timestamp()), next_attempt_at=now, content_type=content_type[:64],
        )  # fmt: skip
        body = make_body(row)
        row.body, row.signature = body, sign(secret or "", body.encode())
        row.save(update_fields=["body", "signature"])

    def send() -> None:
        try:
            enqueue.send("outbound.deliver", row.pk)
        except Exception:  # the broker may be down: the retry sweep sends it
            log.warning("could not queue webhook delivery %s", row.pk, exc_info=True)

    if send_on_commit:
        transaction.on_commit(send)
    return row


def backoff_s(attempts: int) -> float:
    """Seconds before the next attempt after ``attempts`` failed ones."""
    return min(settings.WEFT_WEBHOOK_BACKOFF_S * 2 ** max(attempts - 1, 0), MAX_BACKOFF_S)


def _claim(delivery_id: int, now: datetime) -> WebhookDelivery | None:
    """The pending row, if due, claimed for one attempt (its ``next_attempt_at`` moved past the
    timeout); None when delivered, given up, not due, or claimed by another worker."""
    with transaction.atomic():
        row = (
            WebhookDelivery.objects.select_for_update(skip_locked=True)
            .filter(pk=delivery_id, status=DeliveryStatus.PENDING, next_attempt_at__lte=now)
            .first()
        )
        if row is None:
            return None
        # an attempt ends within twice the timeout (connection, then the answer: ``_post``)
        row.next_attempt_at = now + timedelta(seconds=2 * settings.WEFT_WEBHOOK_TIMEOUT_S + 30)
        row.save(update_fields=["next_attempt_at"])
        return row


def deliver(delivery_id: int, *, now: datetime | None = None) -> str:
    """One attempt of delivery ``delivery_id`` (module docstring). Returns the status after it
    (``delivered``, ``pending`` = will be tried again, ``failed`` = gave up) or ``skipped`` (not
    due, taken by another worker, or already done)."""
    now = now or timezone.now()
    row = _claim(delivery_id, now)
    if row is None:
        return "skipped"
    code: int | None = None
    error = ""
    t0 = time.monotonic()
    if row.url.startswith(syslog.SCHEMES):
        try:
            syslog.send(row.url, row.body.splitlines(), settings.WEFT_WEBHOOK_TIMEOUT_S)
        except Exception as exc:  # refused (TCP), unreachable, timeout, a bad address
            error = f"{type(exc).__name__}: {exc}"
        else:
            code = 0  # sent: syslog has no answer; 0 stands for "accepted by the transport"
    else:
        code, error = _post(row)
    attempts = row.attempts + 1
    done = now + timedelta(seconds=time.monotonic() - t0)
    if code == 0 or (code is not None and 200 <= code < 300):
        status, nxt, error = DeliveryStatus.DELIVERED, None, ""
    elif attempts >= settings.WEFT_WEBHOOK_MAX_ATTEMPTS or (
        code is not None and code < 500 and code not in RETRY_STATUSES
    ):
        status, nxt = DeliveryStatus.FAILED, None
    else:
        status, nxt = DeliveryStatus.PENDING, done + timedelta(seconds=backoff_s(attempts))
    WebhookDelivery.objects.filter(pk=row.pk).update(
        status=status, attempts=attempts, response_code=code, last_error=error[:500], next_attempt_at=nxt,
        delivered_at=done if status == DeliveryStatus.DELIVERED else None,
    )  # fmt: skip
    if status != DeliveryStatus.DELIVERED:
        log.info("webhook %s to %s: attempt %d %s (%s)", row.pk, row.url, attempts, status, error or code)
    return status


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A webhook is not redirected: urllib would turn the signed POST into a GET without its body
    (301/302/303) and count the page it lands on as delivered, or follow the receiver to another
    host or scheme. The 3xx answer stands: the delivery gives up and says where it was sent."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


def _deadline_connection(base: type, total_s: float, watch: list):
    """``base`` (``http.client.HTTPConnection`` or ``HTTPSConnection``) whose socket is shut down
    ``total_s`` seconds after it connected: the per-operation socket timeout does not bound a
    receiver that answers a byte at a time, which would hold the worker (and the "send test"
    request) as long as it likes. ``watch`` collects ``[timer, fired]`` for the caller to cancel."""

    class Connection(base):
        def connect(self):
            super().connect()
            entry: list = [None, False]
            sock = self.sock

            def expire() -> None:
                entry[1] = True
                try:
                    sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked read: it sees the end
                except OSError:
                    pass  # closed meanwhile

            entry[0] = threading.Timer(total_s, expire)
            entry[0].daemon = True
            watch.append(entry)
            entry[0].start()

    return Connection


def _opener(total_s: float, watch: list) -> urllib.request.OpenerDirector:
    """urllib with the environment's proxies as ever, no redirects (:class:`_NoRedirect`), and the
    whole answer within ``total_s`` of the connection (:func:`_deadline_connection`)."""
    http_conn = _deadline_connection(http.client.HTTPConnection, total_s, watch)
    https_conn = _deadline_connection(http.client.HTTPSConnection, total_s, watch)

    class HTTP(urllib.request.HTTPHandler):
        def http_open(self, req):
            return self.do_open(http_conn, req)

    class HTTPS(urllib.request.HTTPSHandler):
        def https_open(self, req):
            return self.do_open(https_conn, req, context=self._context)

    return urllib.request.build_opener(_NoRedirect, HTTP, HTTPS)


def _post(row: WebhookDelivery) -> tuple[int | None, str]:
    """POST the row's body with the Weft headers; ``(HTTP status or None, error text)``.

    The connection and the whole answer each take at most ``WEFT_WEBHOOK_TIMEOUT_S`` (so an
    attempt ends within twice that); a redirect is not followed (:class:`_NoRedirect`): its 3xx
    is the answer, with the ``Location`` in the error."""
    timeout = settings.WEFT_WEBHOOK_TIMEOUT_S
    req = urllib.request.Request(row.url, data=row.body.encode(), method="POST", headers={
        "Content-Type": row.content_type or "application/json", "User-Agent": "Weft-Webhook/1",
        SIGNATURE_HEADER: row.signature, TIMESTAMP_HEADER: str(row.timestamp), EVENT_HEADER: row.event,
        DELIVERY_HEADER: str(row.pk),
    })  # fmt: skip
    watch: list = []
    late = f"TimeoutError: no complete answer within {timeout:g} s (connection closed)"
    try:
        with _opener(timeout, watch).open(req, timeout=timeout) as resp:
            status = resp.status
        # cut off mid-headers, http.client takes the end of the stream for the end of the headers
        return (None, late) if any(fired for _, fired in watch) else (status, "")
    except urllib.error.HTTPError as exc:
        if 300 <= exc.code < 400:
            where = (exc.headers.get("Location") or "")[:200] if exc.headers else ""
            return exc.code, (
                f"HTTP {exc.code} {exc.reason}: redirected to {where or '(no Location)'}, not followed: "
                "give the target the final URL"
            )
        return exc.code, f"HTTP {exc.code} {exc.reason}"
    except Exception as exc:  # refused, unreachable, timeout, TLS...
        if any(fired for _, fired in watch):
            return None, late
        return None, f"{type(exc).__name__}: {exc}"
    finally:
        for timer, _ in watch:
            timer.cancel()


def due(now: datetime | None = None, limit: int = 100) -> list[int]:
    """Ids of pending deliveries whose next attempt is due at ``now`` (oldest first)."""
    now = now or timezone.now()
    return list(
        WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING, next_attempt_at__lte=now)
        .order_by("next_attempt_at", "pk")
        .values_list("pk", flat=True)[:limit]
    )


def retry_due(now: datetime | None = None) -> dict[str, int]:
    """Attempt every due delivery once (the beat's retry sweep); returns counts per status."""
    out: dict[str, int] = {}
    for pk in due(now):
        status = deliver(pk, now=now)
        out[status] = out.get(status, 0) + 1
    return out


def prune(now: datetime | None = None) -> int:
    """Delete deliveries no longer pending (delivered or given up) created more than
    ``WEFT_WEBHOOK_RETENTION_DAYS`` ago (daily, by beat); pending ones stay. Returns the count."""
    now = now or timezone.now()
    cutoff = now - timedelta(days=settings.WEFT_WEBHOOK_RETENTION_DAYS)
    deleted, _ = (
        WebhookDelivery.objects.exclude(status=DeliveryStatus.PENDING).filter(created__lt=cutoff).delete()
    )
    return deleted
